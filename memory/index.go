package memory

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mementohq/memento/search"
)

// ApproximateVectorLimit is the subject size (vectors) past which the
// vector ranking of a search scans 1-bit codes of the subject's vectors and
// re-scores the best search.DefaultRerank of them exactly, instead of
// scanning every float (search.Options.QuantizeLimit): at one subject of
// 100k vectors of 256 dimensions the float scan cost 4-5 ms of CPU and the
// coded one 1.5-1.9 ms, recall@10 against the float scan 1.00 on the bench
// memory corpus and on clustered vectors, 0.90 on random unit vectors
// (BenchmarkQuantRecall). The codes are kept up to date on every upsert
// (a rotation and a sign per coordinate, microseconds), so there is no
// build to wait for. The HNSW graph of search stays off here: its build
// at 100k vectors took minutes, and its recall on random vectors fell to
// 0.5 at 50k.
const ApproximateVectorLimit = search.DefaultQuantizeLimit

// reembedBatch bounds how many claims one search re-embeds after a model
// change; the rest follow on later searches (or `memento memory reembed`).
const reembedBatch = 256

// maxIndexedClaims bounds the claims the subject indexes of one service
// hold, beside their count bound: least recently searched subjects go
// first. A claim costs about 1 KiB with a 256-dimension vector.
const maxIndexedClaims = 1_000_000

// subjectCache holds, per subject, in-process full-text (BM25) and vector
// indexes of the subject's current claims, kept equal to the store by the
// subject version: a search reads what changed since the version an entry
// holds (Store.Changes, one statement, nearly empty when nothing changed),
// applies it, ranks in process, and re-checks every hit against the store,
// so an instance never serves a claim another instance superseded,
// invalidated or forgot, and the store never ranks a large subject's
// matches itself: the store's full-text query over one subject of 100k
// claims took 130-350 ms (SQLite) and 0.8-2.7 s (PostgreSQL) at p95 in
// bench memory, the in-process BM25 under a millisecond.
type subjectCache struct {
	store    Store
	embedder Embedder // nil: full text only
	entries  *lru.Cache[subjectKey, *subjectEntry]
	claims   atomic.Int64 // indexed claims over the cached entries, as last accounted
	budget   int64
}

type subjectKey struct{ tenant, subject string }

type subjectEntry struct {
	key     subjectKey
	mu      sync.Mutex // held while syncing or searching this subject
	version int64
	text    *search.TextIndex
	vecs    *search.VectorIndex // nil until the dimension is known, or without an embedder
	// missing holds current claims with no vector under the embedder's
	// model (written by an instance with another model, or none).
	missing map[string]ClaimChange
	size    atomic.Int64 // claims accounted to the cache for this entry
}

func newSubjectCache(store Store, e Embedder, size int) *subjectCache {
	sc := &subjectCache{store: store, embedder: e, budget: maxIndexedClaims}
	sc.entries, _ = lru.NewWithEvict(size, func(_ subjectKey, e *subjectEntry) { // errors only for size <= 0
		sc.claims.Add(-e.size.Swap(0))
	})
	return sc
}

// account records e's size after a sync (the caller holds e.mu) and
// evicts least recently used subjects while the cache is over its budget;
// e itself stays, however large.
func (sc *subjectCache) account(e *subjectEntry) {
	if cur, ok := sc.entries.Peek(e.key); !ok || cur != e {
		return // evicted or dropped meanwhile: its search still completes
	}
	n := int64(e.text.Len())
	sc.claims.Add(n - e.size.Swap(n))
	for sc.claims.Load() > sc.budget {
		k, _, ok := sc.entries.GetOldest()
		if !ok || k == e.key {
			return
		}
		sc.entries.Remove(k)
	}
}

func newSubjectEntry(k subjectKey) *subjectEntry {
	return &subjectEntry{key: k, text: search.NewTextIndex(), missing: map[string]ClaimChange{}}
}

func (sc *subjectCache) entry(tenant, subject string) *subjectEntry {
	k := subjectKey{tenant, subject}
	if e, ok := sc.entries.Get(k); ok {
		return e
	}
	e := newSubjectEntry(k)
	if prev, ok, _ := sc.entries.PeekOrAdd(k, e); ok {
		return prev // another search made it first
	}
	return e
}

func (sc *subjectCache) drop(tenant, subject string) { sc.entries.Remove(subjectKey{tenant, subject}) }

func (sc *subjectCache) remove(tenant, subject, memoryID string) {
	if e, ok := sc.entries.Peek(subjectKey{tenant, subject}); ok {
		e.mu.Lock()
		e.forget(memoryID)
		e.mu.Unlock()
	}
}

