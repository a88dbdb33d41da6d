package retrieval

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/viterin/vek/vek32"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/search"
)

// DefaultIndexTenants is how many tenants' in-process indexes a Service
// keeps when Options leaves it zero (least recently used dropped first).
const DefaultIndexTenants = 256

// EncodeTerms is a chunk's full-text projection: its distinct index terms
// (search.Tokens: lowercased, stemmed), each with its count, as
// "term:count" sorted and space-separated. The store keeps it beside the
// chunk, so the in-process index loads terms, never texts.
func EncodeTerms(text string) string {
	counts := map[string]int{}
	for _, t := range search.Tokens(text) {
		counts[t]++
	}
	keys := make([]string, 0, len(counts))
	for t := range counts {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, t := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(counts[t]))
	}
	return b.String()
}

// decodeTerms calls fn for each term of an EncodeTerms string (a term is a
// letter and digit run: it holds neither ':' nor ' ').
func decodeTerms(s string, fn func(term string, tf int)) {
	for s != "" {
		var f string
		f, s, _ = strings.Cut(s, " ")
		i := strings.LastIndexByte(f, ':')
		if i <= 0 {
			continue
		}
		n, err := strconv.Atoi(f[i+1:])
		if err != nil || n <= 0 {
			continue
		}
		fn(f[:i], n)
	}
}

// indexCache holds, per tenant, an in-process index of the tenant's live
// chunks: BM25 postings of their terms, their vectors under the embedder's
// model (when there is one) and their documents' ACLs. It is loaded from
// Store.IndexRows and kept current by the tenant's index version: a
// retrieval reads the version (one row) and fetches only the rows and
// invalidations written since, so an instance never ranks a chunk another
// instance replaced, deleted or re-permissioned. Ranking only looks at
// chunks of documents the principal's entries (its groups read from the
// store for that retrieval) may read, and takes BM25's corpus statistics
// over those chunks alone: an unreadable chunk is never scored, and no
// score depends on it. Every hit is re-checked in the store as its text
// is read.
type indexCache struct {
	store    Store
	embedder llm.Embedder // nil: full text only
	entries  *lru.Cache[string, *tenantIndex]
}

func newIndexCache(store Store, e llm.Embedder, size int) *indexCache {
	c, _ := lru.New[string, *tenantIndex](size) // errors only for size <= 0
	return &indexCache{store: store, embedder: e, entries: c}
}

func (c *indexCache) model() string {
	if c.embedder == nil {
		return ""
	}
	return c.embedder.Model()
}

func (c *indexCache) tenant(tenant string) *tenantIndex {
	if x, ok := c.entries.Get(tenant); ok {
		return x
	}
	x := newTenantIndex(tenant)
	if prev, ok, _ := c.entries.PeekOrAdd(tenant, x); ok {
		return prev // another search made it first
	}
	return x
}

