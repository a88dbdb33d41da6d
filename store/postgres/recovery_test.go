package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

// Each subtest has a schema of its own: retention counts across tenants.
func TestRecoverySuite(t *testing.T) {
	storetest.RecoverySuite(t, func(t *testing.T) (run.Store, toolop.Store) {
		db, err := postgres.Open(context.Background(), testenv.PostgresURL(t))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(db.Close)
		return db, db
	})
}

// While another instance holds the retention lock, a batch deletes nothing
// and returns at once; once it is free, the batch runs.
func TestRetentionOneInstanceAtATime(t *testing.T) {
	ctx := context.Background()
	url := testenv.PostgresURL(t)
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	runs := run.NewService(db, run.Options{})
	for _, id := range []string{"a", "b"} {
		if _, _, err := runs.Create(ctx, "t", run.CreateRequest{RunID: id, WorkflowName: "wf"}, ""); err != nil {
			t.Fatal(err)
		}
		l, err := runs.AcquireLease(ctx, "t", id, "w", 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := runs.Commit(ctx, "t", id, run.CommitRequest{ExpectedRevision: 1, Lease: l,
			Event: run.EventInput{EventType: "step"}, State: []byte(`{}`), Status: run.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := db.Pool().Begin(ctx) // another instance, mid-batch
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, int32(0x4d455254)); err != nil {
		t.Fatal(err)
	}
	n, err := db.DeleteTerminalBefore(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || n != 0 {
		t.Fatalf("batch while another sweeps: %d %v, want 0", n, err)
	}
	if _, err := runs.Get(ctx, "t", "a"); err != nil {
		t.Fatalf("run deleted while another instance swept: %v", err)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err = db.DeleteTerminalBefore(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("batch after the other finished: %d %v, want 2", n, err)
	}
}