func (e *subjectEntry) forget(memoryID string) {
	e.text.Remove(memoryID)
	if e.vecs != nil {
		e.vecs.Remove(memoryID)
	}
	delete(e.missing, memoryID)
}

func (sc *subjectCache) model() string {
	if sc.embedder == nil {
		return ""
	}
	return sc.embedder.Model()
}

// embed computes a claim's vector under the cache's model.
func (sc *subjectCache) embed(ctx context.Context, c Claim) (*Vector, error) {
	vs, err := sc.embedder.Embed(ctx, []string{c.Text})
	if err != nil {
		return nil, fmt.Errorf("embed claim text: %w", err)
	}
	if len(vs) != 1 || len(vs[0]) == 0 || (sc.embedder.Dim() > 0 && len(vs[0]) != sc.embedder.Dim()) {
		return nil, fmt.Errorf("embed claim text: the embedder did not return one vector of %d dimensions", sc.embedder.Dim())
	}
	return &Vector{MemoryID: c.MemoryID, Namespace: c.Namespace, Model: sc.embedder.Model(), Values: vs[0], ExpiresAt: c.ExpiresAt}, nil
}

// embedQuery is the query's vector.
func (sc *subjectCache) embedQuery(ctx context.Context, query string) ([]float32, error) {
	qv, err := sc.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(qv) != 1 || len(qv[0]) == 0 {
		return nil, fmt.Errorf("embed query: the embedder returned %d vectors, not one", len(qv))
	}
	return qv[0], nil
}

// rank syncs the subject's entry and ranks n candidates by full text
// (unless mode is vector) and by vectors (unless mode is full text; qv is
// the query's vector), filtered by namespace and expiry before ranking.
func (sc *subjectCache) rank(ctx context.Context, e *subjectEntry, q SearchQuery, qv []float32, mode string, n int, now time.Time) (text, vecs []search.Ranked, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := sc.sync(ctx, e); err != nil {
		return nil, nil, err
	}
	text, vecs = e.rank(q, qv, mode, n, now)
	return text, vecs, nil
}

// rankAndGet is rank, fusion and the store's rows of the fused candidates,
// for a store that reads changes and rows in one round trip: it ranks
// in the entry as it stands, reads what changed since and the candidates'
// rows together, and only when the subject moved applies the changes and
// ranks, fuses and reads again. ok is false when the store cannot, or the
// entry was never synced; the caller then ranks and re-checks in two steps.
func (sc *subjectCache) rankAndGet(ctx context.Context, e *subjectEntry, q SearchQuery, qv []float32, mode string, n int, now time.Time, fuse func(text, vecs []search.Ranked) []search.Fused) (fused []search.Fused, claims []Claim, ok bool, err error) {
	cg, can := sc.store.(ChangesGetter)
	if !can {
		return nil, nil, false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.version == 0 {
		return nil, nil, false, nil
	}
	fused = fuse(e.rank(q, qv, mode, n, now))
	ch, claims, err := cg.ChangesAndGet(ctx, e.key.tenant, e.key.subject, sc.model(), e.version, fusedIDs(fused))
	if err != nil {
		return nil, nil, true, fmt.Errorf("read changes of subject %s and re-check its hits: %w", e.key.subject, err)
	}
	if ch.Version == e.version && len(ch.Claims) == 0 && len(ch.Vectors) == 0 && ch.Forgotten <= e.version {
		return fused, claims, true, nil
	}
	if err := sc.apply(ctx, e, ch); err != nil {
		return nil, nil, true, err
	}
	fused = fuse(e.rank(q, qv, mode, n, now))
	if claims, err = sc.store.GetMany(ctx, e.key.tenant, fusedIDs(fused)); err != nil {
		return nil, nil, true, fmt.Errorf("re-check search hits: %w", err)
	}
	return fused, claims, true, nil
}

func fusedIDs(fs []search.Fused) []string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
	}
	return ids
}

// rank ranks e's claims as e stands; the caller holds e.mu.
func (e *subjectEntry) rank(q SearchQuery, qv []float32, mode string, n int, now time.Time) (text, vecs []search.Ranked) {
	nowUS := now.UnixMicro()
	keep := func(_ string, m search.Meta) bool {
		return (q.Namespace == "" || m.Namespace == q.Namespace) && (m.ExpiresAt == 0 || m.ExpiresAt > nowUS)
	}
	if mode != ModeVector {
		text = e.text.SearchWith(q.Query, n, keep)
	}
	if mode != ModeFulltext && e.vecs != nil {
		vecs = e.vecs.Search(qv, n, keep)
		// A vector at or below zero similarity shares nothing with the
		// query: it would only pad the list.
		for i, h := range vecs {
			if h.Score <= 0 {
				vecs = vecs[:i]
				break
			}
		}
	}
	return text, vecs
}

