package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
)

// TestRetainEvery runs the retention loop the server starts: its first pass
// deletes a finished run past the age and keeps a running one, and it stops
// when its context ends.
func TestRetainEvery(t *testing.T) {
	ctx := t.Context()
	svc := run.NewService(openTemp(t), run.Options{})
	for _, id := range []string{"old-done", "still-running"} {
		if _, _, err := svc.Create(ctx, "t1", run.CreateRequest{RunID: id, WorkflowName: "wf"}, ""); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	l, err := svc.AcquireLease(ctx, "t1", "old-done", "w", 0, time.Minute)
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if _, _, err := svc.Commit(ctx, "t1", "old-done", run.CommitRequest{ExpectedRevision: 1, Lease: l,
		Event: run.EventInput{EventType: "step"}, State: []byte(`{}`), Status: run.StatusCompleted}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	time.Sleep(20 * time.Millisecond) // the run must be older than the age below

	loopCtx, cancel := context.WithCancel(ctx)
	reports := make(chan int, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RetainEvery(loopCtx, 10*time.Millisecond, time.Hour, func(n int, err error) {
			if err != nil {
				t.Errorf("retention pass: %v", err)
			}
			reports <- n
		})
	}()
	if n := <-reports; n != 1 {
		t.Fatalf("first pass deleted %d runs, want 1", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("retention loop did not stop when its context ended")
	}
	if _, err := svc.Get(ctx, "t1", "old-done"); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("finished run after retention: %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, "t1", "still-running"); err != nil {
		t.Fatalf("running run after retention: %v", err)
	}
}
