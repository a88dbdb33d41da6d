package search

import (
	"math"
	"math/bits"
	"math/rand"
	"slices"
	"sync"
)

// codes is the quantized copy of a VectorIndex's vectors that a large
// exact scan reads instead of the floats: each vector, turned by a seeded
// random rotation (three rounds of random sign flips and a Walsh-Hadamard
// transform over the dimension padded to a power of two), is kept as the
// signs of its coordinates, one bit each, plus one float that corrects
// the estimate (RaBitQ, Gao and Long 2024). A search quantizes the rotated
// query to 4 bits per coordinate and estimates every dot product with 4
// AND+POPCOUNT passes over the bits, then re-scores the best candidates
// exactly with the floats. The bits of a 256-dimension vector are 32
// bytes against 1 KiB of floats, so the scan reads a 32nd of the memory
// (the float scan is bound by memory bandwidth) and stays in cache.
//
// The rotation makes every coordinate carry a share of every input
// coordinate, so the signs describe sparse vectors (hashed features) as
// well as dense ones; the estimate's error shrinks as 1/sqrt(dim).
type codes struct {
	dim   int // of the vectors
	p     int // padded to a power of two, at least 64
	words int // p / 64
	signs [rotations][]float32
	bits  []uint64  // slot i at bits[i*words:(i+1)*words]
	fac   []float32 // slot i: |v| / (<rot v/|v|, sign code> * sqrt(p)), 0 for a zero vector
	ones  []float32 // slot i: set bits of its code

	scratch sync.Pool // *[]float32 of p
}

const (
	rotations = 3
	queryBits = 4 // estimate unrolls the planes: change both together
)

func newCodes(dim int, seed int64) *codes {
	p := 64
	for p < dim {
		p *= 2
	}
	c := &codes{dim: dim, p: p, words: p / 64}
	r := rand.New(rand.NewSource(seed ^ 0x5eed_c0de))
	for k := range c.signs {
		c.signs[k] = make([]float32, p)
		for i := range c.signs[k] {
			c.signs[k][i] = 1
			if r.Intn(2) == 0 {
				c.signs[k][i] = -1
			}
		}
	}
	c.scratch.New = func() any { s := make([]float32, p); return &s }
	return c
}

// rotate writes the rotation of v (padded with zeros) into dst (len p).
func (c *codes) rotate(dst, v []float32) {
	copy(dst, v)
	clear(dst[len(v):])
	scale := float32(1 / math.Sqrt(float64(c.p)))
	for k := range c.signs {
		for i, s := range c.signs[k] {
			dst[i] *= s
		}
		fwht(dst)
		for i := range dst {
			dst[i] *= scale
		}
	}
}

// fwht is the in-place fast Walsh-Hadamard transform (unnormalised) of a
// slice whose length is a power of two.
func fwht(a []float32) {
	for h := 1; h < len(a); h *= 2 {
		for i := 0; i < len(a); i += 2 * h {
			x, y := a[i:i+h], a[i+h:i+2*h]
			for j := range x {
				x[j], y[j] = x[j]+y[j], x[j]-y[j]
			}
		}
	}
}

// encode writes v's code into slot (slot == len(ones) appends).
func (c *codes) encode(slot int, v []float32) {
	if slot == len(c.ones) {
		c.bits = append(c.bits, make([]uint64, c.words)...)
		c.fac = append(c.fac, 0)
		c.ones = append(c.ones, 0)
	}
	sp := c.scratch.Get().(*[]float32)
	defer c.scratch.Put(sp)
	r := *sp
	c.rotate(r, v)
	b := c.bits[slot*c.words : (slot+1)*c.words]
	clear(b)
	var norm, l1 float64
	ones := 0
	for i, x := range r {
		norm += float64(x) * float64(x)
		l1 += math.Abs(float64(x))
		if x > 0 {
			b[i/64] |= 1 << (i % 64)
			ones++
		}
	}
	c.ones[slot] = float32(ones)
	c.fac[slot] = 0
	if norm > 0 && l1 > 0 {
		n := math.Sqrt(norm)
		// <r/|r|, (2b-1)/sqrt(p)> = |r|_1 / (|r| sqrt(p)), and the estimate
		// divides by it and by sqrt(p) once more (see query.estimate).
		ipox := l1 / (n * math.Sqrt(float64(c.p)))
		c.fac[slot] = float32(n / (ipox * math.Sqrt(float64(c.p))))
	}
}

// move copies slot from's code into slot to.
func (c *codes) move(to, from int) {
	copy(c.bits[to*c.words:(to+1)*c.words], c.bits[from*c.words:(from+1)*c.words])
	c.fac[to], c.ones[to] = c.fac[from], c.ones[from]
}

// truncate keeps the first n slots.
func (c *codes) truncate(n int) {
	c.bits, c.fac, c.ones = c.bits[:n*c.words], c.fac[:n], c.ones[:n]
}

