package run

import "errors"

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
