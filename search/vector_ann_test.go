package search

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// recallAt10 is the mean share of exact's top 10 that got's top 10 holds.
func recallAt10(t testing.TB, x *VectorIndex, qs [][]float32, keep func(string, Meta) bool) float64 {
	t.Helper()
	hit := 0
	for _, q := range qs {
		want := x.floatScan(q, 10, keep)
		got := x.Search(q, 10, keep)
		in := map[string]bool{}
		for _, r := range got {
			in[r.ID] = true
		}
		for _, r := range want {
			if in[r.ID] {
				hit++
			}
		}
	}
	return float64(hit) / float64(10*len(qs))
}

func randIndex(r *rand.Rand, n, dim int, o Options, ns func(i int) string) *VectorIndex {
	x := NewVectorIndexWith(dim, o)
	for i := 0; i < n; i++ {
		m := Meta{}
		if ns != nil {
			m.Namespace = ns(i)
		}
		x.Upsert("v"+strconv.Itoa(i), randVec(r, dim), m)
	}
	return x
}

func queries(r *rand.Rand, n, dim int) [][]float32 {
	qs := make([][]float32, n)
	for i := range qs {
		qs[i] = randVec(r, dim)
	}
	return qs
}

// TestVectorIndexRecall: random unit vectors are the hard case for a graph
// (no clusters to navigate by); recall@10 against the exact scan must
// still reach 0.9 at 20k.
func TestVectorIndexRecall(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	// 8k vectors of 48 dimensions: big enough for the graph to matter,
	// small enough to build under -race in CI (the crossover benchmark
	// measures recall at 10k-300k).
	x := randIndex(r, 8_000, 48, Options{ExactLimit: 1000}, nil)
	if !x.Approximate() {
		t.Fatal("8k vectors over the limit did not build the graph")
	}
	if rc := recallAt10(t, x, queries(r, 100, 48), nil); rc < 0.9 {
		t.Fatalf("recall@10 = %.3f, want >= 0.9", rc)
	} else {
		t.Logf("recall@10 = %.3f", rc)
	}
}

// TestVectorIndexRemoved: after removals and replacements, on the graph
// and through the rebuild that tombstones trigger, no search returns a
// removed id or a replaced vector's old score.
func TestVectorIndexRemoved(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const n, dim = 3000, 32
	x := randIndex(r, n, dim, Options{ExactLimit: 500}, nil)
	live := map[string][]float32{}
	for i := 0; i < n; i++ {
		id := "v" + strconv.Itoa(i)
		i := x.pos[id]
		live[id] = slices.Clone(x.flat[i*dim : (i+1)*dim])
	}
	removed := map[string]bool{}
	check := func(stage string) {
		t.Helper()
		if !x.Approximate() {
			t.Fatalf("%s: the graph is gone at %d vectors", stage, x.Len())
		}
		for qi := 0; qi < 30; qi++ {
			q := randVec(r, dim)
			for _, h := range x.Search(q, 40, nil) {
				if removed[h.ID] {
					t.Fatalf("%s: removed id %s returned", stage, h.ID)
				}
				if want := float64(Dot(q, live[h.ID])); h.Score != want {
					t.Fatalf("%s: %s scored %v, its current vector gives %v", stage, h.ID, h.Score, want)
				}
			}
		}
	}
	// Remove a third: tombstones, no rebuild yet.
	for i := 0; i < n; i += 3 {
		id := "v" + strconv.Itoa(i)
		x.Remove(id)
		removed[id] = true
		delete(live, id)
	}
	if x.dead == 0 {
		t.Fatal("removals left no tombstone: the graph was rebuilt or never used")
	}
	check("after removals")
	// Replace the vectors of another third, and re-add some removed ids.
	for i := 1; i < n; i += 3 {
		id := "v" + strconv.Itoa(i)
		v := randVec(r, dim)
		x.Upsert(id, v, Meta{})
		live[id] = v
	}
	for i := 0; i < n; i += 30 {
		id := "v" + strconv.Itoa(i)
		v := randVec(r, dim)
		x.Upsert(id, v, Meta{})
		live[id] = v
		delete(removed, id)
	}
	check("after replacements")
	// Remove more until tombstones outnumber live nodes: a rebuild.
	before := x.g
	for i := 2; i < n && x.g == before; i += 3 {
		id := "v" + strconv.Itoa(i)
		x.Remove(id)
		removed[id] = true
		delete(live, id)
	}
	if x.g == before || x.dead != 0 {
		t.Fatalf("no rebuild after tombstones outnumbered live nodes (dead %d, live %d)", x.dead, x.Len())
	}
	check("after the rebuild")
	if x.Len() != len(live) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(live))
	}
	// Shrinking to half the limit drops the graph; search stays right.
	for id := range live {
		if x.Len() <= 250 {
			break
		}
		x.Remove(id)
		removed[id] = true
		delete(live, id)
	}
	if x.Approximate() {
		t.Fatalf("graph kept at %d vectors, half the limit or less", x.Len())
	}
	q := randVec(r, dim)
	if got, want := x.Search(q, 10, nil), x.exact(q, 10, nil); !slices.Equal(got, want) {
		t.Fatalf("exact again below the limit: %v, want %v", got, want)
	}
}

