package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mementohq/memento/toolop"
)

func cloneOp(op toolop.Operation) toolop.Operation {
	op.Result = cloneJSON(op.Result)
	return op
}

func cloneApproval(a toolop.Approval) toolop.Approval {
	a.Summary = cloneJSON(a.Summary)
	a.DecidedAt = cloneTime(a.DecidedAt)
	return a
}

// PrepareOperation inserts the operation (prepared) unless its id exists; see toolop.Store.
func (s *Store) PrepareOperation(ctx context.Context, op toolop.Operation) (toolop.Operation, bool, error) {
	if err := ctx.Err(); err != nil {
		return toolop.Operation{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{op.TenantID, op.OperationID}
	if cur, ok := s.ops[k]; ok {
		return cloneOp(cur), false, nil
	}
	at := micro(op.CreatedAt)
	row := toolop.Operation{
		TenantID: op.TenantID, OperationID: op.OperationID, RunID: op.RunID, StepID: op.StepID,
		ToolName: op.ToolName, RequestDigest: op.RequestDigest, Status: toolop.StatusPrepared,
		Key: op.Key, CreatedAt: at, UpdatedAt: at,
	}
	s.ops[k] = row
	return cloneOp(row), true, nil
}

// GetOperation reads one operation; see toolop.Store.
func (s *Store) GetOperation(ctx context.Context, tenantID, operationID string) (toolop.Operation, error) {
	if err := ctx.Err(); err != nil {
		return toolop.Operation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	op, ok := s.ops[key{tenantID, operationID}]
	if !ok {
		return toolop.Operation{}, fmt.Errorf("operation %s: %w", operationID, toolop.ErrNotFound)
	}
	return cloneOp(op), nil
}

// afterPage reports whether (created, id) is after the page's keyset position.
func afterPage(p toolop.Page, created time.Time, id string) bool {
	if p.AfterID == "" {
		return true
	}
	return cmp.Or(cmp.Compare(created.UnixMicro(), p.AfterCreatedAt.UnixMicro()), cmp.Compare(id, p.AfterID)) > 0
}

// limitPage cuts a sorted list to the page's limit (0: all).
func limitPage[T any](p toolop.Page, items []T) []T {
	if p.Limit > 0 && len(items) > p.Limit {
		return items[:p.Limit]
	}
	return items
}

// ListOperations returns a page of a run's operations by (created_at, operation_id); see toolop.Store.
func (s *Store) ListOperations(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Operation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []toolop.Operation
	for k, op := range s.ops {
		if k.tenant == tenantID && op.RunID == runID && (p.StepID == "" || op.StepID == p.StepID) && (!p.InDoubt || op.Status.InDoubt()) &&
			afterPage(p, op.CreatedAt, op.OperationID) {
			out = append(out, cloneOp(op))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b toolop.Operation) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.OperationID, b.OperationID))
	})
	return limitPage(p, out), nil
}

// TransitionOperation changes the status if the current one is in t.From; see toolop.Store.
func (s *Store) TransitionOperation(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	if err := ctx.Err(); err != nil {
		return toolop.Operation{}, err
	}
	if len(t.From) == 0 {
		return toolop.Operation{}, fmt.Errorf("%w: operation %s cannot become %s", toolop.ErrInvalidTransition, operationID, t.To)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenantID, operationID}
	op, ok := s.ops[k]
	if !ok {
		return toolop.Operation{}, fmt.Errorf("operation %s: %w", operationID, toolop.ErrNotFound)
	}
	if !slices.Contains(t.From, op.Status) {
		return toolop.Operation{}, fmt.Errorf("%w: operation %s is %s, cannot become %s", toolop.ErrInvalidTransition, operationID, op.Status, t.To)
	}
	old := op.Status
	op.Status = t.To
	if t.CountAttempt {
		op.Attempts++
	}
	if t.ExternalRef != "" {
		op.ExternalRef = t.ExternalRef
	}
	if len(t.Result) > 0 {
		op.Result = cloneJSON(t.Result)
	}
	op.Error = t.Error
	if t.Resolution != "" {
		op.Resolution = t.Resolution
	}
	op.UpdatedAt = micro(t.At)
	if t.To != old && !t.To.InDoubt() {
		// It settled: a run waiting for it may go on.
		s.wake(tenantID, op.RunID, 0, false)
	}
	s.ops[k] = op
	return cloneOp(op), nil
}

