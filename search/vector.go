package search

import (
	"container/heap"
	"slices"
	"sync"

	"github.com/mementohq/memento/llm"
)

// Meta is what a vector index keeps beside a vector so it can filter before
// ranking: the namespace and the expiry (Unix microseconds, 0 = none).
type Meta struct {
	Namespace string
	ExpiresAt int64
}

// VectorIndex ranks vectors by cosine similarity (vectors are normalised,
// so a dot product). Up to Options.ExactLimit vectors, Search is a scan
// with a bounded heap: of the floats up to Options.QuantizeLimit, past it
// of 1-bit codes with the best Options.Rerank re-scored by the floats. Past it an approximate graph (HNSW) built
// incrementally on Upsert answers, over-sampled so the keep filter can
// drop candidates, and the index falls back to the exact scan when too few
// pass (a selective namespace). Either way a hit's score is its exact dot
// product, so the two paths rank alike. It is not safe for concurrent
// use; its owner locks (Search writes the graph's scratch space too).
type VectorIndex struct {
	dim  int
	opts Options
	ids  []string
	meta []Meta
	flat []float32 // len(ids)*dim
	pos  map[string]int

	// the approximate path, nil until the index outgrows ExactLimit
	g      *graph
	node   []int32 // parallel to ids: the slot's node in g
	slotOf []int32 // per node of g: its slot, -1 once removed or replaced
	dead   int     // nodes of g whose slotOf is -1

	// the quantized scan, nil until the index outgrows QuantizeLimit;
	// parallel to ids
	codes *codes
}

// Options tune a VectorIndex; a zero field takes its default.
type Options struct {
	// ExactLimit is the size up to which Search scans every vector
	// (default DefaultExactLimit); negative keeps Search exact always.
	ExactLimit int
	// M is the graph's links per node (default 16; 32 at level 0).
	M int
	// EfConstruction is the candidate list kept while inserting (default 100).
	EfConstruction int
	// EfSearch is the fewest candidates a search gathers (default 300,
	// recall@10 about 0.94 on 20k random 100-d vectors, the hard case;
	// 200 gave 0.87); a search of k gathers at least 2k.
	EfSearch int
	// Seed seeds the graph's level draws (default 1), so the same inserts
	// build the same graph.
	Seed int64
	// QuantizeLimit is the size past which an exact scan reads 1-bit codes
	// of the vectors and re-scores the best Rerank of them with the floats
	// (default DefaultQuantizeLimit); negative never quantizes.
	QuantizeLimit int
	// Rerank is how many candidates of the quantized scan are re-scored
	// (default DefaultRerank; at least k).
	Rerank int
	// Workers, when > 1, splits an exact scan of at least ParallelScanMin
	// vectors over that many goroutines (the keep filter must then be safe
	// for concurrent use). The scan reads every vector, so it is bound by
	// memory bandwidth more than by arithmetic, and one core does not
	// saturate it.
	Workers int
}

// ParallelScanMin is the fewest vectors an exact scan splits over
// Options.Workers: below it a goroutine's start costs more than it saves.
const ParallelScanMin = 8192

// DefaultExactLimit is where the approximate graph takes over. Measured
// with BenchmarkVectorCrossover (thread CPU time, k 10, default options,
// 2 shared cores; exact scan vs graph, graph recall@10 against the scan):
//
//	data       dim  n     exact     graph    graph/exact  recall@10
//	clustered  100  10k    0.48 ms  1.19 ms  2.5x slower  1.00
//	clustered  100  50k    2.73 ms  0.97 ms  2.8x faster  1.00
//	clustered  100  100k   4.82 ms  1.34 ms  3.6x faster  1.00
//	clustered  256  10k    1.34 ms  1.99 ms  1.5x slower  1.00
//	clustered  256  50k    6.53 ms  1.13 ms  5.8x faster  1.00
//	clustered  256  100k  12.80 ms  1.71 ms  7.5x faster  0.97
//	random     100  1k     0.04 ms  0.24 ms  6.3x slower  1.00
//	random     100  10k    0.40 ms  1.09 ms  2.7x slower  0.98
//	random     100  50k    2.36 ms  2.34 ms  even         0.81
//	random     100  100k   3.51 ms  1.94 ms  1.8x faster  0.65
//	random     256  1k     0.06 ms  0.35 ms  5.9x slower  1.00
//	random     256  10k    1.27 ms  2.37 ms  1.9x slower  0.89
//	random     256  50k    4.46 ms  2.60 ms  1.7x faster  0.50
//
// Clustered vectors (100 centres, as real embeddings group by topic) cross
// between 10k and 50k; random unit vectors, the worst case for any graph,
// near 50k and lose recall past it. 30k sits between the two: below it the
// scan costs about 1.5 ms at 100 dimensions and a graph's build time and
// lost recall do not pay.
const DefaultExactLimit = 30_000