func metaOf(namespace string, expires *time.Time) search.Meta {
	m := search.Meta{Namespace: namespace}
	if expires != nil {
		m.ExpiresAt = expires.UnixMicro()
	}
	return m
}

// sync brings e up to the subject's version, re-embedding claims that have
// no vector under the current model (a model change) a batch at a time.
// The caller holds e.mu.
func (sc *subjectCache) sync(ctx context.Context, e *subjectEntry) error {
	ch, err := sc.store.Changes(ctx, e.key.tenant, e.key.subject, sc.model(), e.version)
	if err != nil {
		return fmt.Errorf("read changes of subject %s: %w", e.key.subject, err)
	}
	return sc.apply(ctx, e, ch)
}

// apply brings e up to ch, the subject's changes since e.version (a forget
// since then starts e again from the store). The caller holds e.mu.
func (sc *subjectCache) apply(ctx context.Context, e *subjectEntry, ch Changes) error {
	model := sc.model()
	if ch.Forgotten > e.version && e.version > 0 {
		// A forget deleted rows no change names: start again.
		e.version, e.text, e.vecs, e.missing = 0, search.NewTextIndex(), nil, map[string]ClaimChange{}
		var err error
		if ch, err = sc.store.Changes(ctx, e.key.tenant, e.key.subject, model, 0); err != nil {
			return fmt.Errorf("read changes of subject %s: %w", e.key.subject, err)
		}
	}
	for _, c := range ch.Claims {
		if c.Status != StatusCurrent {
			e.forget(c.MemoryID)
			continue
		}
		e.text.Upsert(c.MemoryID, c.Text, metaOf(c.Namespace, c.ExpiresAt))
		if model != "" && (e.vecs == nil || !e.vecs.Has(c.MemoryID)) {
			e.missing[c.MemoryID] = c
		}
	}
	for _, v := range ch.Vectors {
		e.upsertVector(v)
	}
	e.version = ch.Version
	sc.account(e)
	if model == "" || len(e.missing) == 0 {
		return nil
	}
	return sc.reembed(ctx, e)
}

func (e *subjectEntry) upsertVector(v Vector) {
	if !e.text.Has(v.MemoryID) {
		return // not a current claim as this entry knows it
	}
	if e.vecs == nil {
		// The keep filter of rank is a pure function: the scan may split.
		e.vecs = search.NewVectorIndexWith(len(v.Values), search.Options{ExactLimit: -1, QuantizeLimit: ApproximateVectorLimit, Workers: runtime.GOMAXPROCS(0)})
	}
	e.vecs.Upsert(v.MemoryID, v.Values, metaOf(v.Namespace, v.ExpiresAt))
	if e.vecs.Has(v.MemoryID) {
		delete(e.missing, v.MemoryID)
	}
}

// reembed embeds up to reembedBatch of e's claims that have no vector
// under the model and stores the vectors; the next sync reads them back.
func (sc *subjectCache) reembed(ctx context.Context, e *subjectEntry) error {
	batch := make([]ClaimChange, 0, min(len(e.missing), reembedBatch))
	for _, c := range e.missing {
		batch = append(batch, c)
	}
	slices.SortFunc(batch, func(a, b ClaimChange) int { // oldest write first
		return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.MemoryID, b.MemoryID))
	})
	if len(batch) > reembedBatch {
		batch = batch[:reembedBatch]
	}
	texts := make([]string, len(batch))
	for i, c := range batch {
		texts[i] = c.Text
	}
	vs, err := sc.embedder.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("re-embed %d claims: %w", len(batch), err)
	}
	if len(vs) != len(batch) {
		return fmt.Errorf("re-embed %d claims: the embedder returned %d vectors", len(batch), len(vs))
	}
	rows := make([]Vector, len(batch))
	for i, c := range batch {
		rows[i] = Vector{MemoryID: c.MemoryID, Namespace: c.Namespace, Model: sc.embedder.Model(), Values: vs[i], ExpiresAt: c.ExpiresAt}
	}
	if err := sc.store.PutVectors(ctx, e.key.tenant, e.key.subject, rows); err != nil {
		return fmt.Errorf("store re-embedded vectors: %w", err)
	}
	for _, r := range rows {
		e.upsertVector(r)
	}
	return nil
}
