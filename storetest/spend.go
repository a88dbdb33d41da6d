package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/mementohq/memento/run"
)

// testSpendOverflow commits spends whose running total would leave int64:
// the commit is refused as invalid input and changes nothing (no wrapped
// total, no total stored that the run can no longer be read with), and the
// run goes on. Both a state the PostgreSQL commit cache takes and one it
// leaves to SQL (members out of jsonb order) are tried.
func testSpendOverflow(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("spend", `{}`)
	l := f.lease(r.RunID, "w", longTTL)
	const big = int64(900_000_000_000_000_000) // 18 digits, as SpendOf counts
	spend := func(state string, v int64) run.CommitRequest {
		req := f.commitReq(r, l, "s", state, "")
		req.Event.Payload = json.RawMessage(fmt.Sprintf(`{"spend":{"tokens":%d}}`, v))
		return req
	}
	for i := range 10 {
		nr, _, err := f.svc.Commit(ctx, f.tenant, r.RunID, spend(`{}`, big))
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		r = nr
	}
	want := map[string]int64{"tokens": 10 * big}
	for _, state := range []string{`{}`, `{"b":1,"a":2}`} {
		before := f.snap(r.RunID)
		_, _, err := f.svc.Commit(ctx, f.tenant, r.RunID, spend(state, big))
		if !errors.Is(err, run.ErrInvalidInput) {
			t.Fatalf("state %s: a total past int64 committed: %v", state, err)
		}
		f.assertUnchanged(before, "a refused commit whose spend total leaves int64")
		if got := f.get(r.RunID).Spent; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("spend totals %v after a refused commit, want %v", got, want)
		}
	}
	// The run goes on: a spend back down commits.
	if _, _, err := f.svc.Commit(ctx, f.tenant, r.RunID, spend(`{"b":1,"a":2}`, -big)); err != nil {
		t.Fatalf("commit of a negative spend: %v", err)
	}
	want["tokens"] -= big
	if got := f.get(r.RunID).Spent; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spend totals %v, want %v", got, want)
	}
}
