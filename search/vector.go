package search

import (
	"container/heap"
	"math"
)

// Meta is what a vector index keeps beside a vector so it can filter before
// ranking: the namespace and the expiry (Unix microseconds, 0 = none).
type Meta struct {
	Namespace string
	ExpiresAt int64
}

// VectorIndex ranks vectors by cosine similarity (vectors are normalised,
// so a dot product). Search is exact: a scan of the kept vectors with a
// bounded heap. It is not safe for concurrent use; its owner locks.
type VectorIndex struct {
	dim  int
	ids  []string
	meta []Meta
	flat []float32 // len(ids)*dim
	pos  map[string]int
}

// NewVectorIndex returns an empty index of vectors of dim dimensions.
func NewVectorIndex(dim int) *VectorIndex {
	return &VectorIndex{dim: dim, pos: map[string]int{}}
}

// Dim is the dimension of the index's vectors.
func (x *VectorIndex) Dim() int { return x.dim }

// Len is the number of vectors held.
func (x *VectorIndex) Len() int { return len(x.ids) }

// Has reports whether id is held.
func (x *VectorIndex) Has(id string) bool { _, ok := x.pos[id]; return ok }

// Upsert adds or replaces id's vector. A vector of the wrong dimension is ignored.
func (x *VectorIndex) Upsert(id string, v []float32, m Meta) {
	if len(v) != x.dim {
		return
	}
	if i, ok := x.pos[id]; ok {
		copy(x.flat[i*x.dim:], v)
		x.meta[i] = m
		return
	}
	x.pos[id] = len(x.ids)
	x.ids = append(x.ids, id)
	x.meta = append(x.meta, m)
	x.flat = append(x.flat, v...)
}

// Remove drops id (the last vector moves into its slot).
func (x *VectorIndex) Remove(id string) {
	i, ok := x.pos[id]
	if !ok {
		return
	}
	last := len(x.ids) - 1
	if i != last {
		x.ids[i] = x.ids[last]
		x.meta[i] = x.meta[last]
		copy(x.flat[i*x.dim:(i+1)*x.dim], x.flat[last*x.dim:])
		x.pos[x.ids[i]] = i
	}
	delete(x.pos, id)
	x.ids = x.ids[:last]
	x.meta = x.meta[:last]
	x.flat = x.flat[:last*x.dim]
}

// Search returns the k vectors most similar to q among those keep accepts
// (nil keeps all), best first. Ties break by id.
func (x *VectorIndex) Search(q []float32, k int, keep func(id string, m Meta) bool) []Ranked {
	if k <= 0 || len(q) != x.dim {
		return nil
	}
	h := &minHeap{}
	for i, id := range x.ids {
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

// Dot is the dot product of two vectors of the same length.
func Dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	n := len(a)
	b = b[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Normalize scales v to unit length in place (a zero vector stays zero).
func Normalize(v []float32) {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
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
