package giftgenius

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mementohq/memento/agent"
)

// Steps of a gift search, as the session state names them. A step is also
// the label of the checkpoint taken when it is reached.
const (
	StepCollect    = "collect-profile"
	StepProfile    = "profile-collected"
	StepCandidates = "candidates-generated"
	StepFiltered   = "filtered"
	StepFinal      = "final-choice"
)

// Namespace is where recipient profiles are kept long term, one claim per
// recipient (key: the recipient's name in lower case).
const Namespace = "giftgenius.recipients"

// State is the session state: the step, the profile being collected,
// product ids (never products: the catalogue holds those) and the locale.
type State struct {
	Step              string   `json:"step,omitempty"`
	Locale            string   `json:"locale,omitempty"`
	Profile           *Profile `json:"profile_draft,omitempty"`
	CandidateIDs      []string `json:"candidate_ids,omitempty"`
	KeptIDs           []string `json:"kept_ids,omitempty"`
	ChoiceID          string   `json:"choice_id,omitempty"`
	PreviousChoiceIDs []string `json:"previous_choice_ids,omitempty"`
}

// Profile is what is known about a recipient. DeliverWithinDays belongs to
// one occasion: it stays in the session and is not kept long term.
type Profile struct {
	Recipient         string   `json:"recipient,omitempty"`
	Relation          string   `json:"relation,omitempty"`
	Interests         []string `json:"interests,omitempty"`
	BudgetEUR         int      `json:"budget_eur,omitempty"`
	Region            string   `json:"region,omitempty"`
	DeliverWithinDays int      `json:"deliver_within_days,omitempty"`
}

// Key is the profile's memory key.
func (p Profile) Key() string { return RecipientKey(p.Recipient) }

// RecipientKey is the memory key of a recipient.
func RecipientKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Missing lists what a complete profile still lacks, in the order a person
// would be asked.
func (p Profile) Missing() []string {
	var m []string
	if p.Recipient == "" {
		m = append(m, FieldRecipient)
	}
	if len(p.Interests) == 0 {
		m = append(m, FieldInterests)
	}
	if p.BudgetEUR <= 0 {
		m = append(m, FieldBudget)
	}
	if p.Region == "" {
		m = append(m, FieldRegion)
	}
	return m
}

// Lasting is the part of the profile kept long term.
func (p Profile) Lasting() Profile {
	p.DeliverWithinDays = 0
	p.Interests = slices.Clone(p.Interests)
	return p
}

// Equal reports whether two profiles say the same.
func (p Profile) Equal(q Profile) bool {
	return p.Recipient == q.Recipient && p.Relation == q.Relation && slices.Equal(p.Interests, q.Interests) &&
		p.BudgetEUR == q.BudgetEUR && p.Region == q.Region && p.DeliverWithinDays == q.DeliverWithinDays
}

// Summary is the profile in one line, for memory text and answers.
func (p Profile) Summary() string {
	var b strings.Builder
	b.WriteString(p.Recipient)
	if p.Relation != "" {
		b.WriteString(" (" + p.Relation + ")")
	}
	if len(p.Interests) > 0 {
		b.WriteString(": likes " + strings.Join(p.Interests, ", "))
	}
	if p.BudgetEUR > 0 {
		fmt.Fprintf(&b, "; budget %d EUR", p.BudgetEUR)
	}
	if p.Region != "" {
		b.WriteString("; ships to " + p.Region)
	}
	return b.String()
}

// patch is the profile as a JSON merge patch member: every field present,
// null where empty, so the patch replaces the draft rather than merging
// into it.
func (p Profile) patch() map[string]any {
	m := map[string]any{"recipient": nil, "relation": nil, "interests": nil, "budget_eur": nil, "region": nil, "deliver_within_days": nil}
	if p.Recipient != "" {
		m["recipient"] = p.Recipient
	}
	if p.Relation != "" {
		m["relation"] = p.Relation
	}
	if len(p.Interests) > 0 {
		m["interests"] = p.Interests
	}
	if p.BudgetEUR > 0 {
		m["budget_eur"] = p.BudgetEUR
	}
	if p.Region != "" {
		m["region"] = p.Region
	}
	if p.DeliverWithinDays > 0 {
		m["deliver_within_days"] = p.DeliverWithinDays
	}
	return m
}

// session reads and patches one session's state through Memento's tools,
// as the app's own tools do: what they find goes into the state as ids,
// before the loop checkpoints it.
type session struct {
	tools agent.Tools
	id    string
}

func (s session) get(ctx context.Context) (State, error) {
	r, err := call(ctx, s.tools, "session_get", map[string]any{"session_id": s.id})
	if err != nil {
		return State{}, err
	}
	var out struct {
		State State `json:"state"`
	}
	if err := json.Unmarshal(r.JSON, &out); err != nil {
		return State{}, fmt.Errorf("giftgenius: session_get answered %s: %w", r.Text, err)
	}
	return out.State, nil
}

func (s session) patch(ctx context.Context, patch map[string]any) error {
	_, err := call(ctx, s.tools, "session_patch", map[string]any{"session_id": s.id, "patch": patch})
	return err
}

// call calls a tool and turns a failed result into an error.
func call(ctx context.Context, tools agent.Tools, name string, args any) (agent.ToolResult, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return agent.ToolResult{}, fmt.Errorf("giftgenius: encode %s arguments: %w", name, err)
	}
	r, err := tools.Call(ctx, name, b)
	if err != nil {
		return r, fmt.Errorf("giftgenius: %s: %w", name, err)
	}
	if r.IsError {
		return r, fmt.Errorf("giftgenius: %s failed: %s", name, r.Text)
	}
	return r, nil
}
