package search

import (
	"math"
	"math/rand"
	"slices"
)

// graph is a hierarchical navigable small world graph (Malkov and
// Yashunin, 2016) over normalised vectors, ranking by dot product.
//
// It is written here rather than taken from github.com/coder/hnsw because
// the only release the module proxy serves (v0.6.1) evicts arbitrary
// candidates (its heap's Max and PopLast read the last array slot of a
// min-heap) and stops a layer search when the best result stops improving;
// on 20k random 100-d vectors it measured recall@10 of 0.01. The fixes are
// merged upstream (coder/hnsw#20, #22) but untagged; switch when a release
// carries them and BenchmarkVectorCrossover shows it at least as good.
//
// Nodes are never removed: a removal is a tombstone, still walked (so the
// graph stays connected) but never returned, and the owner rebuilds when
// tombstones pile up. Levels come from a seeded generator and every walk
// visits neighbours in slice order, so the same inserts give the same graph
// and the same answers. Not safe for concurrent use.
type graph struct {
	dim   int
	m     int // links per node above level 0; 2m at level 0
	efC   int // candidates kept while inserting
	ml    float64
	rng   *rand.Rand
	vecs  []float32   // node i at vecs[i*dim:(i+1)*dim]
	links [][][]int32 // links[node][level]
	dead  []bool
	entry int32
	top   int // level of entry

	// scratch reused across walks (the owner serialises calls)
	seen  []uint32
	epoch uint32
	cand  distHeap
	res   distHeap
}

func newGraph(dim, m, efC int, seed int64) *graph {
	return &graph{dim: dim, m: m, efC: efC, ml: 1 / math.Log(float64(m)), rng: rand.New(rand.NewSource(seed)), entry: -1}
}

func (g *graph) len() int { return len(g.links) }

func (g *graph) vec(n int32) []float32 {
	return g.vecs[int(n)*g.dim : (int(n)+1)*g.dim]
}

// dist is 1 - cosine for normalised vectors: smaller is nearer.
func (g *graph) dist(q []float32, n int32) float32 { return 1 - Dot(q, g.vec(n)) }

// add inserts a copy of v and returns its node number.
func (g *graph) add(v []float32) int32 {
	n := int32(len(g.links))
	g.vecs = append(g.vecs, v...)
	level := int(-math.Log(1-g.rng.Float64()) * g.ml)
	g.links = append(g.links, make([][]int32, level+1))
	g.dead = append(g.dead, false)
	g.seen = append(g.seen, 0)
	if g.entry < 0 {
		g.entry, g.top = n, level
		return n
	}
	q := g.vec(n)
	ep := g.entry
	for l := g.top; l > level; l-- {
		ep = g.greedy(q, ep, l)
	}
	for l := min(level, g.top); l >= 0; l-- {
		w := g.searchLayer(q, ep, g.efC, l)
		maxLinks := g.maxLinks(l)
		nb := g.selectNeighbors(q, w, g.m)
		g.links[n][l] = nb
		for _, o := range nb {
			g.links[o][l] = append(g.links[o][l], n)
			if len(g.links[o][l]) > maxLinks {
				g.shrink(o, l, maxLinks)
			}
		}
		ep = w[0].node
	}
	if level > g.top {
		g.entry, g.top = n, level
	}
	return n
}

func (g *graph) maxLinks(level int) int {
	if level == 0 {
		return 2 * g.m
	}
	return g.m
}

// shrink cuts node o's links at level l back to the max nearest. Running
// the selection heuristic here instead measured the same recall on random
// vectors at a pairwise-distance cost per overflow.
func (g *graph) shrink(o int32, l, max int) {
	q := g.vec(o)
	cs := make([]distNode, len(g.links[o][l]))
	for i, x := range g.links[o][l] {
		cs[i] = distNode{g.dist(q, x), x}
	}
	sortDist(cs)
	out := g.links[o][l][:max]
	for i := range out {
		out[i] = cs[i].node
	}
	g.links[o][l] = out
}

