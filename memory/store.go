package memory

import (
	"context"
	"time"
)

// Store persists claims and their search projections (full text, vectors),
// tombstones, forget audit records and namespace policies. Every method is
// scoped by tenant first. Every change to a subject's claims bumps that
// subject's version in the same transaction, so an in-process cache (the
// vector index, profiles) can tell it is stale with one cheap read, on any
// instance. Times have microsecond precision. Implementations live under
// store/ and pass storetest.MemoryStoreSuite.
type Store interface {
	// Insert stores p.Claim (its MemoryID, ValueDigest, Text, times and
	// Status set by the caller; Version set by the store) with its full-text
	// row and, when p.Vector is set, its vector row, atomically:
	//   - a tombstone for (subject, namespace, key, value digest) refuses it
	//     with ErrTombstoned;
	//   - with p.Supersede set, that claim must be current (else
	//     ErrConflict); it becomes superseded by the new one, SupersededAt =
	//     p.SupersededAt, and loses its projection rows;
	//   - a current claim inserted while another current claim holds the same
	//     (subject, namespace, key) and is not p.Supersede is ErrConflict.
	Insert(ctx context.Context, p InsertParams) (Claim, error)

	// Get returns a claim in any status, or ErrNotFound.
	Get(ctx context.Context, tenantID, memoryID string) (Claim, error)

	// GetMany returns the claims with these ids that exist, in any order.
	GetMany(ctx context.Context, tenantID string, memoryIDs []string) ([]Claim, error)

	// List returns claims of q.SubjectID (required) ordered by
	// (CreatedAt, MemoryID) ascending, after the q.After position, at most
	// q.Limit. See ListQuery for the filters.
	List(ctx context.Context, q ListQuery) ([]Claim, error)

	// Transition moves a claim from one of p.From to p.To atomically (else
	// ErrConflict; a missing claim is ErrNotFound), setting the invalidation
	// time and reason when p.To is invalidated. A claim that becomes current
	// (a held claim confirmed) supersedes p.Supersede as Insert does and gets
	// p.Vector and its full-text row; one that leaves current loses them.
	Transition(ctx context.Context, p TransitionParams) (Claim, error)

	// Refresh records that an exact duplicate of a current claim was seen:
	// ConfirmedAt = at, Confirmations+1. ErrConflict if it is not current.
	Refresh(ctx context.Context, tenantID, memoryID string, at time.Time) (Claim, error)

	// Forget deletes every claim of the subject (in p.Namespace only, when
	// set) with every projection row, leaves one tombstone per distinct
	// (namespace, key, value digest), and writes p.Record with the counts,
	// in one transaction. It returns the record as written (a record
	// without ForgetID or CreatedAt gets a new id and the store's clock).
	Forget(ctx context.Context, p ForgetParams) (ForgetRecord, error)

	// Tombstones lists the subject's tombstones (for audit and tests).
	Tombstones(ctx context.Context, tenantID, subjectID string) ([]Tombstone, error)

	// SearchText ranks the subject's current, unexpired claims (in
	// q.Namespace when set) by full-text relevance to q.Terms (any term
	// matches; BM25 or the backend's equivalent), best first, at most
	// q.Limit. Scores are comparable within one answer only. Service.Search
	// ranks in process from Changes instead (a large subject's matches cost
	// the store seconds per query); this is the store's own ranking.
	SearchText(ctx context.Context, q TextQuery) ([]Scored, error)

	// Vectors returns the vector rows under model of the subject's current
	// claims written at a subject version greater than afterVersion, in
	// version order, and the subject's version when read.
	Vectors(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) ([]Vector, int64, error)

	// MissingVectors returns up to limit (<= 0: all) current claims of the
	// subject that have no vector under model (after a model change), in
	// (CreatedAt, MemoryID) order.
	MissingVectors(ctx context.Context, tenantID, subjectID, model string, limit int) ([]Claim, error)

	// PutVectors stores vectors of current claims (replacing one under the
	// same model), bumping the subject version. Vectors of claims that are
	// not current are ignored.
	PutVectors(ctx context.Context, tenantID, subjectID string, vs []Vector) error

	// SubjectVersion is the subject's change counter (0 if it never had a claim).
	SubjectVersion(ctx context.Context, tenantID, subjectID string) (int64, error)

	// Changes returns, as one snapshot, what an in-process index of the
	// subject at afterVersion needs to equal the store: the subject's
	// version and the version of its last forget that deleted claims; the
	// claims written at a greater version, in every status (so one that left
	// current is dropped), only current ones when afterVersion is 0; and the
	// vectors under model (none for "") written at a greater version. Each
	// claim and vector comes once, in no set order. Forgetting deletes rows that no
	// change can name: when Forgotten > afterVersion > 0, start again from 0.
	Changes(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) (Changes, error)

	// PutNamespace stores a namespace policy; GetNamespace returns it or the
	// zero policy (Name set) when none was declared.
	PutNamespace(ctx context.Context, ns Namespace) error
	GetNamespace(ctx context.Context, tenantID, name string) (Namespace, error)

	// Unconsented counts the tenant's current, unexpired claims in namespace
	// (any subject) that have no consent basis.
	Unconsented(ctx context.Context, tenantID, namespace string) (int, error)

	// ProjectionRows counts the subject's rows in every projection (full
	// text, vectors): what a forget must bring to zero. For tests and audit.
	ProjectionRows(ctx context.Context, tenantID, subjectID string) (int, error)
}

