package session

import "errors"

// Sentinel errors callers branch on. Stores and the Service wrap them with context.
var (
	// ErrNotFound covers a missing session, an expired one, and one that
	// belongs to another user or tenant: callers cannot tell them apart.
	ErrNotFound = errors.New("session not found")
	// ErrPreconditionFailed is a stale expected revision (HTTP 412).
	ErrPreconditionFailed = errors.New("session revision does not match the expected revision")
	// ErrPreconditionRequired is a conditional write without an expected revision (HTTP 428).
	ErrPreconditionRequired = errors.New("an expected revision is required")
	ErrStateTooLarge        = errors.New("session state exceeds the size limit")
	ErrMessageTooLarge      = errors.New("message exceeds the size limit")
	ErrInvalidInput         = errors.New("invalid input")
	ErrSchemaValidation     = errors.New("session state does not match its schema")
	// ErrIdempotencyMismatch is an append under a key an earlier append of
	// other messages used (HTTP 422).
	ErrIdempotencyMismatch = errors.New("idempotency key was used with other messages")
)
