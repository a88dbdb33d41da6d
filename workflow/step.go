package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

// StepContext is what a step sees: the run's state, the ledger and the
// approvals, and the controls that decide where the run goes next. Its
// methods may be called from several goroutines of the step (tool calls
// made in parallel), until the step returns.
type StepContext struct {
	// mu guards what the step's methods change: state, ctl, the controls,
	// spend, ops and suspend. It is never held across a call to the store
	// or to a tool.
	mu      sync.Mutex
	e       *Engine
	run     run.Run
	step    string
	attempt int
	state   map[string]json.RawMessage
	ctl     control.Record

	next     string
	nextSet  bool
	complete bool
	failRun  string
	spend    control.Spend
	started  time.Time // when the step began: its wall time so far
	ops      []string
	suspend  *suspension
}

// RunID is the id of the run.
func (sc *StepContext) RunID() string { return sc.run.RunID }

// TenantID is the tenant of the run.
func (sc *StepContext) TenantID() string { return sc.run.TenantID }

// StepName is the name of the running step.
func (sc *StepContext) StepName() string { return sc.step }

// Attempt counts earlier failed attempts of this step (0 on the first).
func (sc *StepContext) Attempt() int { return sc.attempt }

// Get decodes the state field key into v; found is false if it is absent.
func (sc *StepContext) Get(key string, v any) (found bool, err error) {
	sc.mu.Lock()
	raw, ok := sc.state[key]
	sc.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("state field %s: %w", key, err)
	}
	return true, nil
}

// Set replaces the state field key; it is committed with the step.
func (sc *StepContext) Set(key string, v any) error {
	if key == control.Key {
		return fmt.Errorf("%w: %s", ErrReservedKey, key)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("state field %s: %w", key, err)
	}
	sc.mu.Lock()
	sc.state[key] = b
	sc.mu.Unlock()
	return nil
}

// Goto names the step that runs after this one.
func (sc *StepContext) Goto(step string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.next, sc.nextSet = step, true
}

// Complete ends the run successfully once this step commits.
func (sc *StepContext) Complete() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.complete = true
}

// FailRun ends the run as failed once this step commits.
func (sc *StepContext) FailRun(reason string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.failRun = reason
}

// Spend records model tokens and cost (millionths of a currency unit) used by this step.
func (sc *StepContext) Spend(tokens, costMicros int64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.spend.Tokens += tokens
	sc.spend.CostMicros += costMicros
}

// Remaining is what the run's budget leaves before this step, less what
// the step has recorded with Spend and its wall time so far: each limited
// dimension, -1 where unlimited (Steps counts the steps before this one).
// The budget is checked between steps; a step that may spend much (a
// model call in a loop) reads this to stay within it.
func (sc *StepContext) Remaining() control.Spend {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	s := sc.spend
	if !sc.started.IsZero() {
		s.WallMS += time.Since(sc.started).Milliseconds()
	}
	return sc.ctl.Budget.Remaining(sc.ctl.Spent.Add(s))
}

// AddArtifact records a large payload kept outside the state; resume checks its digest.
func (sc *StepContext) AddArtifact(uri, digest string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for i, a := range sc.ctl.Artifacts {
		if a.URI == uri {
			sc.ctl.Artifacts[i].Digest = digest
			return
		}
	}
	sc.ctl.Artifacts = append(sc.ctl.Artifacts, control.ArtifactRef{URI: uri, Digest: digest})
}

func (sc *StepContext) suspendWith(reason string, w *control.Wait) error {
	s := &suspension{reason: reason, wait: w}
	sc.mu.Lock()
	sc.suspend = s
	sc.mu.Unlock()
	return s
}