// BatchInserter is a Store that can insert many claims in one transaction,
// for imports and bulk loads (bench memory loads a million claims): one
// commit, and on PostgreSQL one round trip, per batch instead of per claim.
// store/sqlite and store/postgres implement it.
type BatchInserter interface {
	// InsertBatch is Store.Insert of each of ps in order, in one
	// transaction: every claim is stored or, on the first refusal (a
	// tombstone, a conflict), none, and the error says which refusal.
	InsertBatch(ctx context.Context, ps []InsertParams) ([]Claim, error)
}

// ChangesGetter is a Store that answers Changes and GetMany together, in
// one round trip: a search ranks in the subject's index as it stands,
// then reads what changed since and the candidates' rows at once, and only
// when the subject moved applies the changes, ranks again and re-checks
// again. store/postgres implements it (in process, SQLite gains nothing).
type ChangesGetter interface {
	// ChangesAndGet is Changes(tenantID, subjectID, model, afterVersion)
	// and GetMany(tenantID, memoryIDs); GetMany is read after Changes.
	ChangesAndGet(ctx context.Context, tenantID, subjectID, model string, afterVersion int64, memoryIDs []string) (Changes, []Claim, error)
}

// InsertParams is one Store.Insert.
type InsertParams struct {
	Claim Claim
	// LegacyDigest is the unkeyed ValueDigest of a claim whose ValueDigest
	// is keyed: a tombstone written before digests were keyed holds it,
	// and blocks the claim as well. Empty when the digest is unkeyed.
	LegacyDigest string
	Supersede    string
	SupersededAt time.Time
	Vector       *Vector
}

// ListQuery selects claims of one subject.
type ListQuery struct {
	TenantID  string
	SubjectID string
	Namespace string // "" is every namespace
	Key       string // "" is every key
	// Statuses, when set, keeps only these statuses.
	Statuses []Status
	// LiveAt, when set, keeps only claims live at that time: current and
	// unexpired for now, or in force then (Claim.LiveAt) for a past time.
	LiveAt *time.Time
	// AsOf selects valid-time reads: claims in force at LiveAt, whatever
	// their status now (superseded, invalidated or expired since).
	AsOf bool
	// MaxSchemaVersion, when > 0, drops claims of a newer schema version.
	MaxSchemaVersion int
	AfterCreated     time.Time
	AfterID          string
	Limit            int // <= 0 is no limit
}

// TransitionParams is one Store.Transition.
type TransitionParams struct {
	TenantID     string
	MemoryID     string
	From         []Status
	To           Status
	At           time.Time
	Reason       string
	Supersede    string
	SupersededAt time.Time
	Vector       *Vector
}

// ForgetParams is one Store.Forget.
type ForgetParams struct {
	TenantID  string
	SubjectID string
	Namespace string
	Record    ForgetRecord
}

// TextQuery is one Store.SearchText.
type TextQuery struct {
	TenantID  string
	SubjectID string
	Namespace string
	Terms     []string
	Limit     int       // <= 0 is no limit
	Now       time.Time // zero is the store's clock
}

// Changes is the answer of Store.Changes.
type Changes struct {
	Version   int64
	Forgotten int64
	Claims    []ClaimChange
	Vectors   []Vector
}

// ClaimChange is what an index needs of a written claim: Text is set for a
// current claim only.
type ClaimChange struct {
	MemoryID  string
	Namespace string
	Status    Status
	Text      string
	ExpiresAt *time.Time
	Version   int64
}

// Scored is a claim id with a score from one ranking.
type Scored struct {
	MemoryID string
	Score    float64
}