// search ranks the chunks entries may read in the tenant's index, brought
// up to index version at least: the best n by BM25 over terms (distinct
// index terms, search.Analyze) and, when qv is set, the best n by cosine
// similarity to it.
func (c *indexCache) search(ctx context.Context, tenant string, version int64, entries, terms []string, qv []float32, n int) (text, vec []search.Ranked, err error) {
	x := c.tenant(tenant)
	if err := x.ensure(ctx, c, version); err != nil {
		return nil, nil, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	sc := x.scratch()
	defer func() {
		sc.release()
		x.pool.Put(sc)
	}()
	x.readable(sc, entries)
	text = x.searchText(sc, terms, n)
	if qv != nil {
		vec = x.searchVector(sc, qv, n)
	}
	return text, vec, nil
}

// tenantIndex is one tenant's in-process index. Chunks live in slots
// (parallel arrays); a removed chunk's slot is dead (doc -1) until
// compaction renumbers the slots. Documents live in slots too, and the ACL
// is inverted (entry -> document slots), so the documents a principal may
// read are the union of a few sets, not a test per document.
type tenantIndex struct {
	tenant string
	pool   sync.Pool // *indexScratch

	mu      sync.RWMutex // written by sync, read by searches
	version int64

	lmu     sync.Mutex // guards loading
	loading *indexLoad // the sync in flight, if any
	dim     int        // of the vectors; 0 until the first one

	ids    []string
	doc    []int32     // the chunk's document slot, -1 when dead
	length []int32     // terms in the chunk
	cols   [][]float32 // the vectors by dimension: cols[i][s] is slot s's i-th value
	slot   map[string]int32
	dead   int

	postings map[string]*postingList

	docs    []docEntry
	docSlot map[string]int32
	free    []int32
	byEntry map[string]map[int32]struct{}
}

type postingList struct {
	slots []int32
	tfs   []uint16
}

type docEntry struct {
	id      string
	version int64
	acl     []string
	chunks  []int32
	length  int64 // terms over its chunks
}

type indexScratch struct {
	bits   []uint64 // readable document slots
	docs   []int32  // the same, listed
	chunks int      // live chunks of the readable documents
	length int64    // their terms

	score   []float32 // per chunk slot, zero outside a search
	touched []int32
	cand    []int32
	tf      []uint16

	dims    []int // the query vector's non-zero dimensions
	weights []float32
	vscore  []float32 // per chunk slot, the vector scan's sums
	tmp     []float32
}

// vekMin is the run of slots from which a column's multiply-add goes
// through the SIMD kernels (two passes) rather than the scalar loop.
const vekMin = 256

// vekStretch is how many slots' sums (and as many products) one pass
// keeps: 2 x 8 KiB.
const vekStretch = 2048

func newTenantIndex(tenant string) *tenantIndex {
	return &tenantIndex{tenant: tenant, slot: map[string]int32{}, postings: map[string]*postingList{},
		docSlot: map[string]int32{}, byEntry: map[string]map[int32]struct{}{}}
}

func (x *tenantIndex) scratch() *indexScratch {
	sc, _ := x.pool.Get().(*indexScratch)
	if sc == nil {
		sc = &indexScratch{}
	}
	if len(sc.score) < len(x.ids) {
		sc.score = make([]float32, len(x.ids))
	}
	if n := (len(x.docs) + 63) / 64; len(sc.bits) < n {
		sc.bits = make([]uint64, n)
	}
	return sc
}

// syncTimeout bounds one load of an index from the store. A load runs on
// its own, not under the request that found the index stale: a tenant
// whose first load outlasts a request's deadline is still loaded once,
// for the requests that follow, instead of started over by each of them.
const syncTimeout = 5 * time.Minute

// ensure brings the index up to version at least, waiting for the sync in
// flight (or starting one) until it is done or ctx ends.
func (x *tenantIndex) ensure(ctx context.Context, c *indexCache, version int64) error {
	for {
		x.mu.RLock()
		current := x.version >= version
		x.mu.RUnlock()
		if current {
			return nil
		}
		x.lmu.Lock()
		ld := x.loading
		if ld == nil {
			ld = &indexLoad{done: make(chan struct{})}
			x.loading = ld
			go x.load(c, ld)
		}
		x.lmu.Unlock()
		select {
		case <-ld.done:
			if ld.err != nil {
				return ld.err
			}
			// Loaded to the store's version then; a write since may ask for more.
		case <-ctx.Done():
			return fmt.Errorf("load the retrieval index (it goes on for the next request): %w", context.Cause(ctx))
		}
	}
}

// indexLoad is one sync in flight; err is set before done closes.
type indexLoad struct {
	done chan struct{}
	err  error
}

// load runs one sync under its own deadline and hands the result to
// whoever waits on ld.
func (x *tenantIndex) load(c *indexCache, ld *indexLoad) {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	ld.err = x.sync(ctx, c)
	x.lmu.Lock()
	x.loading = nil
	x.lmu.Unlock()
	close(ld.done)
}

// sync reads what changed in the store since the index's version.
// The store is read with no lock held, so searches of the index as it is
// go on meanwhile (and a waiting request can give up); only one sync runs
// at a time (ensure), so the version read first is still the index's when
// the rows are applied.
func (x *tenantIndex) sync(ctx context.Context, c *indexCache) error {
	x.mu.RLock()
	from := x.version
	x.mu.RUnlock()
	rows, invs, at, err := c.store.IndexRows(ctx, x.tenant, c.model(), from)
	if err != nil {
		return fmt.Errorf("load index rows: %w", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, inv := range invs {
		if inv.DocumentID != "" {
			x.removeDoc(inv.DocumentID)
		}
	}
	x.grow(len(rows))
	for _, r := range rows {
		x.add(r)
	}
	x.version = at
	if x.dead > 1024 && x.dead > len(x.ids)/2 {
		x.compact()
	}
	return nil
}

// grow makes room for n more slots at once: appending a tenant's first
// load row by row would leave the columns up to twice their size.
func (x *tenantIndex) grow(n int) {
	x.ids, x.doc, x.length = slices.Grow(x.ids, n), slices.Grow(x.doc, n), slices.Grow(x.length, n)
	for i := range x.cols {
		x.cols[i] = slices.Grow(x.cols[i], n)
	}
}

// add indexes one row, replacing what its chunk or an older version of its
// document had.
func (x *tenantIndex) add(r IndexRow) {
	d, ok := x.docSlot[r.DocumentID]
	if ok && x.docs[d].version != r.Version {
		x.removeDoc(r.DocumentID)
		ok = false
	}
	if !ok {
		d = x.addDoc(r)
	}
	if old, ok := x.slot[r.ChunkID]; ok { // written again at the same version: not expected, but keep one
		x.killSlot(old)
		e := &x.docs[d]
		e.chunks = slices.DeleteFunc(e.chunks, func(s int32) bool { return s == old })
		e.length -= int64(x.length[old])
	}
	s := int32(len(x.ids))
	x.ids = append(x.ids, r.ChunkID)
	x.doc = append(x.doc, d)
	x.slot[r.ChunkID] = s
	terms := r.Terms
	if terms == "" && r.Text != "" {
		terms = EncodeTerms(r.Text)
	}
	n := 0
	decodeTerms(terms, func(t string, tf int) {
		p := x.postings[t]
		if p == nil {
			p = &postingList{}
			x.postings[strings.Clone(t)] = p
		}
		p.slots = append(p.slots, s)
		p.tfs = append(p.tfs, uint16(min(tf, math.MaxUint16)))
		n += tf
	})
	x.length = append(x.length, int32(n))
	e := &x.docs[d]
	e.chunks = append(e.chunks, s)
	e.length += int64(n)
	if x.dim == 0 && len(r.Vector) > 0 { // the first vector: the slots before it have none
		x.dim = len(r.Vector)
		x.cols = make([][]float32, x.dim)
		for i := range x.cols {
			x.cols[i] = make([]float32, s, cap(x.ids))
		}
	}
	if x.dim > 0 {
		// A chunk without a vector under this model (or of another model's
		// dimension) keeps zeros: it scores 0, never a hit.
		ok := len(r.Vector) == x.dim
		for i := range x.cols {
			f := float32(0)
			if ok {
				f = r.Vector[i]
			}
			x.cols[i] = append(x.cols[i], f)
		}
	}
}

func (x *tenantIndex) addDoc(r IndexRow) int32 {
	var d int32
	if n := len(x.free); n > 0 {
		d, x.free = x.free[n-1], x.free[:n-1]
	} else {
		d = int32(len(x.docs))
		x.docs = append(x.docs, docEntry{})
	}
	x.docs[d] = docEntry{id: r.DocumentID, version: r.Version, acl: slices.Clone(r.ACL)}
	x.docSlot[r.DocumentID] = d
	for _, e := range r.ACL {
		set := x.byEntry[e]
		if set == nil {
			set = map[int32]struct{}{}
			x.byEntry[e] = set
		}
		set[d] = struct{}{}
	}
	return d
}

func (x *tenantIndex) removeDoc(id string) {
	d, ok := x.docSlot[id]
	if !ok {
		return
	}
	e := x.docs[d]
	for _, s := range e.chunks {
		x.killSlot(s)
	}
	for _, a := range e.acl {
		if set := x.byEntry[a]; set != nil {
			delete(set, d)
			if len(set) == 0 {
				delete(x.byEntry, a)
			}
		}
	}
	delete(x.docSlot, id)
	x.docs[d] = docEntry{}
	x.free = append(x.free, d)
}

func (x *tenantIndex) killSlot(s int32) {
	delete(x.slot, x.ids[s])
	x.doc[s] = -1
	x.dead++
}

// compact drops dead slots and renumbers the live ones, once they are
// the minority: the rebuild costs one pass over the postings.
func (x *tenantIndex) compact() {
	remap := make([]int32, len(x.ids))
	n := int32(0)
	for s := range x.ids {
		if x.doc[s] < 0 {
			remap[s] = -1
			continue
		}
		remap[s] = n
		x.ids[n], x.doc[n], x.length[n] = x.ids[s], x.doc[s], x.length[s]
		for _, c := range x.cols {
			c[n] = c[s]
		}
		x.slot[x.ids[n]] = n
		n++
	}
	clear(x.ids[n:])
	x.ids, x.doc, x.length = x.ids[:n], x.doc[:n], x.length[:n]
	for i := range x.cols {
		x.cols[i] = x.cols[i][:n]
	}
	for t, p := range x.postings {
		j := 0
		for i, s := range p.slots {
			if m := remap[s]; m >= 0 {
				p.slots[j], p.tfs[j] = m, p.tfs[i]
				j++
			}
		}
		if j == 0 {
			delete(x.postings, t)
			continue
		}
		p.slots, p.tfs = p.slots[:j], p.tfs[:j]
	}
	for d := range x.docs {
		for i, s := range x.docs[d].chunks {
			x.docs[d].chunks[i] = remap[s]
		}
	}
	x.dead = 0
}

// readable marks in sc the documents entries may read.
func (x *tenantIndex) readable(sc *indexScratch, entries []string) {
	sc.docs, sc.chunks, sc.length = sc.docs[:0], 0, 0
	for _, e := range entries {
		for d := range x.byEntry[e] {
			w, b := d/64, uint64(1)<<(d%64)
			if sc.bits[w]&b != 0 {
				continue
			}
			sc.bits[w] |= b
			sc.docs = append(sc.docs, d)
			sc.chunks += len(x.docs[d].chunks)
			sc.length += x.docs[d].length
		}
	}
}

func (sc *indexScratch) may(d int32) bool { return d >= 0 && sc.bits[d/64]&(uint64(1)<<(d%64)) != 0 }

// release clears what a search left in sc (every set bit belongs to a
// listed document; a touched slot's score is its only non-zero one).
func (sc *indexScratch) release() {
	for _, d := range sc.docs {
		sc.bits[d/64] = 0
	}
	for _, s := range sc.touched {
		sc.score[s] = 0
	}
	sc.touched = sc.touched[:0]
}

// searchText is BM25 over the readable chunks of the distinct index terms
// (search.Analyze of the query; any term matches), with N, document
// frequencies and the average length counted among those chunks.
func (x *tenantIndex) searchText(sc *indexScratch, terms []string, n int) []search.Ranked {
	if sc.chunks == 0 {
		return nil
	}
	N := float64(sc.chunks)
	avg := max(float64(sc.length)/N, 1)
	for _, t := range terms {
		p := x.postings[t]
		if p == nil {
			continue
		}
		sc.cand, sc.tf = sc.cand[:0], sc.tf[:0]
		for i, s := range p.slots {
			if sc.may(x.doc[s]) {
				sc.cand = append(sc.cand, s)
				sc.tf = append(sc.tf, p.tfs[i])
			}
		}
		df := float64(len(sc.cand))
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (N-df+0.5)/(df+0.5))
		for i, s := range sc.cand {
			f := float64(sc.tf[i])
			if sc.score[s] == 0 {
				sc.touched = append(sc.touched, s)
			}
			sc.score[s] += float32(idf * f * (search.BM25K1 + 1) / (f + search.BM25K1*(1-search.BM25B+search.BM25B*float64(x.length[s])/avg)))
		}
	}
	var top topN
	top.init(n)
	for _, s := range sc.touched {
		top.offer(x.ids, s, float64(sc.score[s]))
	}
	return top.ranked(x.ids)
}

// searchVector ranks the readable chunks by their exact dot product with
// qv, computed dimension by dimension over those where qv is not zero: the
// vectors are stored by dimension, so a short query embedded by hashing
// (a dozen or two of 256 dimensions set) reads that many columns, not
// every vector. Few readable: only their slot ranges are computed (a
// document's chunks are adjacent slots); most: whole columns, the
// unreadable slots skipped at ranking.
func (x *tenantIndex) searchVector(sc *indexScratch, qv []float32, n int) []search.Ranked {
	if x.dim == 0 || len(qv) != x.dim || len(x.ids) == 0 {
		return nil
	}
	sc.dims, sc.weights = sc.dims[:0], sc.weights[:0]
	for i, q := range qv {
		if q != 0 {
			sc.dims, sc.weights = append(sc.dims, i), append(sc.weights, q)
		}
	}
	if len(sc.vscore) < len(x.ids) {
		sc.vscore, sc.tmp = make([]float32, len(x.ids)), make([]float32, vekStretch)
	}
	var top topN
	top.init(n)
	// scan scores slots [from, to) and offers the readable ones that share
	// something with the query.
	scan := func(from, to int) {
		a := sc.vscore[from:to]
		clear(a)
		if len(a) >= vekMin {
			// In stretches whose sums stay in the L1 cache while every
			// dimension passes over them.
			for lo := from; lo < to; lo += vekStretch {
				hi := min(lo+vekStretch, to)
				a, tmp := sc.vscore[lo:hi], sc.tmp[:hi-lo]
				for k, i := range sc.dims {
					vek32.MulNumber_Into(tmp, x.cols[i][lo:hi], sc.weights[k])
					vek32.Add_Inplace(a, tmp)
				}
			}
		} else {
			for k, i := range sc.dims {
				axpy(a, x.cols[i][from:to], sc.weights[k])
			}
		}
		for j, score := range a {
			if s := int32(from + j); score > 0 && sc.may(x.doc[s]) { // 0: shares nothing, it would only pad the list
				top.offer(x.ids, s, float64(score))
			}
		}
	}
	if 4*sc.chunks < len(x.ids) {
		for _, d := range sc.docs {
			cs := x.docs[d].chunks
			for i := 0; i < len(cs); { // runs of adjacent slots
				j := i + 1
				for j < len(cs) && cs[j] == cs[j-1]+1 {
					j++
				}
				scan(int(cs[i]), int(cs[j-1])+1)
				i = j
			}
		}
	} else {
		scan(0, len(x.ids))
	}
	return top.ranked(x.ids)
}

// axpy adds w*x to a (len(x) >= len(a)), eight lanes a step: the
// compiler keeps the eight sums in registers and drops the bounds checks.
func axpy(a, x []float32, w float32) {
	x = x[:len(a)]
	j := 0
	for ; j+8 <= len(a); j += 8 {
		aa, xx := a[j:j+8:j+8], x[j:j+8:j+8]
		aa[0] += w * xx[0]
		aa[1] += w * xx[1]
		aa[2] += w * xx[2]
		aa[3] += w * xx[3]
		aa[4] += w * xx[4]
		aa[5] += w * xx[5]
		aa[6] += w * xx[6]
		aa[7] += w * xx[7]
	}
	for ; j < len(a); j++ {
		a[j] += w * x[j]
	}
}

// topN keeps the best n (score, slot) pairs, ties broken by chunk id, in a
// min-heap whose root is the worst kept.
type topN struct {
	n int
	h []scoredSlot
}

type scoredSlot struct {
	slot  int32
	score float64
}

func (t *topN) init(n int) { t.n, t.h = n, make([]scoredSlot, 0, n) }

func worse(ids []string, a, b scoredSlot) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return ids[a.slot] > ids[b.slot]
}

func (t *topN) offer(ids []string, s int32, score float64) {
	c := scoredSlot{s, score}
	if len(t.h) < t.n {
		t.h = append(t.h, c)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(ids, t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if t.n == 0 || !worse(ids, t.h[0], c) {
		return
	}
	t.h[0] = c
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(t.h) && worse(ids, t.h[l], t.h[m]) {
			m = l
		}
		if r := l + 1; r < len(t.h) && worse(ids, t.h[r], t.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

func (t *topN) ranked(ids []string) []search.Ranked {
	slices.SortFunc(t.h, func(a, b scoredSlot) int {
		switch {
		case worse(ids, b, a):
			return -1
		case worse(ids, a, b):
			return 1
		}
		return 0
	})
	out := make([]search.Ranked, len(t.h))
	for i, c := range t.h {
		out[i] = search.Ranked{ID: ids[c.slot], Score: c.score}
	}
	return out
}
