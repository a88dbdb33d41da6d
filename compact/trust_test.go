package compact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
)

// watchedRuns is a run source that counts range reads, can change what a
// range reads (as an edit behind the API would) and can name another
// incarnation of the log (as a run created again under its id would).
type watchedRuns struct {
	compact.RunSource
	reads       atomic.Int64
	tampered    atomic.Bool
	incarnation atomic.Value // string; "" keeps the run's own
}

func (w *watchedRuns) Items(ctx context.Context, tenantID string, owner compact.Owner, from, to int64) ([]compact.Item, error) {
	w.reads.Add(1)
	items, err := w.RunSource.Items(ctx, tenantID, owner, from, to)
	if err == nil && w.tampered.Load() && len(items) > 0 {
		items[0].Payload = json.RawMessage(`{"text":"changed"}`)
	}
	return items, err
}

func (w *watchedRuns) Log(ctx context.Context, tenantID string, owner compact.Owner) (int64, int64, string, error) {
	first, last, inc, err := w.RunSource.Log(ctx, tenantID, owner)
	if s, _ := w.incarnation.Load().(string); s != "" {
		inc = s
	}
	return first, last, inc, err
}

// TestUsableTrustsARecentMatch: Usable, which every context build calls,
// reads a summary's range once and then trusts the match (the log of one
// incarnation never changes an entry) for a minute: a context over a long
// summarised history does not read the whole history again each time. A
// log of another incarnation is read again; a change made behind the API
// is seen after the minute by Usable, and at once by Verify.
func TestUsableTrustsARecentMatch(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	runs := run.NewService(st, run.Options{})
	src := &watchedRuns{RunSource: compact.RunSource{Store: st}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := compact.NewService(st.Summaries(), compact.Options{Sources: map[compact.OwnerKind]compact.Source{compact.OwnerRun: src}, Now: func() time.Time { return now }})
	runTurns(t, runs, "t1", "r1", 30, func(i int) string { return fmt.Sprintf(`{"text":"turn %d: the order 77%d was refunded 20 EUR"}`, i, i) })
	owner := compact.RunOwner("r1")
	for _, to := range []int64{10, 20} {
		if _, _, err := svc.Compact(ctx, "t1", owner, compact.CompactRequest{ToSeq: to}); err != nil {
			t.Fatal(err)
		}
	}
	usable := func(want int) {
		t.Helper()
		chain, err := svc.Usable(ctx, "t1", owner)
		if err != nil || len(chain) != want {
			t.Fatalf("usable: %v, %d summaries, want %d", err, len(chain), want)
		}
	}
	usable(2)
	reads := src.reads.Load()
	usable(2)
	if got := src.reads.Load(); got != reads {
		t.Fatalf("a second Usable read %d ranges again", got-reads)
	}
	// Another incarnation of the log: read again.
	src.incarnation.Store("created again")
	usable(2)
	if got := src.reads.Load(); got != reads+2 {
		t.Fatalf("another incarnation: %d range reads, want 2", got-reads)
	}
	// An entry changed behind the API: Verify sees it at once and marks
	// the summary stale; Usable trusts its match of the other one for the
	// minute, then sees the change too and cuts the chain before it.
	src.tampered.Store(true)
	sums, _, err := svc.List(ctx, "t1", owner, "", 10)
	if err != nil || len(sums) != 2 {
		t.Fatalf("list: %v %d", err, len(sums))
	}
	if v, err := svc.Verify(ctx, "t1", sums[1].SummaryID); err != nil || v.OK {
		t.Fatalf("verify of a changed range: %v %+v", err, v)
	}
	usable(1)
	now = now.Add(time.Minute)
	usable(0)
}
