package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/run"
	migratepkg "github.com/mementohq/memento/store/internal/migrate"
	"github.com/mementohq/memento/storetest"
)

// TestRunStoreSuite runs the shared conformance suite, each subtest on a
// schema of its own.
func TestRunStoreSuite(t *testing.T) {
	storetest.RunStoreSuite(t, func(t *testing.T) run.Store { return openTestDB(t) })
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// jsonEqual compares JSON semantically (jsonb normalizes spacing and key order).
func jsonEqual(t *testing.T, got, want json.RawMessage) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("invalid JSON %q: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("invalid JSON %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

func newRun(t *testing.T, s *DB, tenant, id string) run.Run {
	t.Helper()
	r, created, err := s.CreateRun(ctxT(t), run.NewRun{Run: run.Run{
		TenantID: tenant, RunID: id, WorkflowName: "wf", WorkflowVersion: "v1",
		StateSchemaVersion: 1, Status: run.StatusRunning, NextStep: "start",
		State: json.RawMessage(`{"n": 0}`), StateRevision: 1,
	}})
	if err != nil || !created {
		t.Fatalf("create run %s: created=%v err=%v", id, created, err)
	}
	return r
}

func commitReq(rev int64, l run.Lease, n int) run.StoreCommit {
	return run.StoreCommit{
		ExpectedRevision: rev, Owner: l.Owner, Epoch: l.Epoch,
		Event:        run.EventInput{EventType: "step.done", StepID: fmt.Sprintf("s%d", n), Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))},
		State:        json.RawMessage(fmt.Sprintf(`{"n": %d}`, n)),
		NextStep:     fmt.Sprintf("s%d", n+1),
		FromStatuses: []run.Status{run.StatusRunning, run.StatusSuspended},
	}
}

