package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/search"
)

var _ retrieval.Store = (*Retrieval)(nil)

// Retrieval is the retrieval.Store of a Store: a view sharing its mutex and
// clock. It is a type of its own because its method names meet others'.
type Retrieval struct{ s *Store }

// Retrieval returns the retrieval store kept in s.
func (s *Store) Retrieval() *Retrieval {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ret.docs == nil {
		s.ret = retrievalState{
			docs: map[key]retrieval.Document{}, chunks: map[key]retrieval.Chunk{}, chunkAt: map[key]int64{}, vectors: map[key]retrieval.Vector{},
			versions: map[string]int64{}, members: map[string]map[string]map[string]bool{},
			text: map[string]*search.TextIndex{}, snaps: map[key]retrieval.Snapshot{}, texts: map[key]string{},
			invs: map[string][]retrieval.Invalidation{},
		}
	}
	return &Retrieval{s: s}
}

type retrievalState struct {
	docs     map[key]retrieval.Document
	chunks   map[key]retrieval.Chunk // (tenant, chunk id)
	chunkAt  map[key]int64           // (tenant, chunk id) -> the index version that wrote it
	vectors  map[key]retrieval.Vector
	versions map[string]int64                      // tenant -> index version
	members  map[string]map[string]map[string]bool // tenant -> principal -> group
	text     map[string]*search.TextIndex          // tenant -> full text of its chunks
	snaps    map[key]retrieval.Snapshot
	texts    map[key]string // (tenant, digest) -> text kept for snapshots
	invs     map[string][]retrieval.Invalidation
}

func (r *Retrieval) st() *retrievalState { return &r.s.ret }

func cloneDoc(d retrieval.Document) retrieval.Document {
	d.ACL = slices.Clone(d.ACL)
	d.Metadata = cloneJSON(d.Metadata)
	d.UpdatedAt, d.IndexedAt = micro(d.UpdatedAt), micro(d.IndexedAt)
	return d
}

func (r *Retrieval) bump(tenant string) int64 {
	st := r.st()
	st.versions[tenant]++
	return st.versions[tenant]
}

// dropDoc removes every projection row of a document; it returns the count.
func (r *Retrieval) dropDoc(tenant string, d retrieval.Document) int {
	st := r.st()
	n := 0
	for i := range d.Chunks {
		id := retrieval.ChunkID(d.DocumentID, d.Version, i)
		if _, ok := st.chunks[key{tenant, id}]; ok {
			delete(st.chunks, key{tenant, id})
			delete(st.chunkAt, key{tenant, id})
			n++
		}
		if ix := st.text[tenant]; ix != nil && ix.Len() > 0 {
			ix.Remove(id)
		}
		for k := range st.vectors {
			if k.tenant == tenant && k.id == id {
				delete(st.vectors, k)
				n++
			}
		}
	}
	return n
}

// PutDocument implements retrieval.Store.
func (r *Retrieval) PutDocument(_ context.Context, p retrieval.PutParams) (int64, int, error) {
	d := p.Document
	if d.TenantID == "" || d.DocumentID == "" {
		return 0, 0, fmt.Errorf("put document: tenant and document id are required: %w", retrieval.ErrInvalidInput)
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	k := key{d.TenantID, d.DocumentID}
	old, exists := st.docs[k]
	if (exists && old.Version != p.ExpectedVersion) || (!exists && p.ExpectedVersion != 0) {
		return 0, 0, fmt.Errorf("put document %s: %w", d.DocumentID, retrieval.ErrConflict)
	}
	removed := 0
	if exists {
		removed = r.dropDoc(d.TenantID, old)
	}
	v := r.bump(d.TenantID)
	d.Chunks = len(p.Chunks)
	st.docs[k] = cloneDoc(d)
	ix := st.text[d.TenantID]
	if ix == nil {
		ix = search.NewTextIndex()
		st.text[d.TenantID] = ix
	}
	for _, c := range p.Chunks {
		st.chunks[key{d.TenantID, c.ChunkID}] = c
		st.chunkAt[key{d.TenantID, c.ChunkID}] = v
		ix.Add(c.ChunkID, c.Text)
	}
	for _, vec := range p.Vectors {
		vec.Values = slices.Clone(vec.Values)
		vec.ACL = slices.Clone(d.ACL)
		st.vectors[key{d.TenantID, vec.ChunkID}] = vec
	}
	if p.Event != nil {
		ev := *p.Event
		ev.TenantID, ev.IndexVersion, ev.RowsRemoved, ev.At = d.TenantID, v, removed, micro(ev.At)
		st.invs[d.TenantID] = append(st.invs[d.TenantID], ev)
	}
	return v, removed, nil
}

// TouchDocument implements retrieval.Store.
func (r *Retrieval) TouchDocument(_ context.Context, tenantID, documentID string, version int64, at time.Time) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	d, ok := r.st().docs[key{tenantID, documentID}]
	switch {
	case !ok:
		return fmt.Errorf("touch document %s: %w", documentID, retrieval.ErrNotFound)
	case d.Version != version:
		return fmt.Errorf("touch document %s: %w", documentID, retrieval.ErrConflict)
	}
	d.IndexedAt = micro(at)
	r.st().docs[key{tenantID, documentID}] = d
	return nil
}

