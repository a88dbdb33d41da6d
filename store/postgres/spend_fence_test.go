package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
)

// A commit whose spend would take the run's total past int64, sent by an
// owner that lost its lease, is a lost lease (409), not invalid input (422):
// the commit cache's totals are those of the revision the caller names, not
// proof that the caller may commit, so the fast path must not refuse on
// them ahead of the lease and revision checks. A stale cache entry (another
// instance committed a negative spend) must not refuse a total that fits.
func TestSpendOverflowChecksLeaseFirst(t *testing.T) {
	db := openTestDB(t)
	if db.commits == nil {
		t.Fatal("the commit cache is off: this test is about its fast path")
	}
	ctx := ctxT(t)
	const big = int64(900_000_000_000_000_000)
	r := newRun(t, db, "t1", "spend-fence")
	l, err := db.AcquireLease(ctx, "t1", r.RunID, "w1", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rev := r.StateRevision
	commit := func(l run.Lease, rev int64, i int, v int64) (run.Run, error) {
		c := commitReq(rev, l, i)
		c.Event.Payload = json.RawMessage(fmt.Sprintf(`{"spend":{"tokens":%d}}`, v))
		c.Spend = run.SpendOf(c.Event.Payload)
		nr, _, err := db.Commit(ctx, "t1", r.RunID, c)
		return nr, err
	}
	for i := range 10 {
		nr, err := commit(l, rev, i, big)
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		rev = nr.StateRevision
	}
	// w1 loses the lease to w2, which has committed nothing yet.
	if err := db.ReleaseLease(ctx, "t1", r.RunID, l.Owner, l.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AcquireLease(ctx, "t1", r.RunID, "w2", 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = commit(l, rev, 10, big)
	if !errors.Is(err, run.ErrLeaseLost) {
		t.Fatalf("a stale owner's commit whose spend overflows: %v; want %v", err, run.ErrLeaseLost)
	}
}

// Two instances on one schema: a's cache entry still names the revision
// b has committed past (with a negative spend). A commit through a that
// names that stale revision is a revision conflict (409), whatever a's
// cached totals say.
func TestSpendOverflowStaleCacheEntry(t *testing.T) {
	conn := testenv.PostgresURL(t)
	ctx := ctxT(t)
	a, err := Open(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := Open(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if a.commits == nil {
		t.Fatal("the commit cache is off: this test is about its fast path")
	}
	const big = int64(900_000_000_000_000_000)
	r := newRun(t, a, "t1", "spend-stale")
	l, err := a.AcquireLease(ctx, "t1", r.RunID, "w1", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rev := r.StateRevision
	commit := func(db *DB, rev int64, i int, v int64) error {
		c := commitReq(rev, l, i)
		c.Event.Payload = json.RawMessage(fmt.Sprintf(`{"spend":{"tokens":%d}}`, v))
		c.Spend = run.SpendOf(c.Event.Payload)
		_, _, err := db.Commit(ctx, "t1", r.RunID, c)
		return err
	}
	for i := range 10 {
		if err := commit(a, rev, i, big); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		rev++
	}
	if err := commit(b, rev, 10, -big); err != nil {
		t.Fatal(err)
	}
	if err := commit(a, rev, 11, big); !errors.Is(err, run.ErrRevisionConflict) {
		t.Fatalf("a stale-revision commit through a stale cache entry: %v; want %v", err, run.ErrRevisionConflict)
	}
}

// TestDecodeSpentPastInt64: totals an earlier version stored past int64
// (its SQL went on in numeric) read as the nearest int64, so the run and
// the tenant's run list stay readable (they answered 500).
func TestDecodeSpentPastInt64(t *testing.T) {
	var got map[string]int64
	if err := decodeSpent([]byte(`{"tokens": 9900000000000000000, "cost_micros": -9900000000000000000, "steps": 7, "wall_ms": 1e30}`), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"tokens": math.MaxInt64, "cost_micros": math.MinInt64, "steps": 7, "wall_ms": math.MaxInt64}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	if err := decodeSpent([]byte(`{"tokens": "many"}`), &got); err == nil {
		t.Fatal("a total that is no number was read")
	}
}
