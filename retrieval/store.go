package retrieval

import (
	"context"
	"time"
)

// Store persists documents, their chunk projections (full text, vectors,
// ACL), group membership, stored snapshots with their texts by digest, and
// invalidation events. Every method is scoped by tenant first. Every change
// moves the tenant's index version in the same transaction, so an
// in-process index (the Service's) can tell it is stale with one cheap
// read, on any instance. Times have microsecond precision. Implementations
// live under store/ and pass storetest.RetrievalStoreSuite.
type Store interface {
	// PutDocument writes p.Document (Version set by the caller) and
	// p.Chunks, replacing every projection row of the version it replaces,
	// atomically. p.ExpectedVersion is the stored version the write replaces
	// (0: the document must not exist); another is ErrConflict. p.Event,
	// when set, is recorded with the new index version. It returns the new
	// index version and how many projection rows it removed.
	PutDocument(ctx context.Context, p PutParams) (int64, int, error)

	// TouchDocument sets IndexedAt of an unchanged document version
	// (ErrConflict if the version moved, ErrNotFound if it is gone).
	TouchDocument(ctx context.Context, tenantID, documentID string, version int64, at time.Time) error

	// GetDocument returns the current version of a document or ErrNotFound.
	GetDocument(ctx context.Context, tenantID, documentID string) (Document, error)

	// DeleteDocument removes the document and every projection row of it
	// and records ev (IndexVersion and RowsRemoved set by the store). It
	// returns ErrNotFound when there is no such document.
	DeleteDocument(ctx context.Context, tenantID, documentID string, ev Invalidation) (Invalidation, error)

	// DeletedVersion is the version a document had when it was last
	// deleted (0: never deleted), from the invalidation log: a document put
	// again under its id goes on from it, so its versions and chunk ids
	// never name two contents.
	DeletedVersion(ctx context.Context, tenantID, documentID string) (int64, error)

	// SetMember adds (member true) or removes principal from group and,
	// when that changed anything, records ev and moves the index version.
	// It reports whether membership changed.
	SetMember(ctx context.Context, tenantID, group, principal string, member bool, ev Invalidation) (bool, error)

	// Groups lists the groups principal belongs to, sorted.
	Groups(ctx context.Context, tenantID, principal string) ([]string, error)

	// SearchText ranks the chunks q.Principal may read (its own entry, its
	// groups resolved in the same query, or the tenant entry) of documents
	// indexed at or after q.NotBefore, by full-text relevance to q.Terms
	// (any term matches; BM25 or the backend's equivalent), best first, at
	// most q.Limit. The ACL is part of the query: a chunk the principal may
	// not read is never scored, counted or returned. A Service ranks with
	// it when it keeps no in-process index (Options.IndexTenants < 0).
	SearchText(ctx context.Context, q TextQuery) ([]Scored, error)

	// ReadableChunks returns the chunks among ids that principal may read
	// now (same rule as SearchText), with their texts: the re-check every
	// hit passes before its text leaves the store.
	ReadableChunks(ctx context.Context, tenantID, principal string, ids []string, notBefore time.Time) ([]Chunk, error)

	// IndexRows returns the live chunks written at an index version
	// greater than afterVersion, each with its document's version and ACL,
	// its terms and, when model is not empty, its vector under model (nil
	// when it has none); the invalidations after afterVersion (so a cache
	// drops the documents they name); and the index version when read, as
	// one snapshot. It reads terms, not texts (Text only for a chunk stored
	// without terms).
	IndexRows(ctx context.Context, tenantID, model string, afterVersion int64) ([]IndexRow, []Invalidation, int64, error)

	// IndexVersion is the tenant's change counter (0 before any change).
	IndexVersion(ctx context.Context, tenantID string) (int64, error)

	// Invalidations lists events after the index version after, oldest
	// first, at most limit.
	Invalidations(ctx context.Context, tenantID string, after int64, limit int) ([]Invalidation, error)

	// PutSnapshot stores a snapshot and the texts of its hits by digest.
	PutSnapshot(ctx context.Context, s Snapshot) error

	// GetSnapshot returns a stored snapshot with its texts, or ErrNotFound.
	GetSnapshot(ctx context.Context, tenantID, snapshotID string) (Snapshot, error)

	// PurgeSnapshots deletes the tenant's snapshots (every tenant's when
	// tenantID is "") created before before and the texts no remaining
	// snapshot references; it returns how many snapshots it deleted.
	PurgeSnapshots(ctx context.Context, tenantID string, before time.Time) (int, error)

	// ProjectionRows counts the document's rows in every projection
	// (chunks, full text, vectors, ACL): what a delete must bring to zero.
	// For tests and audit.
	ProjectionRows(ctx context.Context, tenantID, documentID string) (int, error)
}

// PutParams is one Store.PutDocument.
type PutParams struct {
	Document        Document
	Chunks          []Chunk
	Vectors         []Vector // optional; one per chunk under one model
	ExpectedVersion int64
	Event           *Invalidation
}

// TextQuery is one Store.SearchText.
type TextQuery struct {
	TenantID  string
	Principal string
	Terms     []string
	Limit     int
	NotBefore time.Time
}

// IndexRow is one live chunk as the in-process index loads it.
type IndexRow struct {
	ChunkID    string
	DocumentID string
	Version    int64 // of the document
	ACL        []string
	Terms      string // EncodeTerms of the chunk's text
	// Text is set only for a chunk stored without terms (written before
	// the stores kept them); the index derives them from it.
	Text         string
	Vector       []float32
	IndexVersion int64 // the tenant's index version when the chunk was written
}

// Scored is a chunk id with a score from one ranking.
type Scored struct {
	ChunkID string
	Score   float64
}
