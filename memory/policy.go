package memory

import "fmt"

// verdict is what policy decided about a claim that is not simply kept.
type verdict struct {
	held   bool // keep aside until the user confirms
	reason string
	err    error // the sentinel a refusal wraps
}

// policy decides whether a claim may be kept long term (DESIGN.md rule 9):
// a model's guess is refused, a transient state (a mood) is refused, and a
// sensitive category, or a sensitive namespace, is held unless the user
// confirmed it or an operator entered it.
func policy(c Claim, ns Namespace) *verdict {
	by := c.Provenance.ValidatedBy
	switch {
	case by == ValidatedModelInferred:
		return &verdict{reason: "inferred by a model, not stated by the user or confirmed by a tool: not kept long term", err: ErrRefused}
	case TransientCategory(c.Category) || TransientCategory(c.Key):
		return &verdict{reason: fmt.Sprintf("%s is a passing state, not a long-term fact", orKey(c.Category, c.Key, TransientCategory)), err: ErrRefused}
	case (SensitiveCategory(c.Category) || SensitiveCategory(c.Key) || ns.Sensitive) && by != ValidatedUserConfirmed && by != ValidatedOperator:
		return &verdict{held: true}
	}
	return nil
}

// orKey names the category a claim falls in: its own, or else its key's
// first segment ("health.conditions.diabetes" is health), so that what the
// category decides cannot be avoided by leaving the category out.
func orKey(category, key string, special func(string) bool) string {
	if special(category) {
		return category
	}
	return categoryRoot(key)
}

func heldReason(c Claim) string {
	if SensitiveCategory(c.Category) || SensitiveCategory(c.Key) {
		return fmt.Sprintf("%s is a sensitive category: held until the user confirms it", orKey(c.Category, c.Key, SensitiveCategory))
	}
	return fmt.Sprintf("namespace %s is sensitive: held until the user confirms it", c.Namespace)
}