// DefaultQuantizeLimit and DefaultRerank: past 20k vectors the quantized
// scan (Options.QuantizeLimit) answers, re-scoring its best 1000. Measured
// with BenchmarkQuantRecall (thread CPU time, k 10, 100k vectors of 256
// dimensions, 2 shared cores at load 6-8; recall@10 against the float scan):
//
//	data                rerank  float    quantized  speedup  recall@10
//	bench memory corpus  500    4.2 ms   1.5 ms     2.8x     0.998
//	bench memory corpus 1000    3.7 ms   1.9 ms     2.0x     1.000
//	clustered            500    3.6 ms   1.5 ms     2.4x     0.992
//	clustered           1000    4.5 ms   1.9 ms     2.5x     1.000
//	random               500    4.3 ms   1.5 ms     2.9x     0.793
//	random              1000    4.2 ms   1.8 ms     2.3x     0.900
//	random              2000    3.9 ms   2.8 ms     1.4x     0.966
//
// Below 20k the float scan costs under a millisecond and stays exact.
const (
	DefaultQuantizeLimit = 20_000
	DefaultRerank        = 1000
)

func (o Options) withDefaults() Options {
	if o.ExactLimit == 0 {
		o.ExactLimit = DefaultExactLimit
	}
	if o.M <= 0 {
		o.M = 16
	}
	if o.EfConstruction <= 0 {
		o.EfConstruction = 100
	}
	if o.EfSearch <= 0 {
		o.EfSearch = 300
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.QuantizeLimit == 0 {
		o.QuantizeLimit = DefaultQuantizeLimit
	}
	if o.Rerank <= 0 {
		o.Rerank = DefaultRerank
	}
	return o
}

// NewVectorIndex returns an empty index of vectors of dim dimensions with
// the default options.
func NewVectorIndex(dim int) *VectorIndex { return NewVectorIndexWith(dim, Options{}) }

// NewVectorIndexWith returns an empty index of vectors of dim dimensions.
func NewVectorIndexWith(dim int, o Options) *VectorIndex {
	return &VectorIndex{dim: dim, opts: o.withDefaults(), pos: map[string]int{}}
}

// Dim is the dimension of the index's vectors.
func (x *VectorIndex) Dim() int { return x.dim }

// Len is the number of vectors held.
func (x *VectorIndex) Len() int { return len(x.ids) }

// Has reports whether id is held.
func (x *VectorIndex) Has(id string) bool { _, ok := x.pos[id]; return ok }

// Approximate reports whether Search currently goes through the graph.
func (x *VectorIndex) Approximate() bool { return x.g != nil }

// Upsert adds or replaces id's vector. A vector of the wrong dimension is ignored.
func (x *VectorIndex) Upsert(id string, v []float32, m Meta) {
	if len(v) != x.dim {
		return
	}
	if i, ok := x.pos[id]; ok {
		old := x.flat[i*x.dim : (i+1)*x.dim]
		x.meta[i] = m
		if slices.Equal(old, v) {
			return // a refreshed row: same vector, new meta
		}
		copy(old, v)
		if x.codes != nil {
			x.codes.encode(i, v)
		}
		if x.g != nil { // the graph keeps the old vector: retire its node
			x.retire(x.node[i])
			x.node[i] = x.addNode(v, i)
			x.compact()
		}
		return
	}
	x.pos[id] = len(x.ids)
	x.ids = append(x.ids, id)
	x.meta = append(x.meta, m)
	x.flat = append(x.flat, v...)
	switch {
	case x.codes != nil:
		x.codes.encode(len(x.ids)-1, v)
	case x.opts.QuantizeLimit >= 0 && len(x.ids) > x.opts.QuantizeLimit:
		x.codes = newCodes(x.dim, x.opts.Seed)
		for i := range x.ids {
			x.codes.encode(i, x.flat[i*x.dim:(i+1)*x.dim])
		}
	}
	switch {
	case x.g != nil:
		x.node = append(x.node, x.addNode(v, len(x.ids)-1))
	case x.opts.ExactLimit >= 0 && len(x.ids) > x.opts.ExactLimit:
		x.build()
	}
}

// Remove drops id (the last vector moves into its slot).
func (x *VectorIndex) Remove(id string) {
	i, ok := x.pos[id]
	if !ok {
		return
	}
	last := len(x.ids) - 1
	if x.g != nil {
		x.retire(x.node[i])
		x.node[i] = x.node[last]
		x.node = x.node[:last]
		if i != last {
			x.slotOf[x.node[i]] = int32(i)
		}
	}
	if i != last {
		x.ids[i] = x.ids[last]
		x.meta[i] = x.meta[last]
		copy(x.flat[i*x.dim:(i+1)*x.dim], x.flat[last*x.dim:])
		x.pos[x.ids[i]] = i
		if x.codes != nil {
			x.codes.move(i, last)
		}
	}
	if x.codes != nil {
		x.codes.truncate(last)
		if last <= x.opts.QuantizeLimit/2 {
			x.codes = nil // well below the limit: the float scan again
		}
	}
	delete(x.pos, id)
	x.ids = x.ids[:last]
	x.meta = x.meta[:last]
	x.flat = x.flat[:last*x.dim]
	if x.g != nil && len(x.ids) <= x.opts.ExactLimit/2 {
		x.dropGraph() // shrunk well below the limit: exact again, memory back
		return
	}
	x.compact()
}

// compact rebuilds the graph once tombstones outnumber live nodes, when
// walks spend most of their effort on them. The rebuild costs about one
// insert per live vector, paid once per as many removals or replacements.
func (x *VectorIndex) compact() {
	if x.g != nil && x.dead > len(x.ids) {
		x.build()
	}
}

// build (re)creates the graph over every held vector, in slot order.
func (x *VectorIndex) build() {
	x.g = newGraph(x.dim, x.opts.M, x.opts.EfConstruction, x.opts.Seed)
	x.slotOf = x.slotOf[:0]
	x.dead = 0
	x.node = make([]int32, len(x.ids))
	for i := range x.ids {
		x.node[i] = x.addNode(x.flat[i*x.dim:(i+1)*x.dim], i)
	}
}

func (x *VectorIndex) dropGraph() {
	x.g, x.node, x.slotOf, x.dead = nil, nil, nil, 0
}

func (x *VectorIndex) addNode(v []float32, slot int) int32 {
	n := x.g.add(v)
	x.slotOf = append(x.slotOf, int32(slot))
	return n
}

func (x *VectorIndex) retire(n int32) {
	x.slotOf[n] = -1
	x.dead++
}

// Search returns the k vectors most similar to q among those keep accepts
// (nil keeps all), best first. Ties break by id.
func (x *VectorIndex) Search(q []float32, k int, keep func(id string, m Meta) bool) []Ranked {
	if k <= 0 || len(q) != x.dim {
		return nil
	}
	if x.g == nil || k >= len(x.ids) {
		return x.exact(q, k, keep)
	}
	// Over-sample: tombstones and filtered-out vectors take candidate
	// slots, so gather more in proportion to the graph's dead share.
	ef := max(x.opts.EfSearch, 2*k) * x.g.len() / len(x.ids)
	for try := 0; ; try++ {
		out := make([]Ranked, 0, k)
		for _, c := range x.g.search(q, ef) {
			s := x.slotOf[c.node]
			if s < 0 || (keep != nil && !keep(x.ids[s], x.meta[s])) {
				continue
			}
			out = append(out, Ranked{ID: x.ids[s], Score: float64(Dot(q, x.flat[int(s)*x.dim:(int(s)+1)*x.dim]))})
		}
		if len(out) >= k {
			sortBest(out)
			return out[:k]
		}
		// Too few passed the filter. Widen once by the pass rate seen;
		// past an eighth of the index, or a second miss, the filtered
		// scan is cheaper and exact.
		next := ef * 2 * k / max(len(out), 1)
		if try > 0 || len(out) == 0 || next > len(x.ids)/8 {
			return x.exact(q, k, keep)
		}
		ef = next
	}
}

// exact scans every vector keep accepts: the floats, or past
// QuantizeLimit the codes with the best Rerank re-scored.
func (x *VectorIndex) exact(q []float32, k int, keep func(id string, m Meta) bool) []Ranked {
	if x.codes != nil && k < len(x.ids) {
		return x.quantSearch(q, k, keep)
	}
	return x.floatScan(q, k, keep)
}

// floatScan scans every vector keep accepts.
func (x *VectorIndex) floatScan(q []float32, k int, keep func(id string, m Meta) bool) []Ranked {
	n := len(x.ids)
	w := min(x.opts.Workers, n/ParallelScanMin)
	if w <= 1 {
		return x.scan(q, k, keep, 0, n)
	}
	parts := make([][]Ranked, w)
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() { parts[i] = x.scan(q, k, keep, i*n/w, (i+1)*n/w) })
	}
	wg.Wait()
	out := slices.Concat(parts...)
	sortBest(out)
	return out[:min(k, len(out))]
}