// GetDocument implements retrieval.Store.
func (r *Retrieval) GetDocument(_ context.Context, tenantID, documentID string) (retrieval.Document, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	d, ok := r.st().docs[key{tenantID, documentID}]
	if !ok {
		return retrieval.Document{}, fmt.Errorf("document %s: %w", documentID, retrieval.ErrNotFound)
	}
	return cloneDoc(d), nil
}

// DeleteDocument implements retrieval.Store.
func (r *Retrieval) DeleteDocument(_ context.Context, tenantID, documentID string, ev retrieval.Invalidation) (retrieval.Invalidation, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	d, ok := st.docs[key{tenantID, documentID}]
	if !ok {
		return retrieval.Invalidation{}, fmt.Errorf("document %s: %w", documentID, retrieval.ErrNotFound)
	}
	n := r.dropDoc(tenantID, d)
	delete(st.docs, key{tenantID, documentID})
	ev.TenantID, ev.IndexVersion, ev.RowsRemoved, ev.OldVersion, ev.At = tenantID, r.bump(tenantID), n, d.Version, micro(ev.At)
	st.invs[tenantID] = append(st.invs[tenantID], ev)
	return ev, nil
}

// DeletedVersion implements retrieval.Store.
func (r *Retrieval) DeletedVersion(_ context.Context, tenantID, documentID string) (int64, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	var v int64
	for _, ev := range r.st().invs[tenantID] {
		if ev.Kind == retrieval.DocumentDeleted && ev.DocumentID == documentID {
			v = max(v, ev.OldVersion)
		}
	}
	return v, nil
}

// SetMember implements retrieval.Store.
func (r *Retrieval) SetMember(_ context.Context, tenantID, group, principal string, member bool, ev retrieval.Invalidation) (bool, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	ps := st.members[tenantID]
	if ps == nil {
		ps = map[string]map[string]bool{}
		st.members[tenantID] = ps
	}
	gs := ps[principal]
	if gs[group] == member {
		return false, nil
	}
	if member {
		if gs == nil {
			gs = map[string]bool{}
			ps[principal] = gs
		}
		gs[group] = true
	} else {
		delete(gs, group)
	}
	ev.TenantID, ev.IndexVersion, ev.At = tenantID, r.bump(tenantID), micro(ev.At)
	st.invs[tenantID] = append(st.invs[tenantID], ev)
	return true, nil
}

