package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

// Sentinel errors callers branch on.
var (
	ErrUnknownWorkflow = errors.New("workflow not registered")
	ErrRejected        = errors.New("approval rejected")
	ErrOperationFailed = errors.New("operation failed")
	ErrReservedKey     = errors.New("state key is reserved")
	// ErrIncompatibleVersion: the run was started by a version of its
	// workflow that this engine's code neither is nor lists as Compatible.
	// Drive leaves such a run as it is (running, or suspended), for a
	// worker that runs its version; Serve passes over it.
	ErrIncompatibleVersion = errors.New("workflow version not served here")
)

// Step is one named unit of a workflow. Its effects on the state are
// committed together with the step's event; it runs again only if it did
// not commit (a crash, or an error with attempts left).
type Step struct {
	Name string
	Run  func(ctx context.Context, sc *StepContext) error
	// MaxAttempts bounds how often a failing step is tried (0 means 3).
	MaxAttempts int
}

// Workflow is an ordered list of named steps. A step continues to the next
// one in the list unless it calls Goto, Complete or FailRun.
type Workflow struct {
	Name    string
	Version string
	// Compatible lists older versions whose runs this code can continue.
	Compatible []string
	// SchemaVersion is the state schema version new runs start with (0: the
	// registry's current version, else 1).
	SchemaVersion int
	Steps         []Step
	// Budget limits each run; zero fields are unlimited.
	Budget control.Budget
}

func (w *Workflow) step(name string) (Step, int, bool) {
	for i, s := range w.Steps {
		if s.Name == name {
			return s, i, true
		}
	}
	return Step{}, 0, false
}

func (w *Workflow) validate() error {
	if err := run.ValidID("workflow name", w.Name); err != nil {
		return err
	}
	if len(w.Steps) == 0 {
		return fmt.Errorf("%w: workflow %s has no steps", run.ErrInvalidInput, w.Name)
	}
	seen := map[string]bool{}
	for _, s := range w.Steps {
		if err := run.ValidID("step name", s.Name); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: workflow %s has two steps named %s", run.ErrInvalidInput, w.Name, s.Name)
		}
		if s.Run == nil {
			return fmt.Errorf("%w: step %s of %s has no Run", run.ErrInvalidInput, s.Name, w.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// suspension is returned through a step to make the engine suspend the run.
type suspension struct {
	reason string
	wait   *control.Wait
}

func (s *suspension) Error() string { return "suspend: " + s.reason }

// Suspend returns an error that, returned by a step, suspends the run with
// the reason. The step will run again when the run is resumed.
func Suspend(reason string) error { return &suspension{reason: reason} }

// IsSuspend reports whether err asks the engine to suspend the run.
func IsSuspend(err error) bool {
	var s *suspension
	return errors.As(err, &s)
}

// rejection marks a definitive refusal by an external system.
type rejection struct{ err error }

func (r *rejection) Error() string { return r.err.Error() }
func (r *rejection) Unwrap() error { return r.err }

// Rejected wraps an error a tool's Send returns when the external system
// answered and refused the request: the operation is failed, not unknown.
// Any other error from Send marks the operation unknown.
func Rejected(err error) error { return &rejection{err: err} }

// Reply is what a tool's Send got back.
type Reply struct {
	ExternalRef string
	Result      json.RawMessage
}

// Call is one side effect made through the ledger.
type Call struct {
	// Tool is a registered tool (it has a lookup for reconciliation).
	Tool string
	// Key is the business key; the operation id is derived from the run id
	// and this key, and the idempotency key sent to the external system from
	// the tenant and that id (toolop.SendKey). It is required: two calls
	// of a run with the same Key are one side effect.
	Key string
	// Request is the request; its canonical digest binds the operation.
	Request any
	// RequireApproval names the step whose approval must be valid for this
	// request digest before anything is sent ("" for none). An approval
	// approves a request (its digest), not one operation: while it is in
	// force, every call of that step's request under it is sent, whatever
	// its Key. When one approval must cover one operation only, put what
	// tells the operations apart (an order id, the Key) in the request.
	RequireApproval string
	// Send performs the request with the idempotency key.
	Send func(ctx context.Context, idempotencyKey string) (Reply, error)
}

// ApprovalSpec asks for approval of a request.
type ApprovalSpec struct {
	// Request is what is approved; its canonical digest binds the approval.
	Request any
	// Summary is shown to the approver (defaults to Request).
	Summary any
	// TTL is how long the approval stays usable (0 means one hour).
	TTL time.Duration
}

// Approver decides approvals by policy. decided=false leaves it to a person.
type Approver func(ctx context.Context, a toolop.Approval) (d toolop.Decision, decided bool)
