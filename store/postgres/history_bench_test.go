package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
)

// BenchmarkHistoryBytesPerEvent measures what the event log of a 1,000-step
// run with a 100 KB state, each step changing a few small members, costs on
// disk per event (pg_total_relation_size of run_events, TOAST and indexes
// included), beside the size of the state: the ratio a full copy per event
// would make about 1 (less what TOAST compression saves on the state).
// Run: go test -run '^$' -bench HistoryBytesPerEvent -benchtime 1x ./store/postgres/
func BenchmarkHistoryBytesPerEvent(b *testing.B) {
	const steps, stateBytes = 1000, 100 << 10
	db := openTestDB(b)
	ctx := context.Background()
	svc := run.NewService(db, run.Options{})
	raw := make([]byte, stateBytes/2)
	_, _ = rand.Read(raw)
	doc := hex.EncodeToString(raw) // random text: compression does not hide a copy
	state := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"doc":%q,"step":%d,"status":"step-%d","counter":%d}`, doc, i, i, 2*i))
	}
	size := func() int64 {
		var n int64
		if err := db.pool.QueryRow(ctx, `SELECT pg_total_relation_size('run_events')`).Scan(&n); err != nil {
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
