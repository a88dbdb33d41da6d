package compact

import (
	"context"
	"time"
)

// Store persists summaries, apart from every source of truth: nothing in
// it is read back into a run, the operation ledger or a session (rule 1).
// Every method is scoped by tenant first; a summary of another tenant is
// ErrNotFound. Summaries are stored whole and returned Normalize'd with
// times at microsecond precision. Implementations live under store/ and
// pass storetest.SummaryStoreSuite.
type Store interface {
	// Put inserts s (its SummaryID is new: ErrAlreadyExists otherwise).
	// When s.Supersedes names a summary of the same tenant, that one's
	// Status becomes StatusSuperseded in the same atomic step. An owner has
	// at most one current summary per Covers.FromSeq: a Put that would
	// make a second is ErrAlreadyExists and changes nothing (two
	// compactions of the same next range race; one wins).
	Put(ctx context.Context, s Summary) error

	// Get returns one summary (ErrNotFound if absent).
	Get(ctx context.Context, tenantID, summaryID string) (Summary, error)

	// List returns the owner's summaries (matched on Kind and ID) in range
	// order: by Covers.FromSeq, then SummaryID (ids are time-ordered, so the
	// versions of a range come oldest first), strictly after the keyset
	// position (q.AfterFromSeq, q.AfterID) — (0, "") from the start — at
	// most q.Limit (<= 0: DefaultListLimit), only those with q.Status when set.
	List(ctx context.Context, tenantID string, owner Owner, q ListQuery) ([]Summary, error)

	// MarkStale sets Status to StatusStale with reason and at, unless the
	// summary is superseded (then it is returned unchanged); it returns the
	// summary as stored (ErrNotFound if absent).
	MarkStale(ctx context.Context, tenantID, summaryID, reason string, at time.Time) (Summary, error)

	// DeleteOwner deletes every summary of the owner (retention, or a
	// forgotten session) and returns how many it deleted.
	DeleteOwner(ctx context.Context, tenantID string, owner Owner) (int, error)
}

// ListQuery selects a page of Store.List.
type ListQuery struct {
	AfterFromSeq int64
	AfterID      string
	Limit        int
	Status       Status
}

// Limits of lists.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)
