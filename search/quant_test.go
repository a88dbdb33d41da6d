package search

import (
	"math"
	"math/rand"
	"strconv"
	"testing"
)

// TestQuantizedRecall: past QuantizeLimit the scan reads the codes; on
// clustered vectors its recall@10 against the float scan stays at 0.95 or
// more, with a filter too, and every score is the exact dot product.
func TestQuantizedRecall(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	const n, dim = 6000, 100 // 100 pads to 128: the padding is exercised
	var centres [][]float32
	for range 50 {
		centres = append(centres, randVec(r, dim))
	}
	x := NewVectorIndexWith(dim, Options{ExactLimit: -1, QuantizeLimit: 1000, Rerank: 200})
	vecs := map[string][]float32{}
	for i := range n {
		id := "v" + strconv.Itoa(i)
		v := clusteredVec(r, centres)
		vecs[id] = v
		x.Upsert(id, v, Meta{Namespace: []string{"a", "b"}[i%2]})
	}
	if x.codes == nil || x.Approximate() {
		t.Fatalf("codes %v, graph %v: want the quantized scan only", x.codes != nil, x.Approximate())
	}
	var qs [][]float32
	for range 100 {
		qs = append(qs, clusteredVec(r, centres))
	}
	inA := func(_ string, m Meta) bool { return m.Namespace == "a" }
	for _, keep := range []func(string, Meta) bool{nil, inA} {
		if rc := recallAt10(t, x, qs, keep); rc < 0.95 {
			t.Fatalf("recall@10 = %.3f, want >= 0.95", rc)
		} else {
			t.Logf("recall@10 = %.3f", rc)
		}
	}
	for _, h := range x.Search(qs[0], 10, inA) {
		if want := float64(Dot(qs[0], vecs[h.ID])); math.Abs(h.Score-want) > 1e-6 {
			t.Fatalf("%s scored %v, its dot product is %v", h.ID, h.Score, want)
		}
		if i, err := strconv.Atoi(h.ID[1:]); err != nil || i%2 != 0 {
			t.Fatalf("filter a returned %s", h.ID)
		}
	}
}

// TestQuantizedRemoved: after removals and replacements on the codes, no
// search returns a removed id or a replaced vector's old score, the codes
// follow every slot move, and shrinking to half the limit drops them.
func TestQuantizedRemoved(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	const n, dim = 3000, 32
	x := NewVectorIndexWith(dim, Options{ExactLimit: -1, QuantizeLimit: 500, Rerank: 3000})
	live := map[string][]float32{}
	for i := range n {
		id := "v" + strconv.Itoa(i)
		live[id] = randVec(r, dim)
		x.Upsert(id, live[id], Meta{})
	}
	removed := map[string]bool{}
	for i := 0; i < n; i += 3 {
		id := "v" + strconv.Itoa(i)
		x.Remove(id)
		delete(live, id)
		removed[id] = true
	}
	for i := 1; i < n; i += 5 {
		id := "v" + strconv.Itoa(i)
		if live[id] != nil {
			live[id] = randVec(r, dim)
			x.Upsert(id, live[id], Meta{})
		}
	}
	if x.codes == nil || len(x.codes.ones) != x.Len() {
		t.Fatalf("codes hold %d slots, the index %d", len(x.codes.ones), x.Len())
	}
	for range 50 {
		q := randVec(r, dim)
		got := x.Search(q, 10, nil)
		// Rerank covers the index: the quantized scan must equal the float scan.
		if want := x.floatScan(q, 10, nil); len(got) != len(want) {
			t.Fatalf("got %d hits, want %d", len(got), len(want))
		} else {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("hit %d: %v, want %v", i, got[i], want[i])
				}
			}
		}
		for _, h := range got {
			if removed[h.ID] {
				t.Fatalf("removed %s returned", h.ID)
			}
			if want := float64(Dot(q, live[h.ID])); math.Abs(h.Score-want) > 1e-6 {
				t.Fatalf("%s scored %v, its current vector %v", h.ID, h.Score, want)
			}
		}
	}
	// Every slot's code is its own vector's: re-encoding gives the same bits.
	c := newCodes(dim, x.opts.Seed)
	for i := range x.ids {
		c.encode(i, x.flat[i*dim:(i+1)*dim])
	}
	for i := range c.bits {
		if c.bits[i] != x.codes.bits[i] {
			t.Fatalf("code word %d differs from its vector's after the moves", i)
		}
	}
	for id := range live {
		if x.Len() <= 250 {
			break
		}
		x.Remove(id)
	}
	if x.codes != nil {
		t.Fatalf("codes kept at %d vectors, half the limit or less", x.Len())
	}
}

// TestRotationKeepsDots: the rotation is orthonormal, so it keeps dot
// products (what the estimate relies on).
func TestRotationKeepsDots(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	c := newCodes(100, 1)
	a, b := randVec(r, 100), randVec(r, 100)
	ra, rb := make([]float32, c.p), make([]float32, c.p)
	c.rotate(ra, a)
	c.rotate(rb, b)
	if d, want := Dot(ra, rb), Dot(a, b); math.Abs(float64(d-want)) > 1e-5 {
		t.Fatalf("rotated dot %v, want %v", d, want)
	}
	if n := Dot(ra, ra); math.Abs(float64(n-1)) > 1e-5 {
		t.Fatalf("rotated norm² %v, want 1", n)
	}
}
