package session

import (
	"context"
	"encoding/json"
	"time"
)

// Store persists sessions. Every method is scoped by tenant and bound to the
// user: a session of another tenant or user, or one past its expiry, is
// ErrNotFound on every path, whether or not storage was reclaimed yet.
// Each write is activity: it moves the expiry to now + the session's TTL
// (reads do not, so a GET is side-effect free). Times have microsecond
// precision. Implementations live under store/ and pass storetest.SessionStoreSuite.
type Store interface {
	// Put creates the session (revision 1, created=true) or, if it is live and
	// belongs to p.UserID, replaces its state, app and TTL (revision+1),
	// keeping messages and summary. An expired session is replaced as if
	// absent. With p.ExpectedRevision > 0 the session must exist at that
	// revision, else ErrPreconditionFailed. A live session of another user is
	// ErrNotFound.
	Put(ctx context.Context, p PutParams) (s Session, created bool, err error)

	Get(ctx context.Context, tenantID, sessionID, userID string) (Session, error)

	// SetState replaces the state if the revision is expectedRevision
	// (else ErrPreconditionFailed), atomically, and returns the session.
	SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (Session, error)

	// Append adds msgs with consecutive seqs and strictly increasing times
	// and, in the same atomic step, drops the oldest messages beyond
	// maxMessages, reporting how many it dropped.
	Append(ctx context.Context, tenantID, sessionID, userID string, msgs []MessageInput, maxMessages int) (AppendResult, error)

	// AppendKeyed is Append under an idempotency key: if one of the
	// session's last MaxAppendKeys keyed appends used k.Key, it appends
	// nothing and returns that append's seqs (replay non-nil), or
	// ErrIdempotencyMismatch when its digest was not k.Digest. Otherwise it
	// appends and remembers the key in the same atomic step. A session
	// closed and created again remembers none of the old one's keys.
	AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []MessageInput, maxMessages int, k AppendKey) (res AppendResult, replay *AppendReplay, err error)

	// Messages returns the latest q.Limit messages with seq > q.AfterSeq,
	// seq < q.BeforeSeq (when > 0) and created after q.Since (when set),
	// oldest first.
	Messages(ctx context.Context, tenantID, sessionID, userID string, q MessageQuery) ([]Message, error)

	// SetSummary stores the summary slot (UpdatedAt is set by the store).
	SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum Summary) (Session, error)

	// Delete removes the session with its messages and returns it as it was
	// (the service's Close).
	Delete(ctx context.Context, tenantID, sessionID, userID string) (Session, error)

	// ListByUser returns at most q.Limit of the user's live sessions in the
	// listing order: LastActivityAt descending, then SessionID ascending.
	// With q.AfterSessionID set, it starts strictly after the position
	// (q.AfterActivity, q.AfterSessionID) in that order (keyset paging: a
	// session active again while a caller pages may move to an earlier
	// page). List items carry no State and no Summary (nil): a listing
	// reads only the record, never the documents; Get returns them.
	ListByUser(ctx context.Context, tenantID, userID string, q ListQuery) ([]Session, error)
}

// MaxAppendKeys is how many of a session's latest keyed appends a store
// remembers: a retry comes within seconds, and a session must not grow
// with every key it was ever sent.
const MaxAppendKeys = 32

// AppendKey is an append's idempotency key and the digest of its messages.
type AppendKey struct{ Key, Digest string }

// AppendReplay is what a store remembers of a keyed append: its first seq
// and how many messages it appended.
type AppendReplay struct {
	FirstSeq int64
	Count    int
}

// ListQuery selects a page of a user's sessions (see Store.ListByUser).
type ListQuery struct {
	Limit          int
	AfterActivity  time.Time
	AfterSessionID string
}

// StatePatcher is an optional Store capability that Service.Patch uses
// instead of Get then SetState. A store that can often skip the read (the
// Redis store remembers the last state it saw of each session) makes a
// patch one round trip.
type StatePatcher interface {
	// PatchState calls merge with the session at expectedRevision (State,
	// App and Revision exact; other fields possibly older) and stores the
	// state merge returns if the session is still that revision of that
	// session (not one deleted and created again), atomically, then returns
	// the session. A session at another revision is ErrPreconditionFailed.
	// merge may be called more than once and has no side effects; an error
	// from merge is returned as is.
	PatchState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, merge func(cur Session) (json.RawMessage, error)) (Session, error)
}
