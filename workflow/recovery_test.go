package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// waitFor polls cond until it holds or the bound passes.
func waitFor(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Serve wakes a suspended run when its approval is decided or expires, and
// leaves it alone (one check, then nothing) while nothing happened; finished
// runs are not looked at.
func TestServeWakesSuspendedRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var amount atomic.Int32
		amount.Store(100)
		w := approvalFlow(p, &amount, func(ctx context.Context) error { return nil })
		w.Steps[0].Run = func(ctx context.Context, sc *workflow.StepContext) error {
			ttl := time.Hour
			if sc.RunID() == "run-expire" {
				ttl = 300 * time.Millisecond
			}
			_, err := sc.Approve(ctx, workflow.ApprovalSpec{Request: map[string]int{"amount": 100}, TTL: ttl})
			return err
		}
		eng := newEngine(t, e, p, workflow.Options{PollInterval: 20 * time.Millisecond}, w)
		ctx := context.Background()
		for _, id := range []string{"run-decide", "run-expire"} {
			r, _, err := eng.Start(ctx, "appr", id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r, err = eng.DriveRun(ctx, r); err != nil || r.Status != run.StatusSuspended {
				t.Fatalf("%s: %s %q %v, want suspended", id, r.Status, r.StatusReason, err)
			}
		}
		if due, err := eng.Due(ctx); err != nil || len(due) != 0 {
			t.Fatalf("due before anything happened: %v %v", due, err)
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- eng.Serve(sctx) }()
		defer func() {
			stop()
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
		}()
		// The short approval expires: the run is woken, its resume finds the
		// approval expired and the step asks for a new one.
		waitFor(t, "a new approval after expiry", 10*time.Second, func() bool {
			as, _ := e.ops.ListApprovals(ctx, "default", "run-expire")
			return len(as) == 2
		})
		as, _ := e.ops.ListApprovals(ctx, "default", "run-decide")
		if len(as) != 1 {
			t.Fatalf("run-decide has %d approvals, want 1 (not resumed while pending)", len(as))
		}
		if _, err := e.ops.Decide(ctx, "default", as[0].ApprovalID, toolop.Decision{Approve: true, By: "lead"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "run-decide completed by Serve", 10*time.Second, func() bool {
			r, _ := e.runs.Get(ctx, "default", "run-decide")
			return r.Status == run.StatusCompleted
		})
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends, want 1", sends)
		}
	})
}

// DriveRun drives a run just started without reading it again, and a stale
// copy (the run moved on) is read again rather than trusted.
func TestDriveRunFresh(t *testing.T) {
	eachBackend(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var steps atomic.Int32
		step := func(name string) workflow.Step {
			return workflow.Step{Name: name, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				steps.Add(1)
				return sc.Set(name, true)
			}}
		}
		w := workflow.Workflow{Name: "three", Version: "1", Steps: []workflow.Step{step("a"), step("b"), step("c")}}
		eng := newEngine(t, e, p, workflow.Options{}, w)
		ctx := context.Background()
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("run-%d", i)
			r, created, err := eng.Start(ctx, "three", id, nil)
			if err != nil || !created {
				t.Fatalf("start: %v %v", created, err)
			}
			done, err := eng.DriveRun(ctx, r)
			if err != nil || done.Status != run.StatusCompleted || done.StateRevision != 4 {
				t.Fatalf("drive %s: %s rev %d %v", id, done.Status, done.StateRevision, err)
			}
			// The copy from Start is stale now: DriveRun must not run a step again.
			again, err := eng.DriveRun(ctx, r)
			if err != nil || again.Status != run.StatusCompleted || again.StateRevision != 4 {
				t.Fatalf("drive stale copy of %s: %s rev %d %v", id, again.Status, again.StateRevision, err)
			}
		}
		if n := steps.Load(); n != 9 {
			t.Fatalf("%d steps ran, want 9", n)
		}
		if _, err := eng.DriveRun(ctx, run.Run{TenantID: "default", RunID: "missing"}); !errors.Is(err, run.ErrNotFound) {
			t.Fatalf("drive a missing run: %v, want ErrNotFound", err)
		}
	})
}
