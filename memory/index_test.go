package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/memstore"
)

// recheckLog records the ids each search asks the store to re-check.
type recheckLog struct {
	memory.Store
	mu   sync.Mutex
	asks [][]string
}

func (r *recheckLog) GetMany(ctx context.Context, tenantID string, ids []string) ([]memory.Claim, error) {
	r.mu.Lock()
	r.asks = append(r.asks, slices.Clone(ids))
	r.mu.Unlock()
	return r.Store.GetMany(ctx, tenantID, ids)
}

// take returns every id asked since the last take.
func (r *recheckLog) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.asks {
		out = append(out, a...)
	}
	r.asks = nil
	return out
}

// recheckLogCG is recheckLog for a store that reads changes and rows in
// one call (memory.ChangesGetter, as store/postgres does). The ids it is
// given count as re-checked only when the subject had not moved: only then
// does the service serve from those rows.
type recheckLogCG struct {
	*recheckLog
	calls int
}

func (r *recheckLogCG) ChangesAndGet(ctx context.Context, tenantID, subjectID, model string, after int64, ids []string) (memory.Changes, []memory.Claim, error) {
	ch, err := r.Store.Changes(ctx, tenantID, subjectID, model, after)
	if err != nil {
		return memory.Changes{}, nil, err
	}
	r.mu.Lock()
	r.calls++
	if ch.Version == after && len(ch.Claims) == 0 && len(ch.Vectors) == 0 {
		r.asks = append(r.asks, slices.Clone(ids))
	}
	r.mu.Unlock()
	cs, err := r.Store.GetMany(ctx, tenantID, ids)
	return ch, cs, err
}

// TestIndexFollowsWritesOfAnotherInstance: a service whose in-process
// indexes hold a subject sees what another instance writes on the same
// store — supersessions, invalidations, a forget of one namespace, new
// claims after it — on its next search, in every mode, whether the store
// reads changes and rows in two calls or in one (memory.ChangesGetter).
// Its indexes are exact, not only filtered by the re-check: the ids it
// re-checks never include a claim that had left current before the search.
func TestIndexFollowsWritesOfAnotherInstance(t *testing.T) {
	t.Run("two calls", func(t *testing.T) {
		log := &recheckLog{Store: memstore.New().Memory()}
		indexFollowsWrites(t, log, log)
	})
	t.Run("ChangesGetter", func(t *testing.T) {
		log := &recheckLogCG{recheckLog: &recheckLog{Store: memstore.New().Memory()}}
		indexFollowsWrites(t, log, log.recheckLog)
		if log.calls == 0 {
			t.Fatal("the service never read changes and rows in one call")
		}
	})
}