// scan ranks the vectors of slots [lo, hi) keep accepts, best first, at most k.
func (x *VectorIndex) scan(q []float32, k int, keep func(id string, m Meta) bool, lo, hi int) []Ranked {
	h := &minHeap{}
	for i := lo; i < hi; i++ {
		id := x.ids[i]
		if keep != nil && !keep(id, x.meta[i]) {
			continue
		}
		s := float64(Dot(q, x.flat[i*x.dim:(i+1)*x.dim]))
		if h.Len() < k {
			heap.Push(h, Ranked{ID: id, Score: s})
		} else if better(Ranked{ID: id, Score: s}, (*h)[0]) {
			(*h)[0] = Ranked{ID: id, Score: s}
			heap.Fix(h, 0)
		}
	}
	out := make([]Ranked, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(Ranked)
	}
	return out
}

// Dot is llm.Dot: the cosine similarity of two normalised vectors.
func Dot(a, b []float32) float32 { return llm.Dot(a, b) }

// Normalize is llm.Normalize without its answer: it scales v to unit
// length in place, leaving a zero or non-finite vector all zeros.
func Normalize(v []float32) { llm.Normalize(v) }

// sortBest orders rs best first (score, then id).
func sortBest(rs []Ranked) {
	slices.SortFunc(rs, func(a, b Ranked) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
}

func better(a, b Ranked) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.ID < b.ID
}

// minHeap keeps the worst of the best k at its root.
type minHeap []Ranked

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(Ranked)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
