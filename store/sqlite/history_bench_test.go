package sqlite_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/sqlite"
)

// BenchmarkHistoryBytesPerEvent measures what the event log of a 1,000-step
// run with a 100 KB state, each step changing a few small members, costs in
// the database file per event (the pages of run_events, from dbstat),
// beside the size of the state: a full copy per event makes about 1.
// Run: go test -run '^$' -bench HistoryBytesPerEvent -benchtime 1x ./store/sqlite/
func BenchmarkHistoryBytesPerEvent(b *testing.B) {
	const steps, stateBytes = 1000, 100 << 10
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "memento.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	svc := run.NewService(db, run.Options{})
	raw := make([]byte, stateBytes/2)
	_, _ = rand.Read(raw)
	doc := hex.EncodeToString(raw)
	state := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"doc":%q,"step":%d,"status":"step-%d","counter":%d}`, doc, i, i, 2*i))
	}
	size := func() int64 {
		var n int64
		if err := db.SQL().QueryRowContext(ctx, `SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'run_events'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("hist-%d", i)
		r, _, err := svc.Create(ctx, "t", run.CreateRequest{RunID: id, WorkflowName: "wf", State: state(0)}, "")
		if err != nil {
			b.Fatal(err)
		}
		l, err := svc.AcquireLease(ctx, "t", id, "w", 0, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		before := size()
		for s := 1; s <= steps; s++ {
			if r, _, err = svc.Commit(ctx, "t", id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l,
				State: state(s), NextStep: "next", Event: run.EventInput{EventType: "step", StepID: fmt.Sprint(s)}}); err != nil {
				b.Fatal(err)
			}
		}
		per := float64(size()-before) / steps
		b.ReportMetric(per, "bytes/event")
		b.ReportMetric(per/float64(len(state(0))), "event/state")
	}
}