// Approve asks for an approval of spec.Request and returns it once approved.
// If it is rejected the error is ErrRejected. If nobody decided yet (or the
// last approval expired, or was for another request) it requests one — the
// engine's Approver may decide at once — else it returns a suspension: the
// step must return that error, and the run waits for the decision.
func (sc *StepContext) Approve(ctx context.Context, spec ApprovalSpec) (toolop.Approval, error) {
	digest, err := toolop.RequestDigest(spec.Request)
	if err != nil {
		return toolop.Approval{}, fmt.Errorf("approval request: %w", err)
	}
	if spec.TTL <= 0 {
		spec.TTL = time.Hour
	}
	if spec.Summary == nil {
		spec.Summary = spec.Request
	}
	ops, tn, id := sc.e.ops, sc.run.TenantID, sc.run.RunID
	a, err := ops.ValidApproval(ctx, tn, id, sc.step, digest)
	switch {
	case err == nil:
		sc.mu.Lock()
		sc.ctl.SetGuard(control.ApprovalGuard{StepID: sc.step, RequestDigest: digest})
		sc.mu.Unlock()
		return a, nil
	case errors.Is(err, toolop.ErrApprovalRejected) && a.RequestDigest == digest:
		return a, fmt.Errorf("%w: %s by %s: %s", ErrRejected, a.ApprovalID, a.DecidedBy, a.Reason)
	case errors.Is(err, toolop.ErrApprovalPending):
		// an undecided, unexpired approval for this digest: wait for it (or let the policy decide)
	case errors.Is(err, toolop.ErrApprovalNotFound), errors.Is(err, toolop.ErrApprovalExpired),
		errors.Is(err, toolop.ErrApprovalDigestMismatch), errors.Is(err, toolop.ErrApprovalRejected):
		if a, err = sc.ask(ctx, sc.step, digest, spec.Summary, spec.TTL); err != nil {
			return toolop.Approval{}, err
		}
	default:
		return toolop.Approval{}, err
	}
	if decided, err := sc.decideByPolicy(ctx, a); err != nil || decided {
		if err != nil {
			return toolop.Approval{}, err
		}
		return sc.Approve(ctx, spec)
	}
	return a, sc.suspendWith(fmt.Sprintf("waiting for approval %s of step %s", a.ApprovalID, sc.step),
		&control.Wait{Kind: "approval", ApprovalID: a.ApprovalID, StepID: sc.step})
}

// Call performs a side effect through the operation ledger, at most once:
// prepared once under an id derived from the run and call.Key, reconciled
// with the tool's lookup if it may have been sent before, sent only when the
// ledger says it is safe, and recorded as succeeded, failed or unknown.
// A succeeded operation returns its stored result without sending again.
// Without an authoritative answer the run is suspended naming the operation.
func (sc *StepContext) Call(ctx context.Context, call Call) (toolop.Operation, error) {
	tool, ok := sc.e.ops.Tool(call.Tool)
	if !ok {
		return toolop.Operation{}, fmt.Errorf("call %s: tool not registered", call.Tool)
	}
	if call.Send == nil {
		// Refused before the ledger hears of it: a nil Send would panic
		// after the operation was marked started, leaving an operation that
		// was never sent in doubt, for an operator to resolve.
		return toolop.Operation{}, fmt.Errorf("call %s: %w: Send is nil", call.Tool, run.ErrInvalidInput)
	}
	if call.Key == "" {
		// Every keyless call of a run would be one operation: the second,
		// with another request, would be refused as a conflict, and with
		// the same request answered with the first one's result, never sent.
		return toolop.Operation{}, fmt.Errorf("call %s: %w: Key is empty: name what makes this side effect one (an order id, a refund id)", call.Tool, run.ErrInvalidInput)
	}
	digest, err := toolop.RequestDigest(call.Request)
	if err != nil {
		return toolop.Operation{}, fmt.Errorf("call %s: request: %w", call.Tool, err)
	}
	ops, tn := sc.e.ops, sc.run.TenantID
	op, _, err := ops.Prepare(ctx, tn, toolop.PrepareRequest{
		OperationID: toolop.OperationID(sc.run.RunID, call.Key), RunID: sc.run.RunID,
		StepID: sc.step, ToolName: call.Tool, RequestDigest: digest,
	})
	if err != nil {
		return op, fmt.Errorf("call %s: %w", call.Tool, err)
	}
	sc.mu.Lock()
	sc.addOp(op.OperationID)
	if sc.ctl.Tools == nil {
		sc.ctl.Tools = map[string]string{}
	}
	sc.ctl.Tools[call.Tool] = tool.ContractVersion
	if call.RequireApproval != "" {
		if g, ok := sc.ctl.Guard(call.RequireApproval); ok && g.RequestDigest == digest {
			g.OperationID = op.OperationID
			sc.ctl.SetGuard(g)
		}
	}
	sc.mu.Unlock()
	sends := 0
	for {
		switch op.Status {
		case toolop.StatusSucceeded:
			return op, nil
		case toolop.StatusFailed:
			return op, fmt.Errorf("%w: %s: %s", ErrOperationFailed, op.OperationID, op.Error)
		case toolop.StatusStarted, toolop.StatusUnknown:
			rec, err := ops.Reconcile(ctx, tn, op.OperationID)
			if err != nil {
				return op, err
			}
			if rec.Answer == toolop.NotAuthoritative {
				return rec.Operation, sc.suspendWith(
					fmt.Sprintf("operation %s (%s) is unknown: %s; resolve it by hand", op.OperationID, op.ToolName, rec.Detail),
					&control.Wait{Kind: "operation", OperationID: op.OperationID})
			}
			op = rec.Operation
			continue
		}
		// Prepared: nothing of it reached the tool, or the tool said it did not apply it.
		if sends >= sc.e.opts.MaxSends {
			return op, sc.suspendWith(fmt.Sprintf("operation %s (%s) sent %d times without an answer", op.OperationID, op.ToolName, sends), nil)
		}
		sends++
		if call.RequireApproval != "" {
			if err := sc.guard(ctx, op, call.RequireApproval, digest, call.Request); err != nil {
				return op, err
			}
		}
		if op, err = ops.Start(ctx, tn, op.OperationID); err != nil {
			return op, err
		}
		sc.e.at(ctx, FaultBeforeCall, sc.run.RunID)
		reply, serr := call.Send(ctx, op.IdempotencyKey())
		// What the tool answered is recorded even if our context ended meanwhile
		// (lease lost, shutdown): the ledger's guarded transitions keep it safe.
		// Bounded: a store that does not answer leaves the operation started,
		// and the recovery loop reconciles it.
		rec, cancelRec := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancelRec()
		var rej *rejection
		switch {
		case serr == nil:
			sc.e.at(ctx, FaultAfterResponse, sc.run.RunID)
			op, err = ops.Succeed(rec, tn, op.OperationID, toolop.Outcome{ExternalRef: reply.ExternalRef, Result: reply.Result})
		case errors.As(serr, &rej):
			op, err = ops.Fail(rec, tn, op.OperationID, toolop.Outcome{Error: serr.Error()})
		default:
			// It may have been applied: unknown, never failed. The loop reconciles it.
			op, err = ops.MarkUnknown(rec, tn, op.OperationID, serr.Error())
		}
		if err == nil && ctx.Err() != nil {
			return op, ctx.Err()
		}
		if err != nil {
			return op, err
		}
	}
}

