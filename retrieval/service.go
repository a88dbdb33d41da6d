package retrieval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mementohq/memento/internal/jsoncheck"
	"github.com/mementohq/memento/internal/periodic"
	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/search"
)

// Limits of one request.
const (
	MaxContentBytes = 4 << 20
	MaxQueryBytes   = 4096
	MaxK            = 100
	DefaultK        = 10
	// DefaultSnapshotRetention is how long a snapshot (and the texts it
	// references) is kept when Options leaves it zero.
	DefaultSnapshotRetention = 30 * 24 * time.Hour
	// putRetries bounds the optimistic retries of a write racing another
	// write of the same document.
	putRetries = 5
)

// Options tunes a Service.
type Options struct {
	// Embedder, when set, adds vector search to full text (hybrid).
	Embedder llm.Embedder
	// ChunkTokens and OverlapTokens size the chunks (defaults 200 and 40).
	ChunkTokens, OverlapTokens int
	// TTL, when > 0, bounds the age of indexed content: a document not
	// written or re-confirmed (PUT of the same version) within TTL is not
	// served until it is.
	TTL time.Duration
	// SnapshotRetention is how long PurgeSnapshots keeps snapshots
	// (DefaultSnapshotRetention when zero).
	SnapshotRetention time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// IndexTenants is how many tenants' in-process indexes (full text and
	// vectors) the Service keeps, least recently used dropped first
	// (DefaultIndexTenants when zero). Negative keeps none: full text then
	// ranks in the store (Store.SearchText) and there is no vector search.
	IndexTenants int
}

// Service is retrieval with provenance over a Store.
type Service struct {
	store Store
	opts  Options
	index *indexCache // nil: rank in the store
}

// NewService returns a service over store.
func NewService(store Store, opts Options) *Service {
	if opts.ChunkTokens <= 0 {
		opts.ChunkTokens = DefaultChunkTokens
	}
	if opts.OverlapTokens <= 0 || opts.OverlapTokens >= opts.ChunkTokens {
		opts.OverlapTokens = min(DefaultOverlapTokens, opts.ChunkTokens/5)
	}
	if opts.SnapshotRetention <= 0 {
		opts.SnapshotRetention = DefaultSnapshotRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IndexTenants == 0 {
		opts.IndexTenants = DefaultIndexTenants
	}
	s := &Service{store: store, opts: opts}
	if opts.IndexTenants > 0 {
		s.index = newIndexCache(store, opts.Embedder, opts.IndexTenants)
	}
	return s
}

// Store is the store the service writes to.
func (s *Service) Store() Store { return s.store }

func (s *Service) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }

func (s *Service) notBefore(now time.Time) time.Time {
	if s.opts.TTL <= 0 {
		return time.Time{}
	}
	return now.Add(-s.opts.TTL)
}