// CreateApproval inserts a pending approval unless its id exists; see toolop.Store.
func (s *Store) CreateApproval(ctx context.Context, a toolop.Approval) (toolop.Approval, bool, error) {
	if err := ctx.Err(); err != nil {
		return toolop.Approval{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{a.TenantID, a.ApprovalID}
	if cur, ok := s.approvals[k]; ok {
		return cloneApproval(cur), false, nil
	}
	row := toolop.Approval{
		TenantID: a.TenantID, ApprovalID: a.ApprovalID, RunID: a.RunID, StepID: a.StepID,
		RequestDigest: a.RequestDigest, Status: toolop.ApprovalPending,
		ExpiresAt: micro(a.ExpiresAt), CreatedAt: micro(a.CreatedAt),
	}
	if len(a.Summary) > 0 {
		row.Summary = cloneJSON(a.Summary)
	}
	s.approvals[k] = row
	s.wake(row.TenantID, row.RunID, row.ExpiresAt.UnixMicro(), false)
	return cloneApproval(row), true, nil
}

// GetApproval reads one approval; see toolop.Store.
func (s *Store) GetApproval(ctx context.Context, tenantID, approvalID string) (toolop.Approval, error) {
	if err := ctx.Err(); err != nil {
		return toolop.Approval{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[key{tenantID, approvalID}]
	if !ok {
		return toolop.Approval{}, fmt.Errorf("approval %s: %w", approvalID, toolop.ErrApprovalNotFound)
	}
	return cloneApproval(a), nil
}

// ListApprovals returns a page of a run's approvals by (created_at, approval_id); see toolop.Store.
func (s *Store) ListApprovals(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []toolop.Approval
	for k, a := range s.approvals {
		if k.tenant == tenantID && a.RunID == runID && (p.StepID == "" || a.StepID == p.StepID) && !p.InDoubt && afterPage(p, a.CreatedAt, a.ApprovalID) {
			out = append(out, cloneApproval(a))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b toolop.Approval) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ApprovalID, b.ApprovalID))
	})
	return limitPage(p, out), nil
}

// DecideApproval records a decision on a pending, unexpired approval; see toolop.Store.
func (s *Store) DecideApproval(ctx context.Context, tenantID, approvalID string, d toolop.Decision) (toolop.Approval, error) {
	if err := ctx.Err(); err != nil {
		return toolop.Approval{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenantID, approvalID}
	a, ok := s.approvals[k]
	if !ok {
		return toolop.Approval{}, fmt.Errorf("approval %s: %w", approvalID, toolop.ErrApprovalNotFound)
	}
	if a.Status != toolop.ApprovalPending {
		return toolop.Approval{}, fmt.Errorf("%w: approval %s is %s", toolop.ErrApprovalDecided, approvalID, a.Status)
	}
	at := micro(d.At)
	if !a.ExpiresAt.After(at) {
		return toolop.Approval{}, fmt.Errorf("%w: approval %s expired at %s", toolop.ErrApprovalExpired, approvalID, a.ExpiresAt.Format(time.RFC3339Nano))
	}
	a.Status = toolop.ApprovalRejected
	if d.Approve {
		a.Status = toolop.ApprovalApproved
	}
	a.DecidedBy, a.Reason, a.DecidedAt = d.By, d.Reason, &at
	s.approvals[k] = a
	s.wake(tenantID, a.RunID, 0, false)
	return cloneApproval(a), nil
}