// TestVectorIndexFiltered: a broad filter is answered by the graph with
// every hit passing it; a selective one (a rare namespace) falls back to
// the exact filtered scan and so matches it.
func TestVectorIndexFiltered(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	ns := func(i int) string {
		switch {
		case i%100 == 0:
			return "rare" // 1%
		case i%2 == 0:
			return "even"
		}
		return "odd"
	}
	x := randIndex(r, 5000, 24, Options{ExactLimit: 1000}, ns)
	in := func(want string) func(string, Meta) bool {
		return func(_ string, m Meta) bool { return m.Namespace == want }
	}
	qs := queries(r, 40, 24)
	for _, q := range qs {
		for _, h := range x.Search(q, 10, in("even")) {
			var i int
			if _, err := fmt.Sscanf(h.ID, "v%d", &i); err != nil || ns(i) != "even" {
				t.Fatalf("filter even returned %s", h.ID)
			}
		}
		got, want := x.Search(q, 10, in("rare")), x.exact(q, 10, in("rare"))
		if !slices.Equal(got, want) {
			t.Fatalf("selective filter: %v, want the exact %v", got, want)
		}
	}
	if rc := recallAt10(t, x, qs, in("even")); rc < 0.9 {
		t.Fatalf("recall@10 under a half filter = %.3f, want >= 0.9", rc)
	}
	if got := x.Search(qs[0], 10, in("none")); len(got) != 0 {
		t.Fatalf("a filter no vector passes returned %v", got)
	}
}

// TestVectorIndexDeterministic: the same inserts give the same answers.
func TestVectorIndexDeterministic(t *testing.T) {
	build := func() *VectorIndex {
		return randIndex(rand.New(rand.NewSource(9)), 3000, 16, Options{ExactLimit: 100}, nil)
	}
	a, b := build(), build()
	r := rand.New(rand.NewSource(10))
	for i := 0; i < 20; i++ {
		q := randVec(r, 16)
		if ga, gb := a.Search(q, 10, nil), b.Search(q, 10, nil); !slices.Equal(ga, gb) {
			t.Fatalf("query %d: %v vs %v", i, ga, gb)
		}
	}
}

// TestVectorIndexOwnerLocks runs the index as memory's vector cache does:
// writers and searchers share it under the owner's mutex (run with -race).
func TestVectorIndexOwnerLocks(t *testing.T) {
	var mu sync.Mutex
	x := NewVectorIndexWith(16, Options{ExactLimit: 200})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < 300; i++ {
				id := fmt.Sprintf("w%d-%d", w, r.Intn(200))
				mu.Lock()
				switch r.Intn(4) {
				case 0:
					x.Remove(id)
				case 1:
					x.Search(randVec(r, 16), 10, func(_ string, m Meta) bool { return m.Namespace != "x" })
				default:
					x.Upsert(id, randVec(r, 16), Meta{})
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range x.ids {
		if !x.Has(id) {
			t.Fatalf("%s listed but not held", id)
		}
	}
	if x.g != nil && len(x.node) != x.Len() {
		t.Fatalf("node slots %d, vectors %d", len(x.node), x.Len())
	}
}