// selectNeighbors keeps, nearest first, candidates nearer to q than to any
// already kept (Malkov's heuristic), then fills up to m with the nearest of
// the rest. cs is sorted nearest first.
func (g *graph) selectNeighbors(q []float32, cs []distNode, m int) []int32 {
	out := make([]int32, 0, m)
	var skipped []int32
	for _, c := range cs {
		if len(out) == m {
			break
		}
		ok := true
		cv := g.vec(c.node)
		for _, r := range out {
			if 1-Dot(cv, g.vec(r)) < c.d {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, c.node)
		} else {
			skipped = append(skipped, c.node)
		}
	}
	for _, s := range skipped {
		if len(out) == m {
			break
		}
		out = append(out, s)
	}
	return out
}

// greedy walks level l from ep to the node nearest q.
func (g *graph) greedy(q []float32, ep int32, l int) int32 {
	best := g.dist(q, ep)
	for changed := true; changed; {
		changed = false
		for _, x := range g.links[ep][l] {
			if d := g.dist(q, x); d < best || (d == best && x < ep) {
				best, ep, changed = d, x, true
			}
		}
	}
	return ep
}

// searchLayer returns up to ef nodes of level l nearest q, nearest first,
// tombstones included (they keep the graph connected; the caller drops them).
func (g *graph) searchLayer(q []float32, ep int32, ef, l int) []distNode {
	g.epoch++
	if g.epoch == 0 { // wrapped: clear the stamps once every 2^32 walks
		clear(g.seen)
		g.epoch = 1
	}
	g.cand = g.cand[:0]
	g.res = g.res[:0]
	d := distNode{g.dist(q, ep), ep}
	g.seen[ep] = g.epoch
	g.cand.push(d, true)
	g.res.push(d, false)
	for len(g.cand) > 0 {
		c := g.cand.pop(true)
		if len(g.res) >= ef && c.d > g.res[0].d {
			break
		}
		for _, x := range g.links[c.node][l] {
			if g.seen[x] == g.epoch {
				continue
			}
			g.seen[x] = g.epoch
			dx := g.dist(q, x)
			if len(g.res) < ef || dx < g.res[0].d {
				g.cand.push(distNode{dx, x}, true)
				g.res.push(distNode{dx, x}, false)
				if len(g.res) > ef {
					g.res.pop(false)
				}
			}
		}
	}
	out := make([]distNode, len(g.res))
	copy(out, g.res)
	sortDist(out)
	return out
}

// search returns up to ef nodes nearest q, nearest first.
func (g *graph) search(q []float32, ef int) []distNode {
	if g.entry < 0 {
		return nil
	}
	ep := g.entry
	for l := g.top; l > 0; l-- {
		ep = g.greedy(q, ep, l)
	}
	return g.searchLayer(q, ep, ef, 0)
}

type distNode struct {
	d    float32
	node int32
}

func nearer(a, b distNode) bool {
	if a.d != b.d {
		return a.d < b.d
	}
	return a.node < b.node
}

func sortDist(xs []distNode) {
	slices.SortFunc(xs, func(a, b distNode) int {
		if nearer(a, b) {
			return -1
		}
		if nearer(b, a) {
			return 1
		}
		return 0
	})
}

// distHeap is a binary heap of distNode: nearest at the root when min is
// true (candidates), farthest at the root otherwise (results). Hand-rolled
// so a walk does not box every push through container/heap's interface.
type distHeap []distNode

func (h distHeap) less(i, j int, min bool) bool {
	if min {
		return nearer(h[i], h[j])
	}
	return nearer(h[j], h[i])
}

func (h *distHeap) push(x distNode, min bool) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p, min) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *distHeap) pop(min bool) distNode {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, b := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, b, min) {
			b = l
		}
		if r < len(s) && s.less(r, b, min) {
			b = r
		}
		if b == i {
			break
		}
		s[i], s[b] = s[b], s[i]
		i = b
	}
	*h = s
	return top
}