// PutRequest is a source document version to index.
type PutRequest struct {
	DocumentID    string          `json:"document_id"`
	SourceURI     string          `json:"source_uri"`
	SourceVersion string          `json:"source_version"`
	Content       string          `json:"content"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	ACL           []string        `json:"acl"`
}

// ValidID checks a document or snapshot id.
func ValidID(id string) error {
	if id == "" || len(id) > 256 || !utf8.ValidString(id) || strings.ContainsAny(id, "\x00/") || id == "." || id == ".." {
		return fmt.Errorf("%w: an id is 1 to 256 bytes of UTF-8 without NUL or '/', and not . or ..", ErrInvalidInput)
	}
	return nil
}

// Put indexes a document version. It reports created (the document was
// new); an unchanged document (same content, source version, metadata and
// ACL) only has its IndexedAt refreshed and keeps its version.
func (s *Service) Put(ctx context.Context, tenantID string, r PutRequest) (Document, bool, error) {
	if tenantID == "" {
		return Document{}, false, fmt.Errorf("%w: tenant is required", ErrInvalidInput)
	}
	if err := ValidID(r.DocumentID); err != nil {
		return Document{}, false, err
	}
	acl, err := NormalizeACL(r.ACL)
	if err != nil {
		return Document{}, false, err
	}
	switch {
	case len(r.Content) > MaxContentBytes:
		return Document{}, false, fmt.Errorf("%w: content is over %d bytes", ErrInvalidInput, MaxContentBytes)
	case !jsoncheck.Keepable(r.Content) || !jsoncheck.Keepable(r.SourceURI) || !jsoncheck.Keepable(r.SourceVersion):
		return Document{}, false, fmt.Errorf("%w: content, source_uri and source_version must be UTF-8 without NUL", ErrInvalidInput)
	case len(r.SourceURI) > 2048 || len(r.SourceVersion) > 256:
		return Document{}, false, fmt.Errorf("%w: source_uri is at most 2048 bytes, source_version 256", ErrInvalidInput)
	}
	meta, err := normalizeMetadata(r.Metadata)
	if err != nil {
		return Document{}, false, err
	}
	// Every hit names its source and version (DESIGN rule 8). A document
	// sent without them has Memento as its source: its own URL, and the
	// digest of its content, which changes exactly when the content does.
	if r.SourceURI == "" {
		r.SourceURI = "/v1/documents/" + url.PathEscape(r.DocumentID)
	}
	if r.SourceVersion == "" {
		r.SourceVersion = Digest(r.Content)[:len("sha256:")+16]
	}
	for range putRetries {
		d, created, err := s.put(ctx, tenantID, r, acl, meta)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return d, created, err
	}
	return Document{}, false, fmt.Errorf("put document %s: %w", r.DocumentID, ErrConflict)
}

func normalizeMetadata(m json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(m)) == 0 || string(bytes.TrimSpace(m)) == "null" {
		return nil, nil
	}
	if err := jsoncheck.Check(m, jsoncheck.MaxDepth); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrInvalidInput, err)
	}
	// Numbers stay as sent: decoded as float64, an id like
	// 9007199254740993 would come back as ...992.
	d := json.NewDecoder(bytes.NewReader(m))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil || v == nil || d.More() {
		return nil, fmt.Errorf("%w: metadata must be a JSON object", ErrInvalidInput)
	}
	out, err := json.Marshal(v) // canonical: sorted keys, so equal metadata compares equal
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrInvalidInput, err)
	}
	if len(out) > 64<<10 {
		return nil, fmt.Errorf("%w: metadata is over 64 KiB", ErrInvalidInput)
	}
	return out, nil
}

func (s *Service) put(ctx context.Context, tenantID string, r PutRequest, acl []string, meta json.RawMessage) (Document, bool, error) {
	now := s.now()
	old, err := s.store.GetDocument(ctx, tenantID, r.DocumentID)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Document{}, false, fmt.Errorf("read document %s: %w", r.DocumentID, err)
	}
	sameContent := exists && old.Content == r.Content && old.SourceVersion == r.SourceVersion &&
		old.SourceURI == r.SourceURI && bytes.Equal(old.Metadata, meta)
	sameACL := exists && slices.Equal(old.ACL, acl)
	if sameContent && sameACL {
		if err := s.store.TouchDocument(ctx, tenantID, r.DocumentID, old.Version, now); err != nil {
			return Document{}, false, fmt.Errorf("refresh document %s: %w", r.DocumentID, err)
		}
		old.IndexedAt = now
		return old, false, nil
	}
	d := Document{TenantID: tenantID, DocumentID: r.DocumentID, SourceURI: r.SourceURI, SourceVersion: r.SourceVersion,
		Content: r.Content, Metadata: meta, ACL: acl, Version: 1, UpdatedAt: now, IndexedAt: now}
	p := PutParams{}
	if !exists {
		// Put again after a delete, it goes on from the deleted version:
		// a version (and a chunk id) names one content only.
		last, err := s.store.DeletedVersion(ctx, tenantID, r.DocumentID)
		if err != nil {
			return Document{}, false, err
		}
		d.Version = last + 1
	}
	if exists {
		d.Version = old.Version + 1
		p.ExpectedVersion = old.Version
		kind := DocumentReplaced
		if sameContent {
			kind = ACLChanged
		}
		p.Event = &Invalidation{TenantID: tenantID, Kind: kind, DocumentID: d.DocumentID, OldVersion: old.Version, NewVersion: d.Version, At: now}
	}
	chunks, err := Chunks(d, s.opts.ChunkTokens, s.opts.OverlapTokens)
	if err != nil {
		return Document{}, false, fmt.Errorf("chunk document %s: %w", d.DocumentID, err)
	}
	d.Chunks = len(chunks)
	p.Document, p.Chunks = d, chunks
	// Vectors are written even by an instance that keeps no index: another may.
	if s.opts.Embedder != nil && len(chunks) > 0 {
		if p.Vectors, err = s.embed(ctx, chunks, acl); err != nil {
			return Document{}, false, err
		}
	}
	if _, _, err := s.store.PutDocument(ctx, p); err != nil {
		return Document{}, false, fmt.Errorf("store document %s: %w", d.DocumentID, err)
	}
	return d, !exists, nil
}

// embed computes the vectors of a document version's chunks.
func (s *Service) embed(ctx context.Context, chunks []Chunk, acl []string) ([]Vector, error) {
	texts := make([]string, len(chunks))
	for i, ch := range chunks {
		texts[i] = ch.Text
	}
	vs, err := s.opts.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed %d chunks: %w", len(chunks), err)
	}
	if len(vs) != len(chunks) {
		return nil, fmt.Errorf("embed %d chunks: the embedder returned %d vectors", len(chunks), len(vs))
	}
	out := make([]Vector, len(chunks))
	for i, ch := range chunks {
		out[i] = Vector{ChunkID: ch.ChunkID, DocumentID: ch.DocumentID, Model: s.opts.Embedder.Model(), Values: vs[i], ACL: acl}
	}
	return out, nil
}

// Get returns the current version of a document.
func (s *Service) Get(ctx context.Context, tenantID, documentID string) (Document, error) {
	if err := ValidID(documentID); err != nil {
		return Document{}, err
	}
	d, err := s.store.GetDocument(ctx, tenantID, documentID)
	if err != nil {
		return Document{}, fmt.Errorf("get document %s: %w", documentID, err)
	}
	return d, nil
}

// Delete removes a document and every projection row of it, recording a
// DocumentDeleted invalidation.
func (s *Service) Delete(ctx context.Context, tenantID, documentID string) (Invalidation, error) {
	if err := ValidID(documentID); err != nil {
		return Invalidation{}, err
	}
	ev, err := s.store.DeleteDocument(ctx, tenantID, documentID,
		Invalidation{TenantID: tenantID, Kind: DocumentDeleted, DocumentID: documentID, At: s.now()})
	if err != nil {
		return Invalidation{}, fmt.Errorf("delete document %s: %w", documentID, err)
	}
	return ev, nil
}

// SetMember adds principal to group (member true) or removes it. The next
// retrieval, on any instance, resolves groups again: the change holds at
// once. It reports whether membership changed.
func (s *Service) SetMember(ctx context.Context, tenantID, group, principal string, member bool) (bool, error) {
	if err := ValidGroup(group); err != nil {
		return false, err
	}
	if err := ValidPrincipal(principal); err != nil {
		return false, err
	}
	change := "removed"
	if member {
		change = "added"
	}
	ok, err := s.store.SetMember(ctx, tenantID, group, principal, member,
		Invalidation{TenantID: tenantID, Kind: MembershipChanged, Group: group, Principal: principal, Change: change, At: s.now()})
	if err != nil {
		return false, fmt.Errorf("set membership of %s in %s: %w", principal, group, err)
	}
	return ok, nil
}

// Groups lists principal's groups.
func (s *Service) Groups(ctx context.Context, tenantID, principal string) ([]string, error) {
	if err := ValidPrincipal(principal); err != nil {
		return nil, err
	}
	return s.store.Groups(ctx, tenantID, principal)
}

// RetrieveRequest is one retrieval.
type RetrieveRequest struct {
	Query     string `json:"query"`
	Principal string `json:"principal"`
	K         int    `json:"k,omitempty"`
}

// QueryDigest is the digest a snapshot carries of what was asked.
func QueryDigest(r RetrieveRequest) string {
	b, _ := json.Marshal(struct {
		Q string `json:"query"`
		P string `json:"principal"`
		K int    `json:"k"`
	}{r.Query, r.Principal, r.K})
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Retrieve ranks the chunks r.Principal may read by hybrid search (full
// text and vectors in the in-process index, fused by reciprocal rank; or
// full text in the store when the Service keeps no index), with the ACL
// applied before ranking; re-checks the best hits against the store as
// their texts are read (only theirs); and stores the answer as a snapshot.
func (s *Service) Retrieve(ctx context.Context, tenantID string, r RetrieveRequest) (Snapshot, error) {
	if tenantID == "" {
		return Snapshot{}, fmt.Errorf("%w: tenant is required", ErrInvalidInput)
	}
	if err := ValidPrincipal(r.Principal); err != nil {
		return Snapshot{}, err
	}
	if strings.TrimSpace(r.Query) == "" || len(r.Query) > MaxQueryBytes || !utf8.ValidString(r.Query) {
		return Snapshot{}, fmt.Errorf("%w: a query is 1 to %d bytes of UTF-8", ErrInvalidInput, MaxQueryBytes)
	}
	if r.K == 0 {
		r.K = DefaultK
	}
	if r.K < 0 || r.K > MaxK {
		return Snapshot{}, fmt.Errorf("%w: k must be within [1, %d]", ErrInvalidInput, MaxK)
	}
	now := s.now()
	nb := s.notBefore(now)
	version, err := s.store.IndexVersion(ctx, tenantID)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read index version: %w", err)
	}
	rank, err := s.ranker(ctx, tenantID, r, version, nb)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{TenantID: tenantID, SnapshotID: "snap_" + uuid.NewString(), QueryDigest: QueryDigest(r),
		IndexVersion: version, Principal: r.Principal, K: r.K, CreatedAt: now, Hits: []Hit{}}
	// The best pool candidates are re-checked; when too few pass (expired
	// under a TTL, or changed since the ranking) and a list was cut at the
	// pool, the ranking widens, four times at a step, up to 16 pools.
	pool := max(4*r.K, 50)
	checked := map[string]bool{}
	for n := pool; ; n *= 4 {
		lists, err := rank(n)
		if err != nil {
			return Snapshot{}, err
		}
		cut := false
		for _, l := range lists {
			cut = cut || len(l) >= n
		}
		var weights []float64
		if len(lists) == 2 && search.IsLexical(s.opts.Embedder) {
			weights = []float64{1, search.LexicalVectorWeight}
		}
		fused := search.RRF(0, weights, lists...)
		var cands []search.Fused
		for _, f := range fused[:min(len(fused), n)] {
			if !checked[f.ID] {
				checked[f.ID] = true
				cands = append(cands, f)
			}
		}
		if snap.Hits, err = s.recheck(ctx, tenantID, r.Principal, nb, now, cands, r.K, snap.Hits); err != nil {
			return Snapshot{}, err
		}
		if len(snap.Hits) == r.K || !cut || n >= 16*pool {
			break
		}
	}
	if err := s.store.PutSnapshot(ctx, snap); err != nil {
		return Snapshot{}, fmt.Errorf("store snapshot: %w", err)
	}
	return snap, nil
}

// ranker resolves what a retrieval ranks by (the principal's groups, the
// query's terms and vector) once, and returns the ranking of the best n
// per list: in the in-process index, or full text in the store.
func (s *Service) ranker(ctx context.Context, tenantID string, r RetrieveRequest, version int64, nb time.Time) (func(n int) ([][]search.Ranked, error), error) {
	if s.index == nil {
		return func(n int) ([][]search.Ranked, error) {
			text, err := s.store.SearchText(ctx, TextQuery{TenantID: tenantID, Principal: r.Principal, Terms: search.Terms(r.Query), Limit: n, NotBefore: nb})
			if err != nil {
				return nil, fmt.Errorf("search text: %w", err)
			}
			return [][]search.Ranked{toRanked(text)}, nil
		}, nil
	}
	// Groups are read now, from the store: a membership change holds for
	// the very next retrieval, on every instance.
	groups, err := s.store.Groups(ctx, tenantID, r.Principal)
	if err != nil {
		return nil, fmt.Errorf("resolve groups: %w", err)
	}
	entries, terms := Entries(r.Principal, groups), search.Analyze(r.Query)
	var qv []float32
	if s.opts.Embedder != nil {
		vs, err := s.opts.Embedder.Embed(ctx, []string{r.Query})
		if err != nil {
			return nil, fmt.Errorf("embed query: %w", err)
		}
		if len(vs) != 1 || len(vs[0]) == 0 {
			return nil, fmt.Errorf("embed query: the embedder returned %d vectors, not one", len(vs))
		}
		qv = vs[0]
	}
	return func(n int) ([][]search.Ranked, error) {
		text, vec, err := s.index.search(ctx, tenantID, version, entries, terms, qv, n)
		if err != nil {
			return nil, err
		}
		if qv == nil {
			return [][]search.Ranked{text}, nil
		}
		return [][]search.Ranked{text, vec}, nil
	}, nil
}

// recheck is the re-check: ACL, TTL and existence again, in the store, as
// the texts are read, best candidate first and only as many as still
// needed for k hits (the batch doubles when some fail). A candidate that
// fails it is dropped, never shown. It returns hits with the passing ones
// appended.
func (s *Service) recheck(ctx context.Context, tenantID, principal string, nb, now time.Time, cands []search.Fused, k int, hits []Hit) ([]Hit, error) {
	for next, batch := 0, k-len(hits); next < len(cands) && len(hits) < k; batch *= 2 {
		part := cands[next:min(len(cands), next+batch)]
		next += len(part)
		ids := make([]string, len(part))
		for i, f := range part {
			ids[i] = f.ID
		}
		chunks, err := s.store.ReadableChunks(ctx, tenantID, principal, ids, nb)
		if err != nil {
			return nil, fmt.Errorf("read chunks: %w", err)
		}
		byID := make(map[string]Chunk, len(chunks))
		for _, c := range chunks {
			byID[c.ChunkID] = c
		}
		for _, f := range part {
			c, ok := byID[f.ID]
			if !ok {
				continue
			}
			hits = append(hits, Hit{DocumentID: c.DocumentID, SourceURI: c.SourceURI, SourceVersion: c.SourceVersion,
				Version: c.Version, ChunkID: c.ChunkID, ContentDigest: c.Digest, RetrievedAt: now, Score: f.Score, Text: c.Text})
			if len(hits) == k {
				break
			}
		}
	}
	return hits, nil
}

func toRanked(ss []Scored) []search.Ranked {
	out := make([]search.Ranked, len(ss))
	for i, s := range ss {
		out[i] = search.Ranked{ID: s.ChunkID, Score: s.Score}
	}
	return out
}

// Snapshot returns a stored snapshot exactly as it was answered.
func (s *Service) Snapshot(ctx context.Context, tenantID, snapshotID string) (Snapshot, error) {
	if err := ValidID(snapshotID); err != nil {
		return Snapshot{}, err
	}
	snap, err := s.store.GetSnapshot(ctx, tenantID, snapshotID)
	if err != nil {
		return Snapshot{}, fmt.Errorf("get snapshot %s: %w", snapshotID, err)
	}
	return snap, nil
}

// PurgeBatch is how many snapshots a store's purge deletes per
// transaction: a backlog goes in bounded steps (see InBatches).
const PurgeBatch = 1000

// InBatches runs batch until it deletes fewer than PurgeBatch, and returns
// the total: the loop of a store's PurgeSnapshots over its batches.
func InBatches(batch func() (int, error)) (int, error) {
	total := 0
	for {
		n, err := batch()
		total += n
		if err != nil || n < PurgeBatch {
			return total, err
		}
	}
}

// PurgeSnapshots deletes the tenant's snapshots (every tenant's for "")
// older than the retention and the texts only they referenced.
func (s *Service) PurgeSnapshots(ctx context.Context, tenantID string) (int, error) {
	n, err := s.store.PurgeSnapshots(ctx, tenantID, s.now().Add(-s.opts.SnapshotRetention))
	if err != nil {
		return 0, fmt.Errorf("purge snapshots: %w", err)
	}
	return n, nil
}

// PurgeSnapshotsEvery purges every tenant's snapshots past the retention
// now and then every interval (an hour when <= 0) until ctx ends, telling
// report each pass's count or error. Several instances may run it: a pass
// deletes what another already did not.
func (s *Service) PurgeSnapshotsEvery(ctx context.Context, interval time.Duration, report func(purged int, err error)) {
	periodic.Run(ctx, interval, func(ctx context.Context) (int, error) { return s.PurgeSnapshots(ctx, "") }, report)
}

// Invalidations lists the tenant's invalidation events after the index
// version after, at most limit (1 to 1000, default 100).
func (s *Service) Invalidations(ctx context.Context, tenantID string, after int64, limit int) ([]Invalidation, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit must be within 1 and 1000", ErrInvalidInput)
	}
	if after < 0 {
		return nil, fmt.Errorf("%w: the cursor must not be negative", ErrInvalidInput)
	}
	out, err := s.store.Invalidations(ctx, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list invalidations: %w", err)
	}
	return out, nil
}