// guard lets op be sent only under a valid approval of stepID for the
// request (digest); else the run is suspended until there is one. An
// approval that lapsed before the call is asked again, as Approve does, so
// there is a question to decide and its answer wakes the run (else it would
// wait for good).
func (sc *StepContext) guard(ctx context.Context, op toolop.Operation, stepID, digest string, request any) error {
	ops, tn := sc.e.ops, sc.run.TenantID
	_, err := ops.ValidApproval(ctx, tn, sc.run.RunID, stepID, digest)
	if err == nil {
		return nil
	}
	if errors.Is(err, toolop.ErrApprovalExpired) {
		a, aerr := sc.ask(ctx, stepID, digest, request, time.Hour)
		if aerr != nil {
			return aerr
		}
		decided, aerr := sc.decideByPolicy(ctx, a)
		if aerr != nil {
			return aerr
		}
		if !decided {
			return sc.suspendWith(fmt.Sprintf("operation %s needs a valid approval of step %s: the last one expired; asked again as %s", op.OperationID, stepID, a.ApprovalID),
				&control.Wait{Kind: "approval", ApprovalID: a.ApprovalID, StepID: stepID})
		}
		if _, err = ops.ValidApproval(ctx, tn, sc.run.RunID, stepID, digest); err == nil {
			return nil
		}
	}
	return sc.suspendWith(fmt.Sprintf("operation %s needs a valid approval of step %s: %v", op.OperationID, stepID, err),
		&control.Wait{Kind: "approval_guard", StepID: stepID})
}

// ask requests an approval of the request (digest) for stepID, showing
// the approver summary.
func (sc *StepContext) ask(ctx context.Context, stepID, digest string, summary any, ttl time.Duration) (toolop.Approval, error) {
	b, err := json.Marshal(summary)
	if err != nil {
		return toolop.Approval{}, fmt.Errorf("approval summary: %w", err)
	}
	a, _, err := sc.e.ops.RequestApproval(ctx, sc.run.TenantID, toolop.ApprovalRequest{RunID: sc.run.RunID, StepID: stepID, RequestDigest: digest, Summary: b, TTL: ttl})
	return a, err
}

// decideByPolicy lets the engine's Approver decide a, if it will; decided
// reports whether it did.
func (sc *StepContext) decideByPolicy(ctx context.Context, a toolop.Approval) (bool, error) {
	if sc.e.opts.Approver == nil {
		return false, nil
	}
	d, ok := sc.e.opts.Approver(ctx, a)
	if !ok {
		return false, nil
	}
	if _, err := sc.e.ops.Decide(ctx, sc.run.TenantID, a.ApprovalID, d); err != nil && !errors.Is(err, toolop.ErrApprovalDecided) {
		return false, err
	}
	return true, nil
}

// addOp records id among the step's operations; sc.mu is held.
func (sc *StepContext) addOp(id string) {
	for _, o := range sc.ops {
		if o == id {
			return
		}
	}
	sc.ops = append(sc.ops, id)
}

// recordTimeout bounds recording a tool's answer after the step's context
// ended (lease lost, shutdown).
const recordTimeout = 10 * time.Second
