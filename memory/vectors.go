package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mementohq/memento/search"
)

// exactVectorLimit is where a subject's vectors move from the exact scan to
// the approximate graph. It is far above search.DefaultExactLimit, the
// query-time crossover, because the graph is built on the search that
// crosses the limit: at 100k vectors of 256 dimensions that build took
// minutes (bench memory), while the exact scan stays near 13 ms.
const exactVectorLimit = 200_000

// reembedBatch bounds how many claims one search re-embeds after a model
// change; the rest follow on later searches (or `memento memory reembed`).
const reembedBatch = 256

// vectorCache holds, per subject, an in-process vector index rebuilt from
// the store's vector rows and kept current by the subject version: a search
// reads the version (one indexed row), fetches only rows written since, and
// re-checks every hit against the store, so an instance never serves a
// claim another instance superseded, invalidated or forgot.
type vectorCache struct {
	store    Store
	embedder Embedder
	entries  *lru.Cache[subjectKey, *vectorEntry]
}

type subjectKey struct{ tenant, subject string }

type vectorEntry struct {
	key     subjectKey
	mu      sync.Mutex // held while syncing or searching this subject
	version int64
	index   *search.VectorIndex
}

func newVectorCache(store Store, e Embedder, size int) *vectorCache {
	c, _ := lru.New[subjectKey, *vectorEntry](size) // errors only for size <= 0
	return &vectorCache{store: store, embedder: e, entries: c}
}

// entry returns the subject's entry; dim sizes a new one's index (an
// embedder may learn its dimension from its first answer).
func (vc *vectorCache) entry(tenant, subject string, dim int) *vectorEntry {
	k := subjectKey{tenant, subject}
	if e, ok := vc.entries.Get(k); ok {
		return e
	}
	e := &vectorEntry{key: k, index: search.NewVectorIndexWith(dim, search.Options{ExactLimit: exactVectorLimit})}
	if prev, ok, _ := vc.entries.PeekOrAdd(k, e); ok {
		return prev // another search made it first
	}
	return e
}

func (vc *vectorCache) drop(tenant, subject string) { vc.entries.Remove(subjectKey{tenant, subject}) }

func (vc *vectorCache) remove(tenant, subject, memoryID string) {
	if e, ok := vc.entries.Peek(subjectKey{tenant, subject}); ok {
		e.mu.Lock()
		e.index.Remove(memoryID)
		e.mu.Unlock()
	}
}

// embed computes a claim's vector under the cache's model.
func (vc *vectorCache) embed(ctx context.Context, c Claim) (*Vector, error) {
	vs, err := vc.embedder.Embed(ctx, []string{c.Text})
	if err != nil {
		return nil, fmt.Errorf("embed claim text: %w", err)
	}
	if len(vs) != 1 || len(vs[0]) == 0 || (vc.embedder.Dim() > 0 && len(vs[0]) != vc.embedder.Dim()) {
		return nil, fmt.Errorf("embed claim text: the embedder did not return one vector of %d dimensions", vc.embedder.Dim())
	}
	return &Vector{MemoryID: c.MemoryID, Namespace: c.Namespace, Model: vc.embedder.Model(), Values: vs[0], ExpiresAt: c.ExpiresAt}, nil
}

// search returns the subject's nearest claims to query, filtered by
// namespace and expiry before ranking.
func (vc *vectorCache) search(ctx context.Context, tenant, subject, namespace, query string, k int, now time.Time) ([]search.Ranked, error) {
	qv, err := vc.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(qv) != 1 || len(qv[0]) == 0 {
		return nil, fmt.Errorf("embed query: the embedder returned %d vectors, not one", len(qv))
	}
	e := vc.entry(tenant, subject, len(qv[0]))
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := vc.sync(ctx, e); err != nil {
		return nil, err
	}
	nowUS := now.UnixMicro()
	hits := e.index.Search(qv[0], k, func(_ string, m search.Meta) bool {
		return (namespace == "" || m.Namespace == namespace) && (m.ExpiresAt == 0 || m.ExpiresAt > nowUS)
	})
	// A vector at or below zero similarity shares nothing with the query:
	// it would only pad the list.
	for i, h := range hits {
		if h.Score <= 0 {
			return hits[:i], nil
		}
	}
	return hits, nil
}

// sync brings e up to the subject's version, re-embedding claims that have
// no vector under the current model (a model change) a batch at a time.
func (vc *vectorCache) sync(ctx context.Context, e *vectorEntry) error {
	v, err := vc.store.SubjectVersion(ctx, e.key.tenant, e.key.subject)
	if err != nil {
		return fmt.Errorf("read subject version: %w", err)
	}
	if v <= e.version {
		return nil
	}
	missing, err := vc.store.MissingVectors(ctx, e.key.tenant, e.key.subject, vc.embedder.Model(), reembedBatch)
	if err != nil {
		return fmt.Errorf("find claims to re-embed: %w", err)
	}
	if len(missing) > 0 {
		texts := make([]string, len(missing))
		for i, c := range missing {
			texts[i] = c.Text
		}
		vs, err := vc.embedder.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-embed %d claims: %w", len(missing), err)
		}
		if len(vs) != len(missing) {
			return fmt.Errorf("re-embed %d claims: the embedder returned %d vectors", len(missing), len(vs))
		}
		rows := make([]Vector, len(missing))
		for i, c := range missing {
			rows[i] = Vector{MemoryID: c.MemoryID, Namespace: c.Namespace, Model: vc.embedder.Model(), Values: vs[i], ExpiresAt: c.ExpiresAt}
		}
		if err := vc.store.PutVectors(ctx, e.key.tenant, e.key.subject, rows); err != nil {
			return fmt.Errorf("store re-embedded vectors: %w", err)
		}
	}
	rows, at, err := vc.store.Vectors(ctx, e.key.tenant, e.key.subject, vc.embedder.Model(), e.version)
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	for _, r := range rows {
		m := search.Meta{Namespace: r.Namespace}
		if r.ExpiresAt != nil {
			m.ExpiresAt = r.ExpiresAt.UnixMicro()
		}
		e.index.Upsert(r.MemoryID, r.Values, m)
	}
	e.version = at
	return nil
}
