package toolop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mementohq/memento/run"
)

// Answer is what an external system says about an idempotency key.
type Answer string

// Lookup answers. Only applied and not_applied are authoritative.
const (
	Applied          Answer = "applied"
	NotApplied       Answer = "not_applied"
	NotAuthoritative Answer = "not_authoritative"
)

// LookupResult is a tool's answer about one idempotency key.
type LookupResult struct {
	Answer      Answer
	ExternalRef string
	Result      json.RawMessage
	Detail      string
}

// Lookup asks the external system whether a request with this idempotency key
// was applied. An error counts as not authoritative.
type Lookup func(ctx context.Context, idempotencyKey string) (LookupResult, error)

// Tool is a registered external tool: its contract version (checked on
// resume against what a run recorded) and its lookup by idempotency key.
type Tool struct {
	Name            string
	ContractVersion string
	Lookup          Lookup
}

// Service applies the ledger's rules on top of a Store.
type Service struct {
	store Store
	now   func() time.Time
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewService wires a Service to a Store. now may be nil (time.Now).
func NewService(store Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now, tools: map[string]Tool{}}
}

// Store returns the underlying store.
func (s *Service) Store() Store { return s.store }

// Now is the service's clock, truncated to the microseconds stores keep.
func (s *Service) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// RegisterTool adds or replaces a tool (its lookup and contract version).
func (s *Service) RegisterTool(t Tool) error {
	if err := run.ValidID("tool name", t.Name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools[t.Name] = t
	return nil
}

// Tool returns a registered tool.
func (s *Service) Tool(name string) (Tool, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tools[name]
	return t, ok
}

// validID is run.ValidID as this package's ErrInvalidInput, worded once
// ("invalid input: step_id is required", not the prefix twice).
func validID(kind, id string) error {
	if err := run.ValidID(kind, id); err != nil {
		return fmt.Errorf("%w%s", ErrInvalidInput, strings.TrimPrefix(err.Error(), run.ErrInvalidInput.Error()))
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// PrepareRequest names one operation to prepare.
type PrepareRequest struct {
	OperationID   string `json:"operation_id"`
	RunID         string `json:"run_id"`
	StepID        string `json:"step_id"`
	ToolName      string `json:"tool_name"`
	RequestDigest string `json:"request_digest"`
}

// Prepare creates the operation once. If it exists with the same request
// digest (and run) it is returned with created=false; a different digest is
// ErrDigestMismatch: the same id must always mean the same request.
func (s *Service) Prepare(ctx context.Context, tenantID string, req PrepareRequest) (Operation, bool, error) {
	for _, f := range []struct{ name, v string }{{"operation_id", req.OperationID}, {"run_id", req.RunID}, {"step_id", req.StepID}, {"tool_name", req.ToolName}} {
		if err := validID(f.name, f.v); err != nil {
			return Operation{}, false, err
		}
	}
	if req.RequestDigest == "" || len(req.RequestDigest) > run.MaxIDLength {
		return Operation{}, false, invalid("request_digest is required and at most %d bytes", run.MaxIDLength)
	}
	now := s.Now()
	op := Operation{
		TenantID: tenantID, OperationID: req.OperationID, RunID: req.RunID, StepID: req.StepID,
		ToolName: req.ToolName, RequestDigest: req.RequestDigest, Status: StatusPrepared,
		Key: SendKey(tenantID, req.OperationID), CreatedAt: now, UpdatedAt: now,
	}
	got, created, err := s.store.PrepareOperation(ctx, op)
	if err != nil {
		return Operation{}, false, fmt.Errorf("prepare operation %s: %w", req.OperationID, err)
	}
	if !created {
		if got.RequestDigest != req.RequestDigest {
			return got, false, fmt.Errorf("prepare operation %s: %w: stored %s, asked %s", req.OperationID, ErrDigestMismatch, got.RequestDigest, req.RequestDigest)
		}
		if got.RunID != req.RunID || got.ToolName != req.ToolName || got.StepID != req.StepID {
			return got, false, fmt.Errorf("prepare operation %s: %w: it belongs to run %s, step %s, tool %s", req.OperationID, ErrDigestMismatch, got.RunID, got.StepID, got.ToolName)
		}
	}
	return got, created, nil
}

// Get returns one operation.
func (s *Service) Get(ctx context.Context, tenantID, operationID string) (Operation, error) {
	op, err := s.store.GetOperation(ctx, tenantID, operationID)
	if err != nil {
		return Operation{}, fmt.Errorf("get operation %s: %w", operationID, err)
	}
	return op, nil
}

// List returns all of a run's operations.
func (s *Service) List(ctx context.Context, tenantID, runID string) ([]Operation, error) {
	ops, err := s.store.ListOperations(ctx, tenantID, runID, Page{})
	if err != nil {
		return nil, fmt.Errorf("list operations of run %s: %w", runID, err)
	}
	return ops, nil
}

// InDoubt returns a run's operations in doubt (started or unknown), read
// by an index: a resume reconciles those, whatever else the run did.
func (s *Service) InDoubt(ctx context.Context, tenantID, runID string) ([]Operation, error) {
	ops, err := s.store.ListOperations(ctx, tenantID, runID, Page{InDoubt: true})
	if err != nil {
		return nil, fmt.Errorf("list operations in doubt of run %s: %w", runID, err)
	}
	return ops, nil
}

// ListPage returns a page of a run's operations in creation order and the
// cursor of the next page ("" on the last).
func (s *Service) ListPage(ctx context.Context, tenantID, runID, cursor string, limit int) ([]Operation, string, error) {
	p, limit, err := page("o", cursor, limit)
	if err != nil {
		return nil, "", err
	}
	ops, err := s.store.ListOperations(ctx, tenantID, runID, p)
	if err != nil {
		return nil, "", fmt.Errorf("list operations of run %s: %w", runID, err)
	}
	next := ""
	if len(ops) > limit {
		ops = ops[:limit]
		last := ops[limit-1]
		next = encodePageCursor("o", last.CreatedAt, last.OperationID)
	}
	return ops, next, nil
}

func (s *Service) transition(ctx context.Context, tenantID, id string, t Transition) (Operation, error) {
	t.From = allowedFrom(t.To)
	t.At = s.Now()
	op, err := s.store.TransitionOperation(ctx, tenantID, id, t)
	if err != nil {
		return Operation{}, fmt.Errorf("mark operation %s %s: %w", id, t.To, err)
	}
	return op, nil
}

// Start marks a prepared operation started: the request is about to be sent.
func (s *Service) Start(ctx context.Context, tenantID, operationID string) (Operation, error) {
	return s.transition(ctx, tenantID, operationID, Transition{To: StatusStarted, CountAttempt: true})
}

// Outcome is what the external system answered, or what an operator found.
type Outcome struct {
	ExternalRef string          `json:"external_ref,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	// Resolution says who settled it when it was in doubt (operator or reconcile).
	Resolution string `json:"resolution,omitempty"`
}

func (o Outcome) check() error {
	if len(o.ExternalRef) > run.MaxIDLength*5 {
		return invalid("external_ref is too long")
	}
	if len(o.Result) > 0 && !json.Valid(o.Result) {
		return invalid("result must be valid JSON")
	}
	if len(o.Error) > 4096 || len(o.Resolution) > 4096 {
		return invalid("error and resolution must be at most 4096 bytes")
	}
	return nil
}

// Succeed records the external system's success. Repeating it with the same
// external reference is harmless (a retried HTTP call); anything else final is refused.
func (s *Service) Succeed(ctx context.Context, tenantID, operationID string, o Outcome) (Operation, error) {
	if err := o.check(); err != nil {
		return Operation{}, err
	}
	op, err := s.transition(ctx, tenantID, operationID, Transition{To: StatusSucceeded, ExternalRef: o.ExternalRef, Result: o.Result, Resolution: o.Resolution})
	if errors.Is(err, ErrInvalidTransition) {
		if cur, gerr := s.store.GetOperation(ctx, tenantID, operationID); gerr == nil && cur.Status == StatusSucceeded && cur.ExternalRef == o.ExternalRef {
			if !sameResult(cur.Result, o.Result) {
				return Operation{}, fmt.Errorf("mark operation %s succeeded: %w: it succeeded with another result", operationID, ErrInvalidTransition)
			}
			return cur, nil
		}
	}
	return op, err
}

// sameResult reports whether a repeat's result b agrees with the stored a:
// absent, or the same JSON (spacing and member order aside). A retried call
// sends the same one; another one is another outcome.
func sameResult(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if string(a) == "null" {
		a = nil
	}
	if string(b) == "null" {
		b = nil
	}
	if len(b) == 0 {
		return true
	}
	if len(a) == 0 {
		return false
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// Fail records a definitive refusal by the external system. Only call it when
// the system answered; a transport error after sending is MarkUnknown.
func (s *Service) Fail(ctx context.Context, tenantID, operationID string, o Outcome) (Operation, error) {
	if err := o.check(); err != nil {
		return Operation{}, err
	}
	op, err := s.transition(ctx, tenantID, operationID, Transition{To: StatusFailed, ExternalRef: o.ExternalRef, Result: o.Result, Error: o.Error, Resolution: o.Resolution})
	if errors.Is(err, ErrInvalidTransition) {
		if cur, gerr := s.store.GetOperation(ctx, tenantID, operationID); gerr == nil && cur.Status == StatusFailed {
			if (o.ExternalRef != "" && cur.ExternalRef != o.ExternalRef) || (o.Error != "" && cur.Error != o.Error) || !sameResult(cur.Result, o.Result) {
				return Operation{}, fmt.Errorf("mark operation %s failed: %w: it failed with another error or result", operationID, ErrInvalidTransition)
			}
			return cur, nil
		}
	}
	return op, err
}

// MarkUnknown records that the request may have been applied but no answer
// came back (timeout, reset, crash). Such an operation is reconciled before
// anything is resent.
func (s *Service) MarkUnknown(ctx context.Context, tenantID, operationID, reason string) (Operation, error) {
	if len(reason) > 4096 {
		return Operation{}, invalid("error must be at most 4096 bytes")
	}
	op, err := s.transition(ctx, tenantID, operationID, Transition{To: StatusUnknown, Error: reason})
	if errors.Is(err, ErrInvalidTransition) {
		if cur, gerr := s.store.GetOperation(ctx, tenantID, operationID); gerr == nil && cur.Status == StatusUnknown {
			return cur, nil
		}
	}
	return op, err
}

// Reconciliation is the result of asking the external system about an operation.
type Reconciliation struct {
	Operation Operation `json:"operation"`
	Answer    Answer    `json:"answer"`
	Detail    string    `json:"detail,omitempty"`
}

// SafeToSend reports whether the operation may now be (re)sent with its key.
func (r Reconciliation) SafeToSend() bool { return r.Operation.Status == StatusPrepared }

// Reconcile settles an operation that may have been sent. A prepared one was
// never sent: it is safe to send. A started or unknown one is looked up by its
// idempotency key: applied -> succeeded; not applied -> prepared again (resend
// with the same key is safe); no authoritative answer -> it stays (or becomes)
// unknown and the answer says so: the caller must suspend, not retry.
func (s *Service) Reconcile(ctx context.Context, tenantID, operationID string) (Reconciliation, error) {
	op, err := s.Get(ctx, tenantID, operationID)
	if err != nil {
		return Reconciliation{}, err
	}
	switch op.Status {
	case StatusPrepared:
		return Reconciliation{Operation: op, Answer: NotApplied, Detail: "never sent"}, nil
	case StatusSucceeded:
		return Reconciliation{Operation: op, Answer: Applied, Detail: "already succeeded"}, nil
	case StatusFailed:
		return Reconciliation{Operation: op, Answer: NotApplied, Detail: "already failed"}, nil
	}
	tool, ok := s.Tool(op.ToolName)
	var res LookupResult
	if !ok || tool.Lookup == nil {
		res = LookupResult{Answer: NotAuthoritative, Detail: fmt.Sprintf("no lookup registered for tool %s", op.ToolName)}
	} else {
		r, lerr := tool.Lookup(ctx, op.IdempotencyKey())
		switch {
		case lerr != nil:
			res = LookupResult{Answer: NotAuthoritative, Detail: fmt.Sprintf("lookup failed: %v", lerr)}
		case r.Answer != Applied && r.Answer != NotApplied:
			res = LookupResult{Answer: NotAuthoritative, Detail: r.Detail}
			if res.Detail == "" {
				res.Detail = "lookup is not authoritative"
			}
		default:
			res = r
		}
	}
	switch res.Answer {
	case Applied:
		op, err = s.Succeed(ctx, tenantID, operationID, Outcome{ExternalRef: res.ExternalRef, Result: res.Result, Resolution: "reconciled: applied"})
	case NotApplied:
		op, err = s.transition(ctx, tenantID, operationID, Transition{To: StatusPrepared, Resolution: "reconciled: not applied, safe to resend with the same key"})
	default:
		op, err = s.MarkUnknown(ctx, tenantID, operationID, "reconcile: "+res.Detail)
	}
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile operation %s: %w", operationID, err)
	}
	return Reconciliation{Operation: op, Answer: res.Answer, Detail: res.Detail}, nil
}

// Resolution is an operator's verdict on an in-doubt operation.
type Resolution struct {
	// Outcome is "applied" (-> succeeded), "not_applied" (-> prepared, resend
	// with the same key on resume) or "failed".
	Outcome     string          `json:"outcome"`
	ExternalRef string          `json:"external_ref,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	By          string          `json:"by"`
	Reason      string          `json:"reason,omitempty"`
}

// Resolve settles a started or unknown operation by hand.
func (s *Service) Resolve(ctx context.Context, tenantID, operationID string, r Resolution) (Operation, error) {
	if strings.TrimSpace(r.By) == "" || len(r.By) > run.MaxIDLength {
		return Operation{}, invalid("by is required (who resolved it)")
	}
	note := fmt.Sprintf("resolved by %s", r.By)
	if r.Reason != "" {
		note += ": " + r.Reason
	}
	cur, err := s.Get(ctx, tenantID, operationID)
	if err != nil {
		return Operation{}, err
	}
	if !cur.Status.InDoubt() {
		return Operation{}, fmt.Errorf("resolve operation %s: %w: it is %s; only started or unknown operations are resolved by hand", operationID, ErrInvalidTransition, cur.Status)
	}
	o := Outcome{ExternalRef: r.ExternalRef, Result: r.Result, Error: r.Error, Resolution: note}
	if err := o.check(); err != nil {
		return Operation{}, err
	}
	switch r.Outcome {
	case string(Applied):
		return s.transition(ctx, tenantID, operationID, Transition{To: StatusSucceeded, ExternalRef: r.ExternalRef, Result: r.Result, Resolution: note})
	case string(NotApplied):
		return s.transition(ctx, tenantID, operationID, Transition{To: StatusPrepared, Resolution: note})
	case "failed":
		return s.transition(ctx, tenantID, operationID, Transition{To: StatusFailed, ExternalRef: r.ExternalRef, Result: r.Result, Error: r.Error, Resolution: note})
	}
	return Operation{}, invalid("outcome must be applied, not_applied or failed")
}

// ApprovalRequest asks for an approval of one step's request.
type ApprovalRequest struct {
	// ApprovalID is optional; by default it is derived from run, step, digest
	// and the number of approvals the step already had.
	ApprovalID    string          `json:"approval_id,omitempty"`
	RunID         string          `json:"run_id"`
	StepID        string          `json:"step_id"`
	RequestDigest string          `json:"request_digest"`
	Summary       json.RawMessage `json:"summary,omitempty"`
	TTL           time.Duration   `json:"-"`
}

// MaxApprovalTTL bounds how long an approval may stay usable.
const MaxApprovalTTL = 30 * 24 * time.Hour

// RequestApproval creates a pending approval, once per id.
func (s *Service) RequestApproval(ctx context.Context, tenantID string, req ApprovalRequest) (Approval, bool, error) {
	if err := validID("run_id", req.RunID); err != nil {
		return Approval{}, false, err
	}
	if err := validID("step_id", req.StepID); err != nil {
		return Approval{}, false, err
	}
	if req.RequestDigest == "" || len(req.RequestDigest) > run.MaxIDLength {
		return Approval{}, false, invalid("request_digest is required and at most %d bytes", run.MaxIDLength)
	}
	if req.TTL <= 0 || req.TTL > MaxApprovalTTL {
		return Approval{}, false, invalid("approval ttl must be positive and at most %s", MaxApprovalTTL)
	}
	if len(req.Summary) > 0 && !json.Valid(req.Summary) {
		return Approval{}, false, invalid("summary must be valid JSON")
	}
	if len(req.Summary) > 64<<10 {
		return Approval{}, false, invalid("summary must be at most 64 KiB")
	}
	if req.ApprovalID == "" {
		prev, err := s.stepApprovals(ctx, tenantID, req.RunID, req.StepID)
		if err != nil {
			return Approval{}, false, err
		}
		// One request of a step is asked once: while an approval of it is
		// pending or in force, asking again (a retry after a lost answer,
		// another worker) answers that one, so no second approval can be
		// decided the other way. After a rejection or an expiry the next
		// generation is a new question.
		now, n := s.Now(), 0
		for _, a := range prev {
			if a.StepID == req.StepID && a.RequestDigest == req.RequestDigest {
				if live := a.Status == ApprovalPending || a.Status == ApprovalApproved; live && now.Before(a.ExpiresAt) {
					return a, false, nil
				}
				n++
			}
		}
		req.ApprovalID = ApprovalID(req.RunID, req.StepID, req.RequestDigest, n)
	} else if err := validID("approval_id", req.ApprovalID); err != nil {
		return Approval{}, false, err
	}
	now := s.Now()
	a := Approval{
		TenantID: tenantID, ApprovalID: req.ApprovalID, RunID: req.RunID, StepID: req.StepID,
		RequestDigest: req.RequestDigest, Summary: req.Summary, Status: ApprovalPending,
		ExpiresAt: now.Add(req.TTL).Truncate(time.Microsecond), CreatedAt: now,
	}
	got, created, err := s.store.CreateApproval(ctx, a)
	if err != nil {
		return Approval{}, false, fmt.Errorf("request approval %s: %w", req.ApprovalID, err)
	}
	if !created && (got.RunID != a.RunID || got.StepID != a.StepID || got.RequestDigest != a.RequestDigest) {
		return got, false, fmt.Errorf("request approval %s: %w", req.ApprovalID, ErrApprovalExists)
	}
	return got, created, nil
}

// Decide approves or rejects a pending, unexpired approval. Repeating the
// same decision by the same person returns the approval unchanged.
func (s *Service) Decide(ctx context.Context, tenantID, approvalID string, d Decision) (Approval, error) {
	if strings.TrimSpace(d.By) == "" || len(d.By) > run.MaxIDLength {
		return Approval{}, invalid("by is required (who decided)")
	}
	if len(d.Reason) > 4096 {
		return Approval{}, invalid("reason must be at most 4096 bytes")
	}
	d.At = s.Now()
	a, err := s.store.DecideApproval(ctx, tenantID, approvalID, d)
	if errors.Is(err, ErrApprovalDecided) {
		if cur, gerr := s.store.GetApproval(ctx, tenantID, approvalID); gerr == nil && cur.DecidedBy == d.By && (cur.Status == ApprovalApproved) == d.Approve {
			return cur, nil
		}
	}
	if err != nil {
		return Approval{}, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	return a, nil
}

// GetApproval returns one approval.
func (s *Service) GetApproval(ctx context.Context, tenantID, approvalID string) (Approval, error) {
	a, err := s.store.GetApproval(ctx, tenantID, approvalID)
	if err != nil {
		return Approval{}, fmt.Errorf("get approval %s: %w", approvalID, err)
	}
	return a, nil
}

// stepApprovals returns the approvals of one step of a run, read by an
// index: what the run's other steps asked costs nothing here.
func (s *Service) stepApprovals(ctx context.Context, tenantID, runID, stepID string) ([]Approval, error) {
	as, err := s.store.ListApprovals(ctx, tenantID, runID, Page{StepID: stepID})
	if err != nil {
		return nil, fmt.Errorf("list approvals of step %s of run %s: %w", stepID, runID, err)
	}
	return as, nil
}

// ListApprovals returns all of a run's approvals.
func (s *Service) ListApprovals(ctx context.Context, tenantID, runID string) ([]Approval, error) {
	as, err := s.store.ListApprovals(ctx, tenantID, runID, Page{})
	if err != nil {
		return nil, fmt.Errorf("list approvals of run %s: %w", runID, err)
	}
	return as, nil
}

// ListApprovalsPage returns a page of a run's approvals in creation order
// and the cursor of the next page ("" on the last).
func (s *Service) ListApprovalsPage(ctx context.Context, tenantID, runID, cursor string, limit int) ([]Approval, string, error) {
	p, limit, err := page("a", cursor, limit)
	if err != nil {
		return nil, "", err
	}
	as, err := s.store.ListApprovals(ctx, tenantID, runID, p)
	if err != nil {
		return nil, "", fmt.Errorf("list approvals of run %s: %w", runID, err)
	}
	next := ""
	if len(as) > limit {
		as = as[:limit]
		last := as[limit-1]
		next = encodePageCursor("a", last.CreatedAt, last.ApprovalID)
	}
	return as, next, nil
}

// ValidApproval finds an approval of the run's step that allows the request
// digest now. Without one it returns the reason of the most recent approval of
// that step (pending, rejected, expired, other digest) or ErrApprovalNotFound.
//
// The newest decision on a request stands: a rejection of the same digest
// created after an approval revokes it (asked again under an id of its own
// and refused, the request is refused), while a newer question still pending
// or left to expire leaves an older approval in force.
func (s *Service) ValidApproval(ctx context.Context, tenantID, runID, stepID, requestDigest string) (Approval, error) {
	as, err := s.stepApprovals(ctx, tenantID, runID, stepID)
	if err != nil {
		return Approval{}, err
	}
	now := s.Now()
	var mine []Approval
	for _, a := range as {
		if a.StepID == stepID {
			mine = append(mine, a)
		}
	}
	if len(mine) == 0 {
		return Approval{}, fmt.Errorf("%w: no approval for step %s of run %s", ErrApprovalNotFound, stepID, runID)
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].CreatedAt.Before(mine[j].CreatedAt) })
	for i := len(mine) - 1; i >= 0; i-- {
		a := mine[i]
		if a.RequestDigest != requestDigest {
			continue
		}
		if a.Status == ApprovalRejected {
			return a, a.Check(requestDigest, now)
		}
		if a.Check(requestDigest, now) == nil {
			return a, nil
		}
	}
	last := mine[len(mine)-1]
	return last, last.Check(requestDigest, now)
}
