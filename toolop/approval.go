package toolop

import (
	"encoding/json"
	"fmt"
	"time"
)

// ApprovalStatus is the decision state of an approval as stored. An
// undecided approval past its expiry is reported as expired by Check.
type ApprovalStatus string

// Stored approval statuses.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalRejected ApprovalStatus = "rejected"
)

// Approval asks a person (or a policy) to allow one step's request, named by
// its digest, until an expiry.
type Approval struct {
	TenantID      string          `json:"tenant_id"`
	ApprovalID    string          `json:"approval_id"`
	RunID         string          `json:"run_id"`
	StepID        string          `json:"step_id"`
	RequestDigest string          `json:"request_digest"`
	Summary       json.RawMessage `json:"summary,omitempty"`
	Status        ApprovalStatus  `json:"status"`
	ExpiresAt     time.Time       `json:"expires_at"`
	DecidedBy     string          `json:"decided_by,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	DecidedAt     *time.Time      `json:"decided_at,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
}

// Decision is what an approver says.
type Decision struct {
	Approve bool      `json:"approve"`
	By      string    `json:"by"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"-"`
}

// Check tells whether the approval allows a request with this digest now:
// only an approved, unexpired approval for the same digest does.
func (a Approval) Check(requestDigest string, now time.Time) error {
	if a.RequestDigest != requestDigest {
		return fmt.Errorf("%w: approval %s covers %s, the request is %s", ErrApprovalDigestMismatch, a.ApprovalID, a.RequestDigest, requestDigest)
	}
	if !now.Before(a.ExpiresAt) {
		return fmt.Errorf("%w: approval %s expired at %s", ErrApprovalExpired, a.ApprovalID, a.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	switch a.Status {
	case ApprovalApproved:
		return nil
	case ApprovalRejected:
		return fmt.Errorf("%w: approval %s rejected by %s: %s", ErrApprovalRejected, a.ApprovalID, a.DecidedBy, a.Reason)
	default:
		return fmt.Errorf("%w: approval %s", ErrApprovalPending, a.ApprovalID)
	}
}

// Effective is the status a reader should see: pending or approved past
// expiry is "expired" (it allows nothing any more); a rejection stays one.
func (a Approval) Effective(now time.Time) string {
	if a.Status != ApprovalRejected && !now.Before(a.ExpiresAt) {
		return "expired"
	}
	return string(a.Status)
}
