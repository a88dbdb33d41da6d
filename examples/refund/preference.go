package refund

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/workflow"
)

// The one long-term fact the workflow keeps about a customer: how they want
// refunds paid, once they stated it and confirmed it when asked.
const (
	PreferenceNamespace = "refunds"
	PreferenceKey       = "refund_method"

	MethodOriginal = "original_payment_method"
)

// Where a decision's refund method came from (Decision.RefundToSource).
const (
	SourceDialog  = "dialog"  // confirmed in this run's dialog
	SourceMemory  = "memory"  // read from long-term memory (memory_id in Preference)
	SourceDefault = "default" // nothing said or kept: the original method
)

// Preference is the state field "preference": the customer's kept claim as
// the recall step read it, with its provenance.
type Preference struct {
	MemoryID   string            `json:"memory_id"`
	Value      string            `json:"value"`
	Provenance memory.Provenance `json:"provenance"`
}

// Remembered is the state field "remembered": what the remember step wrote.
type Remembered struct {
	MemoryID string         `json:"memory_id,omitempty"`
	Outcome  memory.Outcome `json:"outcome"`
	Reason   string         `json:"reason,omitempty"`
}

// recallPreference reads the customer's current refund-method claim, if any.
func recallPreference(ctx context.Context, mem *memory.Service, tenantID, customer string) (*Preference, error) {
	cs, _, err := mem.List(ctx, tenantID, memory.Query{SubjectID: customer, Namespace: PreferenceNamespace, Key: PreferenceKey, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("recall preference of %s: %w", customer, err)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	var v string
	if err := json.Unmarshal(cs[0].Value, &v); err != nil {
		return nil, fmt.Errorf("preference %s of %s is not a string: %w", cs[0].MemoryID, customer, err)
	}
	return &Preference{MemoryID: cs[0].MemoryID, Value: v, Provenance: cs[0].Provenance}, nil
}

// eventOfStep is the seq of the last event that committed step (0: none).
func eventOfStep(ctx context.Context, runs *run.Service, tenantID, runID, step string) (int64, error) {
	var seq, after int64
	for {
		evs, err := runs.Events(ctx, tenantID, runID, after, run.MaxListLimit)
		if err != nil {
			return 0, err
		}
		for _, ev := range evs {
			if ev.EventType == workflow.EventStepCompleted && ev.StepID == step {
				seq = ev.Seq
			}
		}
		if len(evs) < run.MaxListLimit {
			return seq, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// rememberPreference keeps a confirmed preference long term, with its
// provenance: the dialog's messages that stated and confirmed it, the run
// and the event that recorded it. Writing it again (a step redone after a
// crash) refreshes the same claim instead of adding one.
func rememberPreference(ctx context.Context, mem *memory.Service, tenantID, customer, sessionID, runID string, eventSeq int64, p preferenceCandidate) (Remembered, error) {
	value, _ := json.Marshal(p.Value)
	ids := make([]string, len(p.Seqs))
	for i, s := range p.Seqs {
		ids[i] = strconv.FormatInt(s, 10)
	}
	res, err := mem.Add(ctx, tenantID, memory.AddInput{
		SubjectID: customer, Namespace: PreferenceNamespace, Key: p.Key, Value: value, Category: "preference",
		Text: "refunds go to " + p.Value,
		Provenance: memory.Provenance{SourceType: memory.SourceMessage, SourceID: sessionID, RunID: runID, EventSeq: eventSeq,
			MessageIDs: ids, ValidatedBy: memory.ValidatedUserConfirmed},
		ConsentBasis: fmt.Sprintf("the customer asked to remember it (message %d of %s)", p.ConfirmSeq, sessionID),
	})
	var refused *memory.Refusal
	if errors.As(err, &refused) {
		// Policy keeps it out (the customer had their memory forgotten, say): not the run's failure.
		return Remembered{Outcome: memory.OutcomeRefused, Reason: refused.Reason}, nil
	}
	if err != nil {
		return Remembered{}, fmt.Errorf("remember preference of %s: %w", customer, err)
	}
	return Remembered{MemoryID: res.Claim.MemoryID, Outcome: res.Outcome}, nil
}
