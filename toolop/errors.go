package toolop

import "errors"

// Sentinel errors callers branch on. The Service and stores wrap them with context.
var (
	ErrNotFound          = errors.New("operation not found")
	ErrDigestMismatch    = errors.New("operation id reused with a different request (run, step, tool or digest)")
	ErrInvalidTransition = errors.New("operation status transition not allowed")
	ErrInvalidInput      = errors.New("invalid input")
	ErrNotAuthoritative  = errors.New("no authoritative answer about the operation")

	ErrApprovalNotFound       = errors.New("approval not found")
	ErrApprovalExists         = errors.New("approval id reused with a different request")
	ErrApprovalDecided        = errors.New("approval already decided")
	ErrApprovalPending        = errors.New("approval not decided yet")
	ErrApprovalRejected       = errors.New("approval rejected")
	ErrApprovalExpired        = errors.New("approval expired")
	ErrApprovalDigestMismatch = errors.New("approval is for a different request digest")

	ErrBudgetExhausted = errors.New("budget exhausted")
)
