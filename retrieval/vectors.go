package retrieval

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/search"
)

// vectorCache holds, per tenant, an in-process vector index rebuilt from
// the store's vector rows and kept current by the tenant's index version: a
// search reads the version (one row), fetches only the rows and
// invalidations written since, filters by ACL before it ranks, and every
// hit is re-checked against the store afterwards, so an instance never
// serves a chunk another instance replaced, deleted or re-permissioned.
type vectorCache struct {
	store    Store
	embedder llm.Embedder
	max      int

	mu      sync.Mutex
	entries map[string]*list.Element
	lru     *list.List
}

type vectorEntry struct {
	tenant  string
	mu      sync.Mutex // held while syncing or searching this tenant
	version int64
	index   *search.VectorIndex
	acl     map[string][]string // chunk id -> its document's ACL
	byDoc   map[string][]string // document id -> its chunk ids in the index
}

func newVectorCache(store Store, e llm.Embedder, max int) *vectorCache {
	return &vectorCache{store: store, embedder: e, max: max, entries: map[string]*list.Element{}, lru: list.New()}
}

func (vc *vectorCache) entry(tenant string, dim int) *vectorEntry {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if el, ok := vc.entries[tenant]; ok {
		vc.lru.MoveToFront(el)
		return el.Value.(*vectorEntry)
	}
	e := &vectorEntry{tenant: tenant, index: search.NewVectorIndex(dim), acl: map[string][]string{}, byDoc: map[string][]string{}}
	vc.entries[tenant] = vc.lru.PushFront(e)
	for vc.lru.Len() > vc.max {
		old := vc.lru.Back()
		vc.lru.Remove(old)
		delete(vc.entries, old.Value.(*vectorEntry).tenant)
	}
	return e
}

// embed computes the vectors of a document version's chunks.
func (vc *vectorCache) embed(ctx context.Context, chunks []Chunk, acl []string) ([]Vector, error) {
	texts := make([]string, len(chunks))
	for i, c := range chunks {
		texts[i] = c.Text
	}
	vs, err := vc.embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed %d chunks: %w", len(chunks), err)
	}
	if len(vs) != len(chunks) {
		return nil, fmt.Errorf("embed %d chunks: the embedder returned %d vectors", len(chunks), len(vs))
	}
	out := make([]Vector, len(chunks))
	for i, c := range chunks {
		out[i] = Vector{ChunkID: c.ChunkID, DocumentID: c.DocumentID, Model: vc.embedder.Model(), Values: vs[i], ACL: acl}
	}
	return out, nil
}

// search returns the nearest chunks to query among those whose ACL grants
// one of entries; the filter runs inside the scan, before ranking.
func (vc *vectorCache) search(ctx context.Context, tenant string, entries []string, query string, k int) ([]search.Ranked, error) {
	qv, err := vc.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(qv) != 1 || len(qv[0]) == 0 {
		return nil, fmt.Errorf("embed query: the embedder returned %d vectors, not one", len(qv))
	}
	e := vc.entry(tenant, len(qv[0]))
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := vc.sync(ctx, e); err != nil {
		return nil, err
	}
	hits := e.index.Search(qv[0], k, func(id string, _ search.Meta) bool { return Readable(e.acl[id], entries) })
	for i, h := range hits {
		if h.Score <= 0 { // shares nothing with the query: it would only pad the list
			return hits[:i], nil
		}
	}
	return hits, nil
}

func (vc *vectorCache) sync(ctx context.Context, e *vectorEntry) error {
	v, err := vc.store.IndexVersion(ctx, e.tenant)
	if err != nil {
		return fmt.Errorf("read index version: %w", err)
	}
	if v <= e.version {
		return nil
	}
	rows, invs, at, err := vc.store.Vectors(ctx, e.tenant, vc.embedder.Model(), e.version)
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	for _, inv := range invs {
		for _, id := range e.byDoc[inv.DocumentID] {
			e.index.Remove(id)
			delete(e.acl, id)
		}
		delete(e.byDoc, inv.DocumentID)
	}
	for _, r := range rows {
		if len(r.Values) != e.index.Dim() {
			continue // another model's dimension: re-embedding is not done here
		}
		e.index.Upsert(r.ChunkID, r.Values, search.Meta{})
		if _, ok := e.acl[r.ChunkID]; !ok {
			e.byDoc[r.DocumentID] = append(e.byDoc[r.DocumentID], r.ChunkID)
		}
		e.acl[r.ChunkID] = r.ACL
	}
	e.version = at
	return nil
}
