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
	case TransientCategory(c.Category):
		return &verdict{reason: fmt.Sprintf("%s is a passing state, not a long-term fact", c.Category), err: ErrRefused}
	case (SensitiveCategory(c.Category) || ns.Sensitive) && by != ValidatedUserConfirmed && by != ValidatedOperator:
		return &verdict{held: true}
	}
	return nil
}

func heldReason(c Claim) string {
	if SensitiveCategory(c.Category) {
		return fmt.Sprintf("%s is a sensitive category: held until the user confirms it", c.Category)
	}
	return fmt.Sprintf("namespace %s is sensitive: held until the user confirms it", c.Namespace)
}
