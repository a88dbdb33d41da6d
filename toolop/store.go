package toolop

import (
	"context"
	"time"
)

// Page is a keyset page of a run's operations or approvals: the items after
// (AfterCreatedAt, AfterID) in (created_at, id) order, at most Limit (0: all),
// kept to one step's (StepID) or, of operations, to those in doubt (InDoubt):
// the checks that need only those read only those, whatever the run holds.
type Page struct {
	AfterCreatedAt time.Time
	AfterID        string
	Limit          int
	StepID         string
	InDoubt        bool
}

// Store persists the operation ledger and approvals. Every method is scoped by
// tenant first; a row of another tenant is not found. Implementations live
// under store/ and must pass storetest.ToolopStoreSuite. Times keep microseconds.
//
// A backend that keeps runs too writes the run's wake-ups (see
// run.Store.ListRecoverable; storetest.RecoverySuite) in the same
// transaction as the change, and only while the run (op.RunID / a.RunID) is
// running or suspended:
//   - TransitionOperation to a status not in doubt (not started or unknown)
//     from a different status: an immediate wake-up (run.WakeNow);
//   - CreateApproval that inserts a pending approval: a wake-up at ExpiresAt;
//   - DecideApproval that decides it: an immediate wake-up.
//
// Writing a wake-up that exists (same run and At) increments its N.
type Store interface {
	// PrepareOperation inserts op (status prepared) unless an operation with the
	// same tenant and id exists, in which case the stored one is returned with
	// created=false and nothing changes. The caller compares digests.
	PrepareOperation(ctx context.Context, op Operation) (stored Operation, created bool, err error)

	GetOperation(ctx context.Context, tenantID, operationID string) (Operation, error)

	// ListOperations returns a run's operations ordered by (created_at,
	// operation_id), strictly after (p.AfterCreatedAt, p.AfterID) when
	// p.AfterID is set, at most p.Limit (0: all).
	ListOperations(ctx context.Context, tenantID, runID string, p Page) ([]Operation, error)

	// TransitionOperation applies t atomically, only if the operation's current
	// status is in t.From; otherwise nothing changes and the error is
	// ErrNotFound or ErrInvalidTransition (naming the current status).
	TransitionOperation(ctx context.Context, tenantID, operationID string, t Transition) (Operation, error)

	// CreateApproval inserts a (pending) unless one with the same id exists: then
	// the stored one is returned with created=false.
	CreateApproval(ctx context.Context, a Approval) (stored Approval, created bool, err error)

	GetApproval(ctx context.Context, tenantID, approvalID string) (Approval, error)

	// ListApprovals returns a run's approvals ordered by (created_at,
	// approval_id), after p and at most p.Limit as ListOperations.
	ListApprovals(ctx context.Context, tenantID, runID string, p Page) ([]Approval, error)

	// DecideApproval records d atomically, only if the approval is pending and
	// d.At is before its expiry; otherwise nothing changes and the error is
	// ErrApprovalNotFound, ErrApprovalDecided or ErrApprovalExpired.
	DecideApproval(ctx context.Context, tenantID, approvalID string, d Decision) (Approval, error)
}