// quantQuery is a query rotated and quantized to queryBits bit planes.
type quantQuery struct {
	planes []uint64 // word w of plane j at planes[w*queryBits+j]
	delta  float32  // value of one quantization step
	lo     float32  // value of code 0
	sum    float32  // sum of the quantized coordinates
}

func (c *codes) query(q []float32) quantQuery {
	sp := c.scratch.Get().(*[]float32)
	defer c.scratch.Put(sp)
	r := *sp
	c.rotate(r, q)
	lo, hi := slices.Min(r), slices.Max(r)
	const levels = 1<<queryBits - 1
	delta := (hi - lo) / levels
	out := quantQuery{planes: make([]uint64, queryBits*c.words), delta: delta, lo: lo}
	if delta == 0 {
		out.sum = lo * float32(c.p)
		return out
	}
	var usum int
	for i, x := range r {
		u := int((x-lo)/delta + 0.5)
		u = min(max(u, 0), levels)
		usum += u
		for j := 0; j < queryBits; j++ {
			if u>>j&1 != 0 {
				out.planes[(i/64)*queryBits+j] |= 1 << (i % 64)
			}
		}
	}
	out.sum = lo*float32(c.p) + delta*float32(usum)
	return out
}

// estimate is the estimated dot product of the query with slot's vector:
// |v| <q', x̄> / <v̂', x̄>, x̄ = (2b-1)/sqrt(p) the code as a unit vector,
// with <q', b> = lo·ones + delta·Σ_j 2^j popcount(plane_j & b). The planes
// are interleaved by word (planes[w*queryBits+j]) so one pass over the
// code's words reads each word once.
func (c *codes) estimate(qq *quantQuery, slot int) float32 {
	b := c.bits[slot*c.words : (slot+1)*c.words]
	pl := qq.planes[:len(b)*queryBits]
	var n0, n1, n2, n3 int
	for w, x := range b {
		p := pl[w*queryBits : w*queryBits+queryBits : w*queryBits+queryBits]
		n0 += bits.OnesCount64(p[0] & x)
		n1 += bits.OnesCount64(p[1] & x)
		n2 += bits.OnesCount64(p[2] & x)
		n3 += bits.OnesCount64(p[3] & x)
	}
	acc := n0 + n1<<1 + n2<<2 + n3<<3
	qb := qq.lo*c.ones[slot] + qq.delta*float32(acc)
	return c.fac[slot] * (2*qb - qq.sum)
}

// candidate is a slot with its estimated score.
type candidate struct {
	est  float32
	slot int32
}

// coarse returns up to r slots of [lo, hi) that keep accepts with the
// highest estimates, in no order.
func (x *VectorIndex) coarse(qq *quantQuery, r int, keep func(id string, m Meta) bool, lo, hi int) []candidate {
	h := make([]candidate, 0, r) // a min-heap on est: the worst kept at h[0]
	c := x.codes
	for i := lo; i < hi; i++ {
		if keep != nil && !keep(x.ids[i], x.meta[i]) {
			continue
		}
		e := c.estimate(qq, i)
		if len(h) < r {
			h = append(h, candidate{e, int32(i)})
			for j := len(h) - 1; j > 0; { // sift up
				p := (j - 1) / 2
				if h[p].est <= h[j].est {
					break
				}
				h[p], h[j] = h[j], h[p]
				j = p
			}
			continue
		}
		if e <= h[0].est {
			continue
		}
		h[0] = candidate{e, int32(i)}
		for j := 0; ; { // sift down
			l, rr, m := 2*j+1, 2*j+2, j
			if l < len(h) && h[l].est < h[m].est {
				m = l
			}
			if rr < len(h) && h[rr].est < h[m].est {
				m = rr
			}
			if m == j {
				break
			}
			h[m], h[j] = h[j], h[m]
			j = m
		}
	}
	return h
}

// quantSearch ranks by the codes, then re-scores the best rerank
// candidates with the floats: the answer holds exact scores, and misses
// only a vector whose estimate fell below rerank others'.
func (x *VectorIndex) quantSearch(q []float32, k int, keep func(id string, m Meta) bool) []Ranked {
	qq := x.codes.query(q)
	r := max(x.opts.Rerank, k)
	n := len(x.ids)
	w := min(x.opts.Workers, n/ParallelScanMin)
	var cands []candidate
	if w <= 1 {
		cands = x.coarse(&qq, r, keep, 0, n)
	} else {
		parts := make([][]candidate, w)
		var wg sync.WaitGroup
		for i := range w {
			wg.Go(func() { parts[i] = x.coarse(&qq, r, keep, i*n/w, (i+1)*n/w) })
		}
		wg.Wait()
		cands = slices.Concat(parts...)
	}
	out := make([]Ranked, len(cands))
	for i, cd := range cands {
		s := int(cd.slot)
		out[i] = Ranked{ID: x.ids[s], Score: float64(Dot(q, x.flat[s*x.dim:(s+1)*x.dim]))}
	}
	sortBest(out)
	return out[:min(k, len(out))]
}