func indexFollowsWrites(t *testing.T, st memory.Store, log *recheckLog) {
	ctx := context.Background()
	reader := newService(t, st, nil)
	writer := newService(t, log.Store, nil)
	city := add(t, writer, "t1", memory.AddInput{SubjectID: "u1", Namespace: "places", Key: "home.city", Value: str("lives in Kazan")})
	pet := add(t, writer, "t1", memory.AddInput{SubjectID: "u1", Namespace: "pets", Key: "pet", Value: str("a parrot called Kiwi")})
	tea := add(t, writer, "t1", memory.AddInput{SubjectID: "u1", Namespace: "food", Key: "drink", Value: str("green tea in Kazan")})
	search := func(query, mode string) []string {
		t.Helper()
		r, err := reader.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: query, Mode: mode})
		if err != nil {
			t.Fatalf("search %q (%s): %v", query, mode, err)
		}
		var ids []string
		for _, h := range r.Items {
			ids = append(ids, h.MemoryID)
		}
		return ids
	}
	modes := []string{memory.ModeFulltext, memory.ModeVector, memory.ModeHybrid}
	for _, mode := range modes {
		if got := search("Kazan parrot", mode); len(got) != 3 {
			t.Fatalf("%s before the writes: %v", mode, got)
		}
	}
	moved := add(t, writer, "t1", memory.AddInput{SubjectID: "u1", Namespace: "places", Key: "home.city", Value: str("lives in Saint Petersburg")})
	if moved.Superseded != city.Claim.MemoryID {
		t.Fatalf("supersede = %+v", moved)
	}
	if _, err := writer.Invalidate(ctx, "t1", tea.Claim.MemoryID, "never said it"); err != nil {
		t.Fatal(err)
	}
	log.take()
	for _, mode := range modes {
		got := search("Kazan Petersburg parrot", mode)
		if slices.Contains(got, city.Claim.MemoryID) || slices.Contains(got, tea.Claim.MemoryID) ||
			!slices.Contains(got, moved.Claim.MemoryID) || !slices.Contains(got, pet.Claim.MemoryID) {
			t.Fatalf("%s after supersede and invalidate: %v", mode, got)
		}
		if asked := log.take(); slices.Contains(asked, city.Claim.MemoryID) || slices.Contains(asked, tea.Claim.MemoryID) {
			t.Fatalf("%s re-checked claims that had left current: %v", mode, asked)
		}
	}
	if _, err := writer.Forget(ctx, "t1", "u1", "pets", "asked"); err != nil {
		t.Fatal(err)
	}
	kiwi := add(t, writer, "t1", memory.AddInput{SubjectID: "u1", Namespace: "food", Key: "fruit", Value: str("kiwi fruit")})
	log.take()
	for _, mode := range modes {
		got := search("parrot kiwi Petersburg", mode)
		if slices.Contains(got, pet.Claim.MemoryID) || !slices.Contains(got, kiwi.Claim.MemoryID) || !slices.Contains(got, moved.Claim.MemoryID) {
			t.Fatalf("%s after forgetting a namespace: %v", mode, got)
		}
		if asked := log.take(); slices.Contains(asked, pet.Claim.MemoryID) {
			t.Fatalf("%s re-checked a forgotten claim: %v", mode, asked)
		}
	}
}

// TestIndexOfALargeSubject: full text ranks a subject's claims in process
// with BM25 (a rare word first), filtered by namespace and expiry, and the
// index drops what leaves current.
func TestIndexOfALargeSubject(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st := memstore.New().Memory()
	s := newService(t, st, clk)
	var ids []string
	for i := range 300 {
		ns := "a"
		if i%2 == 1 {
			ns = "b"
		}
		text := fmt.Sprintf("common words number %d", i)
		if i == 123 {
			text += " zebra"
		}
		r := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: ns, Key: fmt.Sprintf("k%d", i), Value: str(text), TTLSeconds: int64(60 + i)})
		ids = append(ids, r.Claim.MemoryID)
	}
	r, err := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "zebra common", Mode: memory.ModeFulltext, K: 5})
	if err != nil || len(r.Items) != 5 || r.Items[0].MemoryID != ids[123] || !strings.Contains(r.Items[0].Text, "zebra") {
		t.Fatalf("rare word first: %+v %v", r.Items, err)
	}
	r, _ = s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "zebra common", Mode: memory.ModeFulltext, Namespace: "a", K: 200})
	if len(r.Items) != 150 {
		t.Fatalf("namespace a: %d hits, want 150", len(r.Items))
	}
	for _, h := range r.Items {
		if h.Namespace != "a" {
			t.Fatalf("namespace filter let %+v through", h.Claim)
		}
	}
	clk.add(159*time.Second + 500*time.Millisecond) // the first 100 claims expired (TTL 60 + i seconds)
	r, _ = s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "common", Mode: memory.ModeFulltext, K: 200})
	if len(r.Items) != 200 {
		t.Fatalf("after expiry: %d hits, want 200", len(r.Items))
	}
	for _, h := range r.Items {
		if slices.Index(ids, h.MemoryID) < 100 {
			t.Fatalf("an expired claim was served: %s", h.Text)
		}
	}
}