func TestMigrationsLandInTestSchema(t *testing.T) {
	schema, conn := testenv.PostgresSchema(t)
	ctx := ctxT(t)
	// Several instances starting at once serialize on the advisory lock.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	dbs := make([]*DB, 4)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(ctx, conn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(dbs[i].Close)
	}
	db := dbs[0]
	var tables []string
	rows, err := db.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, schema)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run_checkpoints", "run_events", "runs", "schema_migrations"} {
		found := false
		for _, n := range tables {
			found = found || n == want
		}
		if !found {
			t.Errorf("table %s not in schema %s (have %v)", want, schema, tables)
		}
	}
	migs, err := migratepkg.Load(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(migs) || len(migs) == 0 {
		t.Errorf("schema_migrations has %d rows, want one per embedded migration (%d)", n, len(migs))
	}
	var first string
	if err := db.Pool().QueryRow(ctx, `SELECT min(version) FROM schema_migrations`).Scan(&first); err != nil || first != "0001_runs" {
		t.Errorf("first migration = %q, %v; want 0001_runs", first, err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func TestOpenFailsOnMissingSchema(t *testing.T) {
	ctx := ctxT(t)
	// PostgresURL fails the test with a clear message when PostgreSQL is
	// down; its search_path is then pointed at a schema nobody created.
	conn := testenv.WithPostgresParam(testenv.PostgresURL(t), "search_path", "memento_t_does_not_exist")
	db, err := Open(ctx, conn)
	if err == nil {
		db.Close()
		t.Fatal("Open with a search_path naming no existing schema succeeded; want an error")
	}
}

func TestCommitHappyPathAndSnapshot(t *testing.T) {
	s := openTestDB(t)
	ctx := ctxT(t)
	newRun(t, s, "t1", "r1")
	l, err := s.AcquireLease(ctx, "t1", "r1", "w1", 0, time.Minute)
	if err != nil || l.Epoch != 1 {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	r, ev, err := s.Commit(ctx, "t1", "r1", commitReq(1, l, 1))
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if r.StateRevision != 2 || ev.Seq != 2 || r.NextStep != "s2" || r.Status != run.StatusRunning || r.WorkflowName != "wf" {
		t.Errorf("committed run %+v event %+v", r, ev)
	}
	if r.UpdatedAt.Location() != time.UTC || ev.CreatedAt.Location() != time.UTC || r.LeaseExpiresAt == nil {
		t.Errorf("times not UTC or lease expiry missing: %v %v %v", r.UpdatedAt, ev.CreatedAt, r.LeaseExpiresAt)
	}
	got, err := s.GetRun(ctx, "t1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got.State, json.RawMessage(`{"n":1}`)) || got.StateRevision != 2 || !got.UpdatedAt.Equal(r.UpdatedAt) {
		t.Errorf("stored run %+v, returned %+v", got, r)
	}
	// A status change with a schema version change, then the snapshot of each event.
	c := commitReq(2, l, 2)
	c.Status, c.StatusReason, c.StateSchemaVersion = run.StatusSuspended, "waiting", 2
	c.FromStatuses = run.AllowedFrom(run.StatusSuspended)
	r, _, err = s.Commit(ctx, "t1", "r1", c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != run.StatusSuspended || r.StatusReason != "waiting" || r.StateSchemaVersion != 2 {
		t.Errorf("after status commit: %+v", r)
	}
	for seq, want := range map[int64]struct {
		state, next string
		status      run.Status
		ver         int
	}{1: {`{"n":0}`, "start", run.StatusRunning, 1}, 2: {`{"n":1}`, "s2", run.StatusRunning, 1}, 3: {`{"n":2}`, "s3", run.StatusSuspended, 2}} {
		ev, err := s.GetEvent(ctx, "t1", "r1", seq)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, ev.State, json.RawMessage(want.state)) || ev.NextStep != want.next || ev.Status != want.status || ev.StateSchemaVersion != want.ver {
			t.Errorf("event %d snapshot = %s %q %s %d, want %+v", seq, ev.State, ev.NextStep, ev.Status, ev.StateSchemaVersion, want)
		}
	}
	if ev, err := s.GetEvent(ctx, "t1", "r1", 1); err != nil || ev.EventType != run.EventRunCreated ||
		!jsonEqual(t, ev.Payload, json.RawMessage(`{"workflow_name":"wf","workflow_version":"v1","state_schema_version":1}`)) {
		t.Errorf("run.created event: %+v %v", ev, err)
	}
	if _, err := s.GetEvent(ctx, "t1", "r1", 4); !errors.Is(err, run.ErrRevisionNotFound) {
		t.Errorf("missing seq: %v", err)
	}
	if _, err := s.GetEvent(ctx, "t2", "r1", 1); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("other tenant's event: %v", err)
	}
}

// A refused commit must change nothing: the guarded UPDATE matches no row,
// so the INSERT of the data-modifying CTE reads no row and inserts nothing.
func TestRefusedCommitChangesNothingAndNamesTheCheck(t *testing.T) {
	s := openTestDB(t)
	ctx := ctxT(t)
	newRun(t, s, "t1", "r1")
	l, err := s.AcquireLease(ctx, "t1", "r1", "w1", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Commit(ctx, "t1", "r1", commitReq(1, l, 1)); err != nil {
		t.Fatal(err)
	}
	before, _ := s.GetRun(ctx, "t1", "r1")
	stale := l
	stale.Epoch = 7
	other := l
	other.Owner = "w2"
	toDone := commitReq(2, l, 2)
	toDone.Status = run.StatusCompleted
	toDone.FromStatuses = []run.Status{run.StatusSuspended} // pretend only suspended may go there
	cases := []struct {
		name   string
		tenant string
		runID  string
		c      run.StoreCommit
		want   error
	}{
		{"unknown run", "t1", "nope", commitReq(2, l, 2), run.ErrNotFound},
		{"other tenant", "t2", "r1", commitReq(2, l, 2), run.ErrNotFound},
		{"transition before lease", "t1", "r1", func() run.StoreCommit { c := toDone; c.Owner = "w2"; return c }(), run.ErrInvalidTransition},
		{"stale epoch", "t1", "r1", commitReq(2, stale, 2), run.ErrLeaseLost},
		{"lease before revision", "t1", "r1", commitReq(1, other, 2), run.ErrLeaseLost},
		{"stale revision", "t1", "r1", commitReq(1, l, 2), run.ErrRevisionConflict},
		{"future revision", "t1", "r1", commitReq(5, l, 2), run.ErrRevisionConflict},
	}
	for _, tc := range cases {
		_, _, err := s.Commit(ctx, tc.tenant, tc.runID, tc.c)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	after, _ := s.GetRun(ctx, "t1", "r1")
	if !reflect.DeepEqual(before, after) {
		t.Errorf("refused commits changed the run:\n%+v\n%+v", before, after)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM run_events`).Scan(&n); err != nil || n != 2 {
		t.Errorf("events after refused commits = %d (%v), want 2", n, err)
	}
}

func TestLeaseFencing(t *testing.T) {
	s := openTestDB(t)
	ctx := ctxT(t)
	newRun(t, s, "t1", "r1")
	// Only the last renewal is short, so nothing before the sleep can race
	// an expiry on a slow machine.
	a, err := s.AcquireLease(ctx, "t1", "r1", "a", 0, time.Minute)
	if err != nil || a.Epoch != 1 {
		t.Fatalf("a acquires: %+v %v", a, err)
	}
	if _, err := s.AcquireLease(ctx, "t1", "r1", "b", 0, time.Minute); !errors.Is(err, run.ErrLeaseHeld) {
		t.Fatalf("b while a holds: %v", err)
	}
	a2, err := s.AcquireLease(ctx, "t1", "r1", "a", 0, 2*time.Minute)
	if err != nil || a2.Epoch != 1 || !a2.ExpiresAt.After(a.ExpiresAt) {
		t.Fatalf("a re-acquires: %+v %v (first %+v)", a2, err, a)
	}
	if _, err := s.AcquireLease(ctx, "t1", "r1", "a", 2, time.Minute); !errors.Is(err, run.ErrLeaseLost) {
		t.Fatalf("renew at a wrong epoch: %v", err)
	}
	a3, err := s.AcquireLease(ctx, "t1", "r1", "a", 1, 200*time.Millisecond)
	if err != nil || a3.Epoch != 1 || !a3.ExpiresAt.Before(a2.ExpiresAt) {
		t.Fatalf("a renews for a short while: %+v %v", a3, err)
	}
	time.Sleep(time.Until(a3.ExpiresAt) + 50*time.Millisecond) // real lease expiry
	b, err := s.AcquireLease(ctx, "t1", "r1", "b", 0, time.Minute)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("b after expiry: %+v %v", b, err)
	}
	if _, err := s.AcquireLease(ctx, "t1", "r1", "a", 1, time.Minute); !errors.Is(err, run.ErrLeaseLost) {
		t.Errorf("stale a renews: %v", err)
	}
	if _, _, err := s.Commit(ctx, "t1", "r1", commitReq(1, a3, 1)); !errors.Is(err, run.ErrLeaseLost) {
		t.Errorf("stale a commits: %v", err)
	}
	if err := s.ReleaseLease(ctx, "t1", "r1", "a", 1); !errors.Is(err, run.ErrLeaseLost) {
		t.Errorf("stale a releases: %v", err)
	}
	if err := s.ReleaseLease(ctx, "t1", "r1", "b", 2); err != nil {
		t.Fatalf("b releases: %v", err)
	}
	got, _ := s.GetRun(ctx, "t1", "r1")
	if got.LeaseOwner != "" || got.LeaseExpiresAt != nil || got.LeaseEpoch != 2 {
		t.Errorf("after release: owner %q expires %v epoch %d", got.LeaseOwner, got.LeaseExpiresAt, got.LeaseEpoch)
	}
	c, err := s.AcquireLease(ctx, "t1", "r1", "c", 0, time.Minute)
	if err != nil || c.Epoch != 3 {
		t.Fatalf("c after release: %+v %v", c, err)
	}
	done := commitReq(1, c, 1)
	done.Status = run.StatusCompleted
	done.FromStatuses = run.AllowedFrom(run.StatusCompleted)
	if _, _, err := s.Commit(ctx, "t1", "r1", done); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, "t1", "r1", "d", 0, time.Minute); !errors.Is(err, run.ErrRunNotActive) {
		t.Errorf("lease a completed run: %v", err)
	}
	if _, err := s.AcquireLease(ctx, "t1", "nope", "d", 0, time.Minute); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("lease a missing run: %v", err)
	}
}

func TestConcurrentCommittersOneWinnerPerRevision(t *testing.T) {
	s := openTestDB(t)
	ctx := ctxT(t)
	newRun(t, s, "t1", "r1")
	l, err := s.AcquireLease(ctx, "t1", "r1", "w", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const rounds, racers = 20, 8
	for round := 1; round <= rounds; round++ {
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := s.Commit(ctx, "t1", "r1", commitReq(int64(round), l, round*100+i))
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, run.ErrRevisionConflict):
					conflicts.Add(1)
				default:
					t.Errorf("round %d: unexpected error %v", round, err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != racers-1 {
			t.Fatalf("round %d: %d wins, %d conflicts", round, wins.Load(), conflicts.Load())
		}
	}
	evs, err := s.ListEvents(ctx, "t1", "r1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != rounds+1 {
		t.Fatalf("%d events, want %d", len(evs), rounds+1)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: gap", i, ev.Seq)
		}
	}
}

func TestForkCheckpointsAndIdempotency(t *testing.T) {
	s := openTestDB(t)
	ctx := ctxT(t)
	newRun(t, s, "t1", "r1")
	l, _ := s.AcquireLease(ctx, "t1", "r1", "w", 0, time.Minute)
	for i := 1; i <= 3; i++ {
		c := commitReq(int64(i), l, i)
		if i == 3 {
			c.Status = run.StatusCompleted
			c.FromStatuses = run.AllowedFrom(run.StatusCompleted)
		}
		if _, _, err := s.Commit(ctx, "t1", "r1", c); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := s.CreateCheckpoint(ctx, "t1", "r1", "mid", 2)
	if err != nil || cp.Revision != 2 {
		t.Fatalf("checkpoint: %+v %v", cp, err)
	}
	if _, err := s.CreateCheckpoint(ctx, "t1", "r1", "mid", 3); !errors.Is(err, run.ErrCheckpointExists) {
		t.Errorf("duplicate label: %v", err)
	}
	if _, err := s.CreateCheckpoint(ctx, "t1", "r1", "far", 9); !errors.Is(err, run.ErrRevisionNotFound) {
		t.Errorf("missing revision: %v", err)
	}
	if _, err := s.GetCheckpoint(ctx, "t1", "r1", "none"); !errors.Is(err, run.ErrCheckpointNotFound) {
		t.Errorf("missing label: %v", err)
	}
	if cps, err := s.ListCheckpoints(ctx, "t1", "r1", 0, "", 0); err != nil || len(cps) != 1 || cps[0].Label != "mid" {
		t.Errorf("list checkpoints: %+v %v", cps, err)
	}

	f, err := s.Fork(ctx, "t1", "r1", 2, run.NewRun{Run: run.Run{TenantID: "t1", RunID: "f1", ParentRunID: "r1", ParentRevision: 2}})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if f.StateRevision != 2 || !jsonEqual(t, f.State, json.RawMessage(`{"n":1}`)) || f.NextStep != "s2" ||
		f.Status != run.StatusRunning || f.ParentRunID != "r1" || f.ParentRevision != 2 || f.LeaseOwner != "" || f.LeaseEpoch != 0 {
		t.Errorf("fork at 2: %+v", f)
	}
	src, _ := s.ListEvents(ctx, "t1", "r1", 0, 2)
	dst, _ := s.ListEvents(ctx, "t1", "f1", 0, 100)
	if !reflect.DeepEqual(src, dst) {
		t.Errorf("forked events differ:\n%+v\n%+v", src, dst)
	}
	f2, err := s.Fork(ctx, "t1", "r1", 4, run.NewRun{Run: run.Run{TenantID: "t1", RunID: "f2", ParentRunID: "r1", ParentRevision: 4}})
	if err != nil || f2.Status != run.StatusSuspended {
		t.Errorf("fork of a completed revision: %+v %v", f2, err)
	}
	if _, err := s.Fork(ctx, "t1", "r1", 2, run.NewRun{Run: run.Run{TenantID: "t1", RunID: "f1"}}); !errors.Is(err, run.ErrAlreadyExists) {
		t.Errorf("fork onto an existing id: %v", err)
	}
	if _, err := s.Fork(ctx, "t1", "r1", 9, run.NewRun{Run: run.Run{TenantID: "t1", RunID: "f3"}}); !errors.Is(err, run.ErrRevisionNotFound) {
		t.Errorf("fork at a missing revision: %v", err)
	}
	if _, err := s.Fork(ctx, "t2", "r1", 2, run.NewRun{Run: run.Run{TenantID: "t2", RunID: "f3"}}); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("fork another tenant's run: %v", err)
	}

	mk := func(id, digest string) (run.Run, bool, error) {
		return s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: "t1", RunID: id, WorkflowName: "wf", StateSchemaVersion: 1,
			Status: run.StatusRunning, State: json.RawMessage(`{}`)}, IdempotencyKey: "k1", RequestDigest: digest})
	}
	first, created, err := mk("i1", "d1")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	again, created, err := mk("i1", "d1")
	if err != nil || created || again.RunID != first.RunID || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("replay: %+v %v %v", again, created, err)
	}
	if _, _, err := mk("i2", "d2"); !errors.Is(err, run.ErrIdempotencyMismatch) {
		t.Errorf("same key, other request: %v", err)
	}
	if _, _, err := s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: "t1", RunID: "i1", WorkflowName: "wf", StateSchemaVersion: 1}}); !errors.Is(err, run.ErrAlreadyExists) {
		t.Errorf("clashing id: %v", err)
	}
	// The same key in another tenant is another key.
	if _, created, err := s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: "t2", RunID: "i1", WorkflowName: "wf", StateSchemaVersion: 1},
		IdempotencyKey: "k1", RequestDigest: "d9"}); err != nil || !created {
		t.Errorf("same key in another tenant: %v %v", created, err)
	}
}

func TestRetentionAndListing(t *testing.T) {
	s := openTestDB(t)
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		for _, tenant := range []string{"t1", "t2"} {
			newRun(t, s, tenant, fmt.Sprintf("r%d", i))
		}
	}
	// Complete r0..r2 of both tenants.
	for i := 0; i < 3; i++ {
		for _, tenant := range []string{"t1", "t2"} {
			id := fmt.Sprintf("r%d", i)
			l, err := s.AcquireLease(ctx, tenant, id, "w", 0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c := commitReq(1, l, 1)
			c.Status = run.StatusCompleted
			c.FromStatuses = run.AllowedFrom(run.StatusCompleted)
			if _, _, err := s.Commit(ctx, tenant, id, c); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateCheckpoint(ctx, tenant, id, "end", 2); err != nil {
				t.Fatal(err)
			}
		}
	}
	page, err := s.ListRuns(ctx, "t1", run.ListFilter{Limit: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("first page: %d %v", len(page), err)
	}
	rest, err := s.ListRuns(ctx, "t1", run.ListFilter{Limit: 10, AfterCreated: page[1].CreatedAt, AfterRunID: page[1].RunID})
	if err != nil || len(rest) != 3 {
		t.Fatalf("second page: %d %v", len(rest), err)
	}
	done, err := s.ListRuns(ctx, "t1", run.ListFilter{Limit: 10, Status: run.StatusCompleted})
	if err != nil || len(done) != 3 {
		t.Fatalf("completed: %d %v", len(done), err)
	}

	if n, err := s.DeleteTerminalBefore(ctx, time.Now().Add(-time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("nothing is an hour old: %d %v", n, err)
	}
	n1, err := s.DeleteTerminalBefore(ctx, time.Now().Add(time.Hour), 4)
	if err != nil || n1 != 4 {
		t.Fatalf("first batch: %d %v", n1, err)
	}
	n2, err := s.DeleteTerminalBefore(ctx, time.Now().Add(time.Hour), 4)
	if err != nil || n2 != 2 {
		t.Fatalf("second batch: %d %v", n2, err)
	}
	var runs, events, cps int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM run_events), (SELECT count(*) FROM run_checkpoints)`).Scan(&runs, &events, &cps); err != nil {
		t.Fatal(err)
	}
	if runs != 4 || events != 4 || cps != 0 {
		t.Errorf("after retention: %d runs, %d events, %d checkpoints; want 4, 4, 0", runs, events, cps)
	}
}

func TestPoolSize(t *testing.T) {
	conn := testenv.PostgresURL(t)
	ctx := ctxT(t)
	for _, tc := range []struct {
		conn string
		want int32
	}{{conn, DefaultMaxConns}, {testenv.WithPostgresParam(conn, "pool_max_conns", "3"), 3}} {
		db, err := Open(ctx, tc.conn)
		if err != nil {
			t.Fatal(err)
		}
		got := db.Pool().Config().MaxConns
		db.Close()
		if got != tc.want {
			t.Errorf("MaxConns = %d, want %d", got, tc.want)
		}
	}
}
