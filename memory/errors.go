package memory

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on. Stores and the Service wrap them with context.
var (
	// ErrNotFound is a claim that does not exist in the tenant (or was forgotten).
	ErrNotFound = errors.New("memory not found")
	// ErrInvalidInput is a malformed claim, query or id.
	ErrInvalidInput = errors.New("invalid input")
	// ErrNoProvenance is a write without a usable provenance.
	ErrNoProvenance = errors.New("a claim needs its provenance")
	// ErrNoConsent is a write to a personal namespace without a consent basis.
	ErrNoConsent = errors.New("a personal namespace needs a consent basis")
	// ErrTombstoned is a claim that was forgotten: its tombstone blocks it.
	ErrTombstoned = errors.New("the claim was forgotten and its tombstone blocks it")
	// ErrConflict is a concurrent change to the same key (the current claim
	// moved) or a transition from a status that does not allow it.
	ErrConflict = errors.New("the claim changed concurrently or is not in a status that allows this")
	// ErrIdempotencyMismatch is an Idempotency-Key sent again with another claim.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different claim")
	// ErrNoExtractor is Extract on a Service without an extractor; it is
	// also ErrInvalidInput.
	ErrNoExtractor = fmt.Errorf("%w: no extractor is configured", ErrInvalidInput)
)
