package memory

import (
	"context"
	"fmt"
	"testing"
)

// changesOnly serves Changes from fixed claims per subject, all at version 1.
type changesOnly struct {
	Store
	claims map[string]int
}

func (c changesOnly) Changes(_ context.Context, _, subject, _ string, after int64) (Changes, error) {
	out := Changes{Version: 1}
	if after > 0 {
		return out, nil
	}
	for i := range c.claims[subject] {
		out.Claims = append(out.Claims, ClaimChange{MemoryID: fmt.Sprintf("%s-%d", subject, i), Namespace: "n", Status: StatusCurrent, Text: "some words", Version: 1})
	}
	return out, nil
}

// TestSubjectCacheBudget: past its claim budget the cache evicts the least
// recently searched subjects, never the one being searched, and forgets
// an evicted or dropped subject's claims in its count.
func TestSubjectCacheBudget(t *testing.T) {
	ctx := context.Background()
	sc := newSubjectCache(changesOnly{claims: map[string]int{"a": 6, "b": 6, "c": 20}}, nil, 16)
	sc.budget = 13
	sync := func(subject string) {
		t.Helper()
		e := sc.entry("t", subject)
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := sc.sync(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	sync("a")
	sync("b")
	if sc.entries.Len() != 2 || sc.claims.Load() != 12 {
		t.Fatalf("under budget: %d entries, %d claims", sc.entries.Len(), sc.claims.Load())
	}
	sync("a") // a is now the most recent
	sync("c") // over budget: b then a go, c stays although alone over it
	if sc.entries.Len() != 1 || sc.claims.Load() != 20 || !sc.entries.Contains(subjectKey{"t", "c"}) {
		t.Fatalf("after c: %v, %d claims", sc.entries.Keys(), sc.claims.Load())
	}
	sc.drop("t", "c")
	if sc.entries.Len() != 0 || sc.claims.Load() != 0 {
		t.Fatalf("after drop: %d entries, %d claims", sc.entries.Len(), sc.claims.Load())
	}
}
