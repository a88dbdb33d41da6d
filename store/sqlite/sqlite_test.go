package sqlite_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/storetest"
)

func openTemp(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "nested", "dir", "memento.db"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func TestRunStoreSuite(t *testing.T) {
	storetest.RunStoreSuite(t, func(t *testing.T) run.Store { return openTemp(t) })
}

func TestOpenDirAndReopen(t *testing.T) {
	ctx := t.Context()
	// Characters that mean something in a URI must still name a plain file.
	dir := filepath.Join(t.TempDir(), "data dir?#%41")
	db, err := sqlite.OpenDir(ctx, dir)
	if err != nil {
		t.Fatalf("open dir: %v", err)
	}
	want := filepath.Join(dir, sqlite.FileName)
	if db.Path() != want {
		t.Fatalf("path %q, want %q", db.Path(), want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("database file not at %s: %v", want, err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	svc := run.NewService(db, run.Options{})
	r, _, err := svc.Create(ctx, "t1", run.CreateRequest{RunID: "r1", WorkflowName: "wf", State: []byte(`{"kept":true}`)}, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	applied := countRows(t, db, "schema_migrations")
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	db, err = sqlite.Open(ctx, want)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	got, err := db.GetRun(ctx, "t1", "r1")
	if err != nil || string(got.State) != `{"kept":true}` || !got.CreatedAt.Equal(r.CreatedAt) {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	if n := countRows(t, db, "schema_migrations"); n != applied {
		t.Fatalf("reopen changed schema_migrations from %d to %d rows", applied, n)
	}
}

func countRows(t *testing.T, db *sqlite.DB, table string) int {
	t.Helper()
	var n int
	if err := db.SQL().QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestMigrationsRecorded(t *testing.T) {
	db := openTemp(t)
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatalf("read migrations dir: %v", err)
	}
	var want []string
	for _, f := range files {
		if filepath.Ext(f.Name()) == ".sql" {
			want = append(want, f.Name())
		}
	}
	rows, err := db.SQL().QueryContext(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatalf("query schema_migrations: %v", err)
	}
	var got []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatalf("scan: %v", err)
		}
		got = append(got, v)
	}
	rows.Close()
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("applied migrations %v, want every file in migrations/: %v", got, want)
	}
}

func TestPragmas(t *testing.T) {
	db := openTemp(t)
	ctx := t.Context()
	for _, c := range []struct{ pragma, want string }{
		{"journal_mode", "wal"}, {"foreign_keys", "1"}, {"synchronous", "2"}, {"busy_timeout", "10000"},
	} {
		var got string
		if err := db.SQL().QueryRowContext(ctx, "PRAGMA "+c.pragma).Scan(&got); err != nil {
			t.Fatalf("pragma %s: %v", c.pragma, err)
		}
		if got != c.want {
			t.Fatalf("pragma %s = %s, want %s", c.pragma, got, c.want)
		}
	}
}

// TestRawStorage checks what lands on disk: unix microseconds, tenant-first
// keys, JSON text as sent, and no rows left behind by retention.
func TestRawStorage(t *testing.T) {
	db := openTemp(t)
	ctx := t.Context()
	svc := run.NewService(db, run.Options{})
	r, _, err := svc.Create(ctx, "tenant-a", run.CreateRequest{RunID: "r1", WorkflowName: "wf", State: []byte(`{"b":1,"a":2}`)}, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var created int64
	var state string
	if err := db.SQL().QueryRowContext(ctx, "SELECT created_at, state FROM runs WHERE tenant_id = ? AND run_id = ?", "tenant-a", "r1").Scan(&created, &state); err != nil {
		t.Fatalf("raw run: %v", err)
	}
	if created != r.CreatedAt.UnixMicro() || state != `{"b":1,"a":2}` {
		t.Fatalf("raw created_at %d state %s, want %d and the state as sent", created, state, r.CreatedAt.UnixMicro())
	}
	l, err := svc.AcquireLease(ctx, "tenant-a", "r1", "w", 0, time.Minute)
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	var expires int64
	if err := db.SQL().QueryRowContext(ctx, "SELECT lease_expires_at FROM runs WHERE tenant_id = ? AND run_id = ?", "tenant-a", "r1").Scan(&expires); err != nil || expires != l.ExpiresAt.UnixMicro() {
		t.Fatalf("raw lease_expires_at %d (err %v), want %d", expires, err, l.ExpiresAt.UnixMicro())
	}
	if _, _, err := svc.Commit(ctx, "tenant-a", "r1", run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "done"}, State: []byte(`{}`), Status: run.StatusCompleted}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if _, err := db.CreateCheckpoint(ctx, "tenant-a", "r1", "end", 2); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if n := countRows(t, db, "run_events"); n != 2 {
		t.Fatalf("%d event rows, want 2", n)
	}
	if n, err := db.DeleteTerminalBefore(ctx, time.Now().Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("retention: %d %v", n, err)
	}
	for _, table := range []string{"runs", "run_events", "run_checkpoints"} {
		if n := countRows(t, db, table); n != 0 {
			t.Fatalf("%d rows left in %s after retention", n, table)
		}
	}
}

// TestTwoHandlesOneFile races committers through two handles on one file, as
// a CLI and a server would: BEGIN IMMEDIATE and busy_timeout make them queue,
// so every loser sees a revision conflict, never SQLITE_BUSY.
func TestTwoHandlesOneFile(t *testing.T) {
	const perHandle, rounds = 4, 10
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "shared.db")
	var handles []*sqlite.DB
	for range 2 {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer db.Close()
		handles = append(handles, db)
	}
	svc0 := run.NewService(handles[0], run.Options{})
	if _, _, err := svc0.Create(ctx, "t", run.CreateRequest{RunID: "r", WorkflowName: "wf"}, ""); err != nil {
		t.Fatalf("create: %v", err)
	}
	l, err := svc0.AcquireLease(ctx, "t", "r", "w", 0, time.Minute)
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	for round := range rounds {
		rev := int64(round + 1)
		var (
			mu   sync.Mutex
			wins int
			errs []error
			wg   sync.WaitGroup
		)
		start := make(chan struct{})
		for _, db := range handles {
			svc := run.NewService(db, run.Options{})
			for range perHandle {
				wg.Go(func() {
					<-start
					_, _, err := svc.Commit(ctx, "t", "r", run.CommitRequest{ExpectedRevision: rev, Lease: l,
						Event: run.EventInput{EventType: "step"}, State: []byte(`{}`)})
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins++
					} else if !errors.Is(err, run.ErrRevisionConflict) {
						errs = append(errs, err)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 || wins != 1 {
			t.Fatalf("round %d: %d winners, unexpected errors %v", round, wins, errs)
		}
	}
	got, err := handles[1].GetRun(ctx, "t", "r")
	if err != nil || got.StateRevision != rounds+1 {
		t.Fatalf("final revision %d (err %v), want %d", got.StateRevision, err, rounds+1)
	}
}

// TestConcurrentFirstOpens: several handles opening one new file at the same
// moment (a demo and `memento serve` started together) all open it, and the
// migrations are applied once.
func TestConcurrentFirstOpens(t *testing.T) {
	const openers, rounds = 6, 10
	for round := range rounds {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("new-%d.db", round))
		start := make(chan struct{})
		errs := make([]error, openers)
		dbs := make([]*sqlite.DB, openers)
		var wg sync.WaitGroup
		for i := range openers {
			wg.Go(func() {
				<-start
				dbs[i], errs[i] = sqlite.Open(t.Context(), path)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: opener %d: %v", round, i, err)
			}
			defer dbs[i].Close()
		}
		var n, distinct int
		if err := dbs[0].SQL().QueryRowContext(t.Context(), "SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		if n == 0 || n != distinct {
			t.Fatalf("round %d: %d migration rows for %d versions", round, n, distinct)
		}
	}
}
