package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
	"github.com/mementohq/memento/workflow/control"
)

// During a rolling deploy, workers of two versions serve one store. A
// worker whose code cannot continue a run's version leaves it to one that
// can: it neither runs its own steps on a fresh run of the other version
// nor suspends (by a refused resume) one that had committed steps, which
// no worker would take up again.
func TestServeLeavesRunsOfOtherVersions(t *testing.T) {
	eachBackend(t, func(t *testing.T, open backendFn) {
		e := open(t)
		ctx := context.Background()
		var v1Steps, v2Steps atomic.Int32
		flow := func(version string, n *atomic.Int32, block bool) workflow.Workflow {
			return workflow.Workflow{Name: "wf", Version: version, Steps: []workflow.Step{
				{Name: "a", Run: func(ctx context.Context, sc *workflow.StepContext) error { n.Add(1); return nil }},
				{Name: "b", Run: func(ctx context.Context, sc *workflow.StepContext) error {
					if block {
						<-ctx.Done()
						return ctx.Err()
					}
					n.Add(1)
					return nil
				}},
			}}
		}
		opts := workflow.Options{LeaseTTL: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond}
		v1 := workflow.New(e.runs, e.ops, opts)
		v2 := workflow.New(e.runs, e.ops, opts)
		if err := v1.Register(flow("1", &v1Steps, true)); err != nil {
			t.Fatal(err)
		}
		if err := v2.Register(flow("2", &v2Steps, false)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := v1.Start(ctx, "wf", "fresh", nil); err != nil {
			t.Fatal(err)
		}
		// "mid" commits step a under v1, then its worker stops inside b.
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		if _, err := v1.Execute(cctx, "wf", "mid", nil); err == nil {
			t.Fatal("mid: want the interrupted step's error")
		}
		cancel()

		if _, err := v2.Execute(ctx, "wf", "fresh", nil); !errors.Is(err, workflow.ErrIncompatibleVersion) {
			t.Fatalf("v2 Execute of a v1 run: err %v, want ErrIncompatibleVersion", err)
		}
		sctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		_ = v2.Serve(sctx)
		cancel()
		if n := v2Steps.Load(); n != 0 {
			t.Fatalf("v2 code ran %d steps of v1 runs", n)
		}
		for _, id := range []string{"fresh", "mid"} {
			r, err := e.runs.Get(ctx, "default", id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != run.StatusRunning {
				t.Fatalf("run %s after a v2 worker served: %s (%s), want running", id, r.Status, r.StatusReason)
			}
		}

		// The v1 worker continues both.
		if err := v1.Register(flow("1", &v1Steps, false)); err != nil {
			t.Fatal(err)
		}
		sctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		go func() { _ = v1.Serve(sctx) }()
		for _, id := range []string{"fresh", "mid"} {
			for {
				r, err := e.runs.Get(ctx, "default", id)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status == run.StatusCompleted {
					break
				}
				if r.Status != run.StatusRunning || sctx.Err() != nil {
					t.Fatalf("run %s: %s (%s), want completed by v1", id, r.Status, r.StatusReason)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
}

// A Call without Send is refused before the ledger hears of it: it used to
// panic after the operation was marked started, so an operation never sent
// was in doubt and the run suspended for an operator. A Call without Key is
// refused too: every keyless call of a run was one operation, so a second
// one with the same request was answered with the first one's result and
// never sent.
func TestCallWithoutSendTouchesNoLedger(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		send := func(context.Context, string) (workflow.Reply, error) { return workflow.Reply{}, nil }
		eng := newEngine(t, e, p, workflow.Options{}, workflow.Workflow{Name: "wf", Version: "1", Steps: []workflow.Step{
			{Name: "a", MaxAttempts: 1, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				_, err := sc.Call(ctx, workflow.Call{Tool: "pay", Key: "", Request: 1, Send: send})
				if !errors.Is(err, run.ErrInvalidInput) {
					t.Errorf("Call without Key: err %v, want run.ErrInvalidInput", err)
				}
				_, err = sc.Call(ctx, workflow.Call{Tool: "pay", Key: "pay", Request: 1})
				if !errors.Is(err, run.ErrInvalidInput) {
					t.Errorf("Call without Send: err %v, want run.ErrInvalidInput", err)
				}
				return err
			}},
		}})
		r, err := eng.Execute(context.Background(), "wf", "r", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != run.StatusFailed {
			t.Fatalf("status %s (%s), want failed", r.Status, r.StatusReason)
		}
		ops, err := e.ops.List(context.Background(), "default", "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != 0 {
			t.Fatalf("%d operations in the ledger (first %s), want none", len(ops), ops[0].Status)
		}
	})
}

// A step may make its tool calls in parallel: the StepContext is shared by
// the step's goroutines. Concurrent Calls wrote the control record's tool
// map unguarded ("fatal error: concurrent map writes", the whole worker
// process down).
func TestParallelCallsInOneStep(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e := open(t)
		eng := workflow.New(e.runs, e.ops, workflow.Options{})
		const n = 64
		for i := 0; i < n; i++ {
			if err := eng.RegisterTool(toolop.Tool{Name: fmt.Sprintf("t%d", i), ContractVersion: "v1"}); err != nil {
				t.Fatal(err)
			}
		}
		err := eng.Register(workflow.Workflow{Name: "wf", Version: "1", Steps: []workflow.Step{{Name: "a", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := sc.Call(ctx, workflow.Call{Tool: fmt.Sprintf("t%d", i), Key: fmt.Sprint(i), Request: i,
						Send: func(ctx context.Context, k string) (workflow.Reply, error) {
							return workflow.Reply{ExternalRef: k}, nil
						}})
					errs <- err
					sc.Spend(1, 1)
					_ = sc.Set(fmt.Sprint("k", i), i)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 100; r++ {
			got, err := eng.Execute(context.Background(), "wf", fmt.Sprint("r", r), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != run.StatusCompleted {
				t.Fatalf("run %d: %s (%s)", r, got.Status, got.StatusReason)
			}
			top, ctl, err := control.ReadSplit(got.State)
			if err != nil {
				t.Fatal(err)
			}
			if len(ctl.Tools) != n || ctl.Spent.Tokens != n || len(top) != n+1 {
				t.Fatalf("run %d: %d tools, %d tokens, %d state keys; want %d, %d, %d", r, len(ctl.Tools), ctl.Spent.Tokens, len(top), n, n, n+1)
			}
		}
	})
}

// A LeaseTTL the run service cannot renew is refused before a run is
// created: Execute created the run with it, then the heartbeat's ticker
// (LeaseTTL/3) panicked the process for a TTL under 3ns, and for one under
// run.MinLeaseTTL the step was cut short by a renewal the service refused.
func TestExecuteRefusesUnusableLeaseTTL(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e := open(t)
		for _, ttl := range []time.Duration{2, time.Millisecond} {
			eng := workflow.New(e.runs, e.ops, workflow.Options{LeaseTTL: ttl})
			if err := eng.Register(workflow.Workflow{Name: "wf", Version: "1", Steps: []workflow.Step{
				{Name: "a", Run: func(ctx context.Context, sc *workflow.StepContext) error { return nil }}}}); err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprint("ttl-", int64(ttl))
			if _, err := eng.Execute(context.Background(), "wf", id, nil); !errors.Is(err, run.ErrInvalidInput) {
				t.Fatalf("LeaseTTL %s: err %v, want run.ErrInvalidInput", ttl, err)
			}
			if _, err := e.runs.Get(context.Background(), "default", id); !errors.Is(err, run.ErrNotFound) {
				t.Fatalf("LeaseTTL %s: the run was created (err %v)", ttl, err)
			}
		}
	})
}