func (r *Retrieval) groups(tenantID, principal string) []string {
	var out []string
	for g := range r.st().members[tenantID][principal] {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Groups implements retrieval.Store.
func (r *Retrieval) Groups(_ context.Context, tenantID, principal string) ([]string, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.groups(tenantID, principal), nil
}

// readable is the ACL and TTL rule, applied under the lock.
func (r *Retrieval) readable(tenantID string, entries []string, chunkID string, notBefore time.Time) (retrieval.Chunk, bool) {
	st := r.st()
	c, ok := st.chunks[key{tenantID, chunkID}]
	if !ok {
		return retrieval.Chunk{}, false
	}
	d, ok := st.docs[key{tenantID, c.DocumentID}]
	if !ok || d.Version != c.Version || !retrieval.Readable(d.ACL, entries) || (!notBefore.IsZero() && d.IndexedAt.Before(notBefore)) {
		return retrieval.Chunk{}, false
	}
	return c, true
}

// SearchText implements retrieval.Store; the ACL is the index's keep
// filter, so an unreadable chunk is never scored.
func (r *Retrieval) SearchText(_ context.Context, q retrieval.TextQuery) ([]retrieval.Scored, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	ix := r.st().text[q.TenantID]
	if ix == nil || len(q.Terms) == 0 {
		return nil, nil
	}
	entries := retrieval.Entries(q.Principal, r.groups(q.TenantID, q.Principal))
	limit := q.Limit
	if limit <= 0 {
		limit = ix.Len()
	}
	var query string
	for _, t := range q.Terms {
		query += t + " "
	}
	hits := ix.Search(query, limit, func(id string) bool {
		_, ok := r.readable(q.TenantID, entries, id, q.NotBefore)
		return ok
	})
	out := make([]retrieval.Scored, len(hits))
	for i, h := range hits {
		out[i] = retrieval.Scored{ChunkID: h.ID, Score: h.Score}
	}
	return out, nil
}

// ReadableChunks implements retrieval.Store.
func (r *Retrieval) ReadableChunks(_ context.Context, tenantID, principal string, ids []string, notBefore time.Time) ([]retrieval.Chunk, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	entries := retrieval.Entries(principal, r.groups(tenantID, principal))
	var out []retrieval.Chunk
	for _, id := range ids {
		if c, ok := r.readable(tenantID, entries, id, notBefore); ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// IndexRows implements retrieval.Store.
func (r *Retrieval) IndexRows(_ context.Context, tenantID, model string, after int64) ([]retrieval.IndexRow, []retrieval.Invalidation, int64, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	var rows []retrieval.IndexRow
	for k, c := range st.chunks {
		if k.tenant != tenantID || st.chunkAt[k] <= after {
			continue
		}
		row := retrieval.IndexRow{ChunkID: c.ChunkID, DocumentID: c.DocumentID, Version: c.Version, Terms: c.Terms,
			ACL: slices.Clone(st.docs[key{tenantID, c.DocumentID}].ACL), IndexVersion: st.chunkAt[k]}
		if v, ok := st.vectors[k]; ok && model != "" && v.Model == model {
			row.Vector = slices.Clone(v.Values)
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b retrieval.IndexRow) int {
		if a.IndexVersion != b.IndexVersion {
			return int(a.IndexVersion - b.IndexVersion)
		}
		return cmpString(a.ChunkID, b.ChunkID)
	})
	var invs []retrieval.Invalidation
	for _, ev := range st.invs[tenantID] {
		if ev.IndexVersion > after {
			invs = append(invs, ev)
		}
	}
	return rows, invs, st.versions[tenantID], nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// IndexVersion implements retrieval.Store.
func (r *Retrieval) IndexVersion(_ context.Context, tenantID string) (int64, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.st().versions[tenantID], nil
}

// Invalidations implements retrieval.Store.
func (r *Retrieval) Invalidations(_ context.Context, tenantID string, after int64, limit int) ([]retrieval.Invalidation, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	var out []retrieval.Invalidation
	for _, ev := range r.st().invs[tenantID] {
		if ev.IndexVersion > after && (limit <= 0 || len(out) < limit) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// PutSnapshot implements retrieval.Store.
func (r *Retrieval) PutSnapshot(_ context.Context, s retrieval.Snapshot) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	s.CreatedAt = micro(s.CreatedAt)
	s.Hits = slices.Clone(s.Hits)
	for i := range s.Hits {
		st.texts[key{s.TenantID, s.Hits[i].ContentDigest}] = s.Hits[i].Text
		s.Hits[i].RetrievedAt = micro(s.Hits[i].RetrievedAt)
		s.Hits[i].Text = "" // kept by digest
	}
	st.snaps[key{s.TenantID, s.SnapshotID}] = s
	return nil
}

// GetSnapshot implements retrieval.Store.
func (r *Retrieval) GetSnapshot(_ context.Context, tenantID, snapshotID string) (retrieval.Snapshot, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	s, ok := st.snaps[key{tenantID, snapshotID}]
	if !ok {
		return retrieval.Snapshot{}, fmt.Errorf("snapshot %s: %w", snapshotID, retrieval.ErrNotFound)
	}
	s.Hits = slices.Clone(s.Hits)
	for i := range s.Hits {
		s.Hits[i].Text = st.texts[key{tenantID, s.Hits[i].ContentDigest}]
	}
	return s, nil
}

// PurgeSnapshots implements retrieval.Store.
func (r *Retrieval) PurgeSnapshots(_ context.Context, tenantID string, before time.Time) (int, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	n := 0
	for k, s := range st.snaps {
		if (tenantID == "" || k.tenant == tenantID) && s.CreatedAt.Before(before) {
			delete(st.snaps, k)
			n++
		}
	}
	used := map[[2]string]bool{} // (tenant, digest)
	for k, s := range st.snaps {
		for _, h := range s.Hits {
			used[[2]string{k.tenant, h.ContentDigest}] = true
		}
	}
	for k := range st.texts {
		if (tenantID == "" || k.tenant == tenantID) && !used[[2]string{k.tenant, k.id}] {
			delete(st.texts, k)
		}
	}
	return n, nil
}

// ProjectionRows implements retrieval.Store.
func (r *Retrieval) ProjectionRows(_ context.Context, tenantID, documentID string) (int, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	st := r.st()
	n := 0
	for k, c := range st.chunks {
		if k.tenant == tenantID && c.DocumentID == documentID {
			n++
		}
	}
	for k, v := range st.vectors {
		if k.tenant == tenantID && v.DocumentID == documentID {
			n++
		}
	}
	return n, nil
}
