package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/run"
)

// Quick checks of the commit hot path. BenchmarkCommit* go through
// DB.Commit; BenchmarkFloor* do the same UPDATE + INSERT with plain pgx in
// one round trip and return nothing, the floor a store cannot beat.
//
//	go test -run '^$' -bench . ./store/postgres/

const benchState = `{"order_id":"o-123","amount_cents":4200,"currency":"EUR","steps_done":["validate","reserve"],"note":"a state of a few hundred bytes, as a small agent step would keep"}`

func openBenchDB(b *testing.B) *DB {
	b.Helper()
	conn := testenv.WithPostgresParam(testenv.PostgresURL(b), "pool_max_conns", "16")
	db, err := Open(context.Background(), conn)
	if err != nil {
		b.Fatalf("open postgres store: %v", err)
	}
	b.Cleanup(db.Close)
	return db
}

func benchRuns(b *testing.B, db *DB, n int) []run.Lease {
	b.Helper()
	ctx := context.Background()
	leases := make([]run.Lease, n)
	for i := range leases {
		id := fmt.Sprintf("r%d", i)
		if _, _, err := db.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: "t", RunID: id, WorkflowName: "bench",
			StateSchemaVersion: 1, Status: run.StatusRunning, State: json.RawMessage(benchState)}}); err != nil {
			b.Fatal(err)
		}
		l, err := db.AcquireLease(ctx, "t", id, "bench", 0, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	return leases
}

func benchCommit(b *testing.B, db *DB, id string, l run.Lease, rev int64) {
	_, _, err := db.Commit(context.Background(), "t", id, run.StoreCommit{
		ExpectedRevision: rev, Owner: l.Owner, Epoch: l.Epoch,
		Event:        run.EventInput{EventType: "step.done", StepID: "s", Payload: json.RawMessage(`{"ok":true}`)},
		State:        json.RawMessage(benchState),
		NextStep:     "s",
		FromStatuses: []run.Status{run.StatusRunning, run.StatusSuspended},
	})
	if err != nil {
		b.Error(err)
	}
}

const floorSQL = `
WITH u AS (
	UPDATE runs SET state = $3, next_step = $4, state_revision = state_revision + 1, updated_at = now()
	WHERE tenant_id = $1 AND run_id = $2 AND state_revision = $5
	RETURNING state_revision, status, state_schema_version, updated_at
)
INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload, state, next_step, status, state_schema_version, created_at)
SELECT $1, $2, state_revision, 'step.done', 's', 0, $6, $3, $4, status, state_schema_version, updated_at FROM u`

func benchFloor(b *testing.B, db *DB, id string, rev int64) {
	tag, err := db.Pool().Exec(context.Background(), floorSQL, "t", id, json.RawMessage(benchState), "s", rev, json.RawMessage(`{"ok":true}`))
	if err != nil || tag.RowsAffected() != 1 {
		b.Errorf("floor commit: %v %v", tag, err)
	}
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

func BenchmarkCommit(b *testing.B) {
	db := openBenchDB(b)
	l := benchRuns(b, db, 1)[0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchCommit(b, db, "r0", l, int64(i+1))
	}
	reportRate(b)
}

func BenchmarkFloor(b *testing.B) {
	db := openBenchDB(b)
	benchRuns(b, db, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchFloor(b, db, "r0", int64(i+1))
	}
	reportRate(b)
}

// parallel16 runs 16 goroutines (or the nearest multiple of GOMAXPROCS),
// each committing to a run of its own.
func parallel16(b *testing.B, commit func(db *DB, id string, l run.Lease, rev int64)) {
	db := openBenchDB(b)
	procs := runtime.GOMAXPROCS(0)
	per := (16 + procs - 1) / procs
	leases := benchRuns(b, db, per*procs)
	var next atomic.Int32
	b.SetParallelism(per)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) - 1)
		id, rev := fmt.Sprintf("r%d", i), int64(1)
		for pb.Next() {
			commit(db, id, leases[i], rev)
			rev++
		}
	})
	reportRate(b)
}

func BenchmarkCommitParallel16(b *testing.B) {
	parallel16(b, func(db *DB, id string, l run.Lease, rev int64) { benchCommit(b, db, id, l, rev) })
}

func BenchmarkFloorParallel16(b *testing.B) {
	parallel16(b, func(db *DB, id string, _ run.Lease, rev int64) { benchFloor(b, db, id, rev) })
}

// BenchmarkInterleaved* alternate a store commit and a floor commit in each
// goroutine (two runs each) and report the floor's share of the time: on a
// shared, busy machine that ratio is steadier than two benchmarks run one
// after the other.
func BenchmarkInterleaved1(b *testing.B) {
	db := openBenchDB(b)
	leases := benchRuns(b, db, 2)
	var storeNs, floorNs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		benchCommit(b, db, "r0", leases[0], int64(i+1))
		t1 := time.Now()
		benchFloor(b, db, "r1", int64(i+1))
		storeNs += t1.Sub(t0)
		floorNs += time.Since(t1)
	}
	if storeNs > 0 {
		b.ReportMetric(float64(floorNs)/float64(storeNs), "floor/store")
	}
}

func BenchmarkInterleaved16(b *testing.B) {
	db := openBenchDB(b)
	procs := runtime.GOMAXPROCS(0)
	per := (16 + procs - 1) / procs
	leases := benchRuns(b, db, 2*per*procs) // the first half for the store, the rest for the floor
	half := len(leases) / 2
	var next atomic.Int32
	var storeNs, floorNs atomic.Int64
	b.SetParallelism(per)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) - 1)
		sid, fid, rev := fmt.Sprintf("r%d", i), fmt.Sprintf("r%d", half+i), int64(1)
		for pb.Next() {
			t0 := time.Now()
			benchCommit(b, db, sid, leases[i], rev)
			t1 := time.Now()
			benchFloor(b, db, fid, rev)
			storeNs.Add(int64(t1.Sub(t0)))
			floorNs.Add(int64(time.Since(t1)))
			rev++
		}
	})
	if s := storeNs.Load(); s > 0 {
		b.ReportMetric(float64(floorNs.Load())/float64(s), "floor/store")
	}
}
