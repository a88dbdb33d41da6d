package faultstore

import (
	"context"

	"github.com/mementohq/memento/toolop"
)

// Ops is a toolop.Store with faults injected; each method is the inner one behind inject.
type Ops struct {
	inner toolop.Store
	in    *Injector
}

var _ toolop.Store = (*Ops)(nil)

// Ops wraps s.
func (in *Injector) Ops(s toolop.Store) *Ops { return &Ops{inner: s, in: in} }

func (s *Ops) PrepareOperation(ctx context.Context, op toolop.Operation) (toolop.Operation, bool, error) {
	return call3(s.in.inject(ctx, "PrepareOperation", op), func() (toolop.Operation, bool, error) { return s.inner.PrepareOperation(ctx, op) })
}

func (s *Ops) GetOperation(ctx context.Context, tenantID, operationID string) (toolop.Operation, error) {
	return call2(s.in.inject(ctx, "GetOperation", tenantID, operationID), func() (toolop.Operation, error) {
		return s.inner.GetOperation(ctx, tenantID, operationID)
	})
}

func (s *Ops) ListOperations(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Operation, error) {
	return call2(s.in.inject(ctx, "ListOperations", tenantID, runID, p), func() ([]toolop.Operation, error) { return s.inner.ListOperations(ctx, tenantID, runID, p) })
}

func (s *Ops) TransitionOperation(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	return call2(s.in.inject(ctx, "TransitionOperation", tenantID, operationID, t), func() (toolop.Operation, error) {
		return s.inner.TransitionOperation(ctx, tenantID, operationID, t)
	})
}

func (s *Ops) CreateApproval(ctx context.Context, a toolop.Approval) (toolop.Approval, bool, error) {
	return call3(s.in.inject(ctx, "CreateApproval", a), func() (toolop.Approval, bool, error) { return s.inner.CreateApproval(ctx, a) })
}

func (s *Ops) GetApproval(ctx context.Context, tenantID, approvalID string) (toolop.Approval, error) {
	return call2(s.in.inject(ctx, "GetApproval", tenantID, approvalID), func() (toolop.Approval, error) { return s.inner.GetApproval(ctx, tenantID, approvalID) })
}

func (s *Ops) ListApprovals(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Approval, error) {
	return call2(s.in.inject(ctx, "ListApprovals", tenantID, runID, p), func() ([]toolop.Approval, error) { return s.inner.ListApprovals(ctx, tenantID, runID, p) })
}

func (s *Ops) DecideApproval(ctx context.Context, tenantID, approvalID string, d toolop.Decision) (toolop.Approval, error) {
	return call2(s.in.inject(ctx, "DecideApproval", tenantID, approvalID, d), func() (toolop.Approval, error) {
		return s.inner.DecideApproval(ctx, tenantID, approvalID, d)
	})
}
