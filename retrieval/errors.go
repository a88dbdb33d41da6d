package retrieval

import "errors"

// Sentinel errors callers branch on. Stores and the Service wrap them with context.
var (
	// ErrNotFound is a document or snapshot that does not exist in the tenant.
	ErrNotFound = errors.New("retrieval: not found")
	// ErrInvalidInput is a malformed document, ACL, principal, group or query.
	ErrInvalidInput = errors.New("invalid input")
	// ErrConflict is a concurrent change to the same document: the version
	// the write expected is not the stored one.
	ErrConflict = errors.New("the document changed concurrently")
)
