package run

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors callers branch on. Stores and the Service wrap them with context.
var (
	ErrNotFound            = errors.New("run not found")
	ErrAlreadyExists       = errors.New("run already exists")
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	ErrRevisionConflict    = errors.New("expected revision does not match the run's revision")
	ErrLeaseHeld           = errors.New("lease is held by another owner")
	ErrLeaseLost           = errors.New("lease is not held: wrong owner, stale epoch or expired")
	ErrInvalidTransition   = errors.New("status transition not allowed")
	ErrRunNotActive        = errors.New("run is terminal")
	ErrStateTooLarge       = errors.New("state exceeds the size limit")
	ErrInvalidInput        = errors.New("invalid input")
	ErrNoMigrationPath     = errors.New("no migration path for state schema version")
	ErrSchemaValidation    = errors.New("state does not match its schema")
	ErrCheckpointExists    = errors.New("checkpoint label already exists")
	ErrCheckpointNotFound  = errors.New("checkpoint not found")
	ErrRevisionNotFound    = errors.New("revision not found")
)

// RevisionConflictError is ErrRevisionConflict with the run's revision at
// the time, so a caller can re-read or rebase without guessing. errors.Is
// with ErrRevisionConflict holds.
type RevisionConflictError struct {
	RunID    string
	Expected int64
	// Current is the run's revision; 0 when a concurrent change was seen
	// but not read.
	Current int64
}

func (e *RevisionConflictError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("run %s: expected revision %d: a concurrent change: %v", e.RunID, e.Expected, ErrRevisionConflict)
	}
	return fmt.Sprintf("run %s: expected revision %d, the run is at %d: %v", e.RunID, e.Expected, e.Current, ErrRevisionConflict)
}

func (e *RevisionConflictError) Unwrap() error { return ErrRevisionConflict }

// LeaseHeldError is ErrLeaseHeld with who holds the lease and until when.
// errors.Is with ErrLeaseHeld holds.
type LeaseHeldError struct {
	RunID string
	Owner string // "" when the holder was not read
	// ExpiresAt is when the holder's lease ends, if known.
	ExpiresAt *time.Time
}

func (e *LeaseHeldError) Error() string {
	switch {
	case e.Owner == "":
		return fmt.Sprintf("run %s: %v", e.RunID, ErrLeaseHeld)
	case e.ExpiresAt == nil:
		return fmt.Sprintf("run %s: held by %s: %v", e.RunID, e.Owner, ErrLeaseHeld)
	}
	return fmt.Sprintf("run %s: held by %s until %s: %v", e.RunID, e.Owner, e.ExpiresAt.UTC().Format(time.RFC3339Nano), ErrLeaseHeld)
}

func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }
