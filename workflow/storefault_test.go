package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// faultEnv is the in-memory twin behind the injector's rules.
func faultEnv(in *faultstore.Injector) env {
	faulty, _ := faultEnvs(in)
	return faulty
}

// faultEnvs is faultEnv and, over the same store, services without faults
// for the test's own checks.
func faultEnvs(in *faultstore.Injector) (faulty, clean env) {
	s := memstore.New()
	return env{runs: run.NewService(in.Runs(s), run.Options{}), ops: toolop.NewService(in.Ops(s), nil)},
		env{runs: run.NewService(s, run.Options{}), ops: toolop.NewService(s, nil)}
}

// stepCommit matches the commit of a completed step.
func stepCommit(step string) func(faultstore.Call) bool {
	return func(c faultstore.Call) bool {
		sc := c.Args[2].(run.StoreCommit)
		return sc.Event.EventType == workflow.EventStepCompleted && sc.Event.StepID == step
	}
}

// payThenNote pays, then notes; it counts how often each step body ran.
func payThenNote(p *provider, paid, noted *atomic.Int32, pause func(ctx context.Context) error) workflow.Workflow {
	return workflow.Workflow{Name: "pn", Version: "1", Steps: []workflow.Step{
		{Name: "pay", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			paid.Add(1)
			op, err := sc.Call(ctx, payCall(p, 10, ""))
			if err != nil {
				return err
			}
			if pause != nil {
				if err := pause(ctx); err != nil {
					return err
				}
			}
			return sc.Set("ref", op.ExternalRef)
		}},
		{Name: "note", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			noted.Add(1)
			return sc.Set("noted", true)
		}},
	}}
}

func finished(t *testing.T, e env, p *provider, r run.Run, runID string) {
	t.Helper()
	if r.Status != run.StatusCompleted || !strings.Contains(string(r.State), `"ref":"ref-`) || !strings.Contains(string(r.State), `"noted":true`) {
		t.Fatalf("run ended %s %q with state %s", r.Status, r.StatusReason, r.State)
	}
	if c := stepCounts(t, e, runID); c["pay"] != 1 || c["note"] != 1 {
		t.Fatalf("steps committed: %v, want each once", c)
	}
	if sends, applied := p.counts(); sends != 1 || applied != 1 {
		t.Fatalf("%d sends, %d applied; want the payment sent once", sends, applied)
	}
}

// The pay step's commit is applied but the worker sees an error: the next
// drive continues after it; the step body is not run again and the payment
// is not sent twice.
func TestLostStepCommitNotRedone(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "Commit", If: stepCommit("pay"), Action: faultstore.Lose, Times: 1})
	e, p := faultEnv(in), newProvider()
	var paid, noted atomic.Int32
	eng := newEngine(t, e, p, workflow.Options{Owner: "w1"}, payThenNote(p, &paid, &noted, nil))
	ctx := context.Background()
	if _, _, err := eng.Start(ctx, "pn", "run-lc", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Drive(ctx, "run-lc"); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("first drive: %v, want the lost commit's error", err)
	}
	if in.Applied("Commit") != 1 {
		t.Fatalf("the step commit was not applied underneath")
	}
	r, err := newEngine(t, e, p, workflow.Options{Owner: "w2"}, payThenNote(p, &paid, &noted, nil)).Drive(ctx, "run-lc")
	if err != nil {
		t.Fatalf("second drive: %v", err)
	}
	finished(t, e, p, r, "run-lc")
	if paid.Load() != 1 || noted.Load() != 1 {
		t.Fatalf("pay body ran %d times, note %d; a committed step must not run again", paid.Load(), noted.Load())
	}
}

// The ledger write between started and succeeded fails after the payment
// went out: the step fails, and the retry reconciles the operation through
// the provider's lookup instead of paying again.
func TestLedgerWriteFailsAfterSend(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "TransitionOperation", Action: faultstore.Fail, Times: 1,
		If: func(c faultstore.Call) bool { return c.Args[2].(toolop.Transition).To == toolop.StatusSucceeded }})
	e, p := faultEnv(in), newProvider()
	var paid, noted atomic.Int32
	eng := newEngine(t, e, p, workflow.Options{}, payThenNote(p, &paid, &noted, nil))
	ctx := context.Background()
	if _, _, err := eng.Start(ctx, "pn", "run-lw", nil); err != nil {
		t.Fatal(err)
	}
	r, err := eng.Drive(ctx, "run-lw")
	if err != nil {
		t.Fatalf("drive: %v", err)
	}
	if in.Fired("TransitionOperation") != 1 {
		t.Fatalf("the ledger fault never fired")
	}
	finished(t, e, p, r, "run-lw")
	op, _ := e.ops.Get(ctx, "default", toolop.OperationID("run-lw", "pay"))
	if op.Status != toolop.StatusSucceeded || op.Resolution != "reconciled: applied" || op.Attempts != 1 {
		t.Fatalf("operation %+v; want succeeded by reconciliation after one send", op)
	}
}

// The same, but the ledger write is applied and only its answer lost: the
// retry finds the operation succeeded and does not send again.
func TestLedgerAnswerLostAfterSend(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "TransitionOperation", Action: faultstore.Lose, Times: 1,
		If: func(c faultstore.Call) bool { return c.Args[2].(toolop.Transition).To == toolop.StatusSucceeded }})
	e, p := faultEnv(in), newProvider()
	var paid, noted atomic.Int32
	eng := newEngine(t, e, p, workflow.Options{}, payThenNote(p, &paid, &noted, nil))
	ctx := context.Background()
	if _, _, err := eng.Start(ctx, "pn", "run-la", nil); err != nil {
		t.Fatal(err)
	}
	r, err := eng.Drive(ctx, "run-la")
	if err != nil {
		t.Fatalf("drive: %v", err)
	}
	if in.Applied("TransitionOperation") != 1 {
		t.Fatalf("the lost ledger write was not applied underneath")
	}
	finished(t, e, p, r, "run-la")
	if op, _ := e.ops.Get(ctx, "default", toolop.OperationID("run-la", "pay")); op.Status != toolop.StatusSucceeded || op.Attempts != 1 {
		t.Fatalf("operation %+v; want succeeded after one send", op)
	}
}

// A lease renewal fails while the pay step is still running after its send:
// the worker stops without committing, and the next worker finishes the run
// from the ledger, without a second payment.
func TestLeaseRenewalFails(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "AcquireLease", Action: faultstore.Fail, Times: 1,
		If: func(c faultstore.Call) bool { return c.Args[3].(int64) > 0 }}) // a renewal names its epoch
	e, p := faultEnv(in), newProvider()
	var paid, noted atomic.Int32
	var first atomic.Bool
	first.Store(true)
	pause := func(ctx context.Context) error {
		if !first.Swap(false) {
			return nil
		}
		select { // outlive a heartbeat; the failed renewal ends ctx
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("the failed renewal did not stop the step")
		}
	}
	ttl := 300 * time.Millisecond
	eng := newEngine(t, e, p, workflow.Options{Owner: "w1", LeaseTTL: ttl}, payThenNote(p, &paid, &noted, pause))
	ctx := context.Background()
	if _, _, err := eng.Start(ctx, "pn", "run-lr", nil); err != nil {
		t.Fatal(err)
	}
	r0, _ := e.runs.Get(ctx, "default", "run-lr")
	if _, err := eng.Drive(ctx, "run-lr"); !errors.Is(err, faultstore.ErrInjected) || !strings.Contains(err.Error(), "renew lease") {
		t.Fatalf("first drive: %v, want the failed renewal", err)
	}
	if cur, _ := e.runs.Get(ctx, "default", "run-lr"); cur.StateRevision != r0.StateRevision {
		t.Fatalf("a worker that lost its lease committed: revision %d, was %d", cur.StateRevision, r0.StateRevision)
	}
	r, err := newEngine(t, e, p, workflow.Options{Owner: "w2", LeaseTTL: ttl}, payThenNote(p, &paid, &noted, pause)).Drive(ctx, "run-lr")
	if err != nil {
		t.Fatalf("second drive: %v", err)
	}
	finished(t, e, p, r, "run-lr")
	if paid.Load() != 2 {
		t.Fatalf("pay body ran %d times, want twice (the uncommitted attempt is redone)", paid.Load())
	}
}

// Store latency on every call, under a lease short enough to feel it, and
// random failures before calls: every run still ends completed, each step
// committed once, each payment sent once.
func TestSlowAndFlakyStore(t *testing.T) {
	in := faultstore.New(42,
		faultstore.Rule{Action: faultstore.Delay, Delay: 2 * time.Millisecond, Probability: 0.5},
		faultstore.Rule{Method: "Commit", Action: faultstore.Fail, Probability: 0.2},
		faultstore.Rule{Method: "GetRun", Action: faultstore.Fail, Probability: 0.1},
	)
	e, clean := faultEnvs(in)
	ctx := context.Background()
	for i := range 5 {
		p := newProvider()
		var paid, noted atomic.Int32
		eng := newEngine(t, e, p, workflow.Options{}, payThenNote(p, &paid, &noted, nil))
		id := "run-f" + string(rune('0'+i))
		for {
			if _, _, err := eng.Start(ctx, "pn", id, nil); err == nil {
				break
			}
		}
		var r run.Run
		for attempt := 0; ; attempt++ {
			var err error
			if r, err = eng.Drive(ctx, id); err == nil && r.Status.Terminal() {
				break
			}
			if err != nil && !errors.Is(err, faultstore.ErrInjected) && !run.IsConflict(err) {
				t.Fatalf("drive %s: %v", id, err)
			}
			if attempt > 200 {
				t.Fatalf("run %s did not finish: %v", id, err)
			}
		}
		finished(t, clean, p, r, id)
	}
	if in.Fired("Commit") == 0 {
		t.Fatal("no commit failed: the test tested nothing")
	}
}

// The ledger's move to started is applied but its answer lost, so nothing
// was sent: the retry finds the operation in doubt, the lookup says not
// applied, and it is sent once, with the same key.
func TestLedgerStartAnswerLost(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "TransitionOperation", Action: faultstore.Lose, Times: 1,
		If: func(c faultstore.Call) bool { return c.Args[2].(toolop.Transition).To == toolop.StatusStarted }})
	e, p := faultEnv(in), newProvider()
	var paid, noted atomic.Int32
	eng := newEngine(t, e, p, workflow.Options{}, payThenNote(p, &paid, &noted, nil))
	ctx := context.Background()
	if _, _, err := eng.Start(ctx, "pn", "run-ls", nil); err != nil {
		t.Fatal(err)
	}
	r, err := eng.Drive(ctx, "run-ls")
	if err != nil {
		t.Fatalf("drive: %v", err)
	}
	if in.Applied("TransitionOperation") != 1 {
		t.Fatalf("the lost start was not applied underneath")
	}
	finished(t, e, p, r, "run-ls")
	op, _ := e.ops.Get(ctx, "default", toolop.OperationID("run-ls", "pay"))
	if op.Status != toolop.StatusSucceeded || !strings.Contains(op.Resolution, "not applied") {
		t.Fatalf("operation %+v; want succeeded after being reconciled as not applied", op)
	}
}

// Serve over a store that fails, loses answers and stalls at random, on
// every method: every run still completes, each step is committed once and
// each payment is sent and applied once.
func TestServeOnFlakyStore(t *testing.T) {
	in := faultstore.New(7,
		faultstore.Rule{Action: faultstore.Delay, Delay: time.Millisecond, Probability: 0.2},
		faultstore.Rule{Action: faultstore.Fail, Probability: 0.05},
		faultstore.Rule{Method: "Commit", Action: faultstore.Lose, Probability: 0.1},
		faultstore.Rule{Method: "TransitionOperation", Action: faultstore.Lose, Probability: 0.1},
		faultstore.Rule{Method: "PrepareOperation", Action: faultstore.Lose, Probability: 0.1},
		faultstore.Rule{Method: "AcquireLease", Action: faultstore.Lose, Probability: 0.1},
		faultstore.Rule{Method: "ReleaseLease", Action: faultstore.Lose, Probability: 0.1},
		faultstore.Rule{Method: "CreateRun", Action: faultstore.Lose, Probability: 0.1},
		faultstore.Rule{Method: "AckWakeups", Action: faultstore.Lose, Probability: 0.2},
	)
	e, clean := faultEnvs(in)
	p := newProvider()
	var paid, noted atomic.Int32
	w := payThenNote(p, &paid, &noted, nil)
	for i := range w.Steps {
		w.Steps[i].MaxAttempts = 1000 // injected errors fail attempts; none may fail the run
	}
	eng := newEngine(t, e, p, workflow.Options{PollInterval: 10 * time.Millisecond, LeaseTTL: time.Second}, w)
	ctx := context.Background()
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "run-s" + string(rune('a'+i))
		waitFor(t, "start "+ids[i], 10*time.Second, func() bool {
			_, _, err := eng.Start(ctx, "pn", ids[i], nil)
			return err == nil
		})
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
	waitFor(t, "every run completed by Serve", 60*time.Second, func() bool {
		for _, id := range ids {
			if r, err := clean.runs.Get(ctx, "default", id); err != nil || r.Status != run.StatusCompleted {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if c := stepCounts(t, clean, id); c["pay"] != 1 || c["note"] != 1 {
			t.Fatalf("run %s: steps committed %v, want each once", id, c)
		}
	}
	if sends, applied := p.counts(); sends != n || applied != n {
		t.Fatalf("%d sends, %d applied for %d runs; want each payment sent once", sends, applied, n)
	}
	if in.Fired("Commit") == 0 || in.Applied("Commit")+in.Applied("TransitionOperation") == 0 {
		t.Fatalf("faults fired: commit %d, lost answers applied %d/%d: the test tested little",
			in.Fired("Commit"), in.Applied("Commit"), in.Applied("TransitionOperation"))
	}
	t.Logf("faults: commit %d (lost %d), ledger %d (lost %d), acks %d, reads %d",
		in.Fired("Commit"), in.Applied("Commit"), in.Fired("TransitionOperation"), in.Applied("TransitionOperation"),
		in.Fired("AckWakeups"), in.Fired("GetRun"))
}

// A fresh workflow of ten steps costs the store one create (with the
// lease) and ten commits through Execute, and one create, one lease and
// ten commits through Start and DriveRun: no read, no schema lookup, no
// release of a finished run's lease.
func TestFreshRunStoreCalls(t *testing.T) {
	steps := make([]workflow.Step, 10)
	for i := range steps {
		steps[i] = workflow.Step{Name: fmt.Sprintf("s%d", i), Run: func(context.Context, *workflow.StepContext) error { return nil }}
	}
	w := workflow.Workflow{Name: "ten", Version: "1", Steps: steps}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		drive func(eng *workflow.Engine, id string) (run.Run, error)
		want  map[string]int
	}{
		{"Execute", func(eng *workflow.Engine, id string) (run.Run, error) {
			return eng.Execute(ctx, "ten", id, map[string]int{"n": 1})
		},
			map[string]int{"CreateRun": 1, "AcquireLease": 0}},
		{"StartDriveRun", func(eng *workflow.Engine, id string) (run.Run, error) {
			r, _, err := eng.Start(ctx, "ten", id, map[string]int{"n": 1})
			if err != nil {
				return r, err
			}
			return eng.DriveRun(ctx, r)
		}, map[string]int{"CreateRun": 1, "AcquireLease": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := faultstore.New(1)
			eng := newEngine(t, faultEnv(in), newProvider(), workflow.Options{LeaseTTL: time.Minute}, w)
			r, err := tc.drive(eng, "run-"+tc.name)
			if err != nil || r.Status != run.StatusCompleted || r.StateRevision != 11 {
				t.Fatalf("drive: %s rev %d %v", r.Status, r.StateRevision, err)
			}
			tc.want["Commit"] = 10
			for _, m := range []string{"CreateRun", "AcquireLease", "Commit", "GetRun", "ListSchemas", "ReleaseLease", "GetSchema"} {
				if got := in.Calls(m); got != tc.want[m] {
					t.Errorf("%s: %d calls, want %d", m, got, tc.want[m])
				}
			}
		})
	}
}

// Execute of a run id whose create committed while the caller saw an
// error continues that run, each step once.
func TestExecuteAfterLostCreate(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "CreateRun", Action: faultstore.Lose, Times: 1})
	var ran atomic.Int32
	w := workflow.Workflow{Name: "two", Version: "1", Steps: []workflow.Step{
		{Name: "a", Run: func(ctx context.Context, sc *workflow.StepContext) error { ran.Add(1); return sc.Set("a", true) }},
		{Name: "b", Run: func(ctx context.Context, sc *workflow.StepContext) error { ran.Add(1); return sc.Set("b", true) }},
	}}
	eng := newEngine(t, faultEnv(in), newProvider(), workflow.Options{LeaseTTL: time.Minute}, w)
	ctx := context.Background()
	if _, err := eng.Execute(ctx, "two", "run-lost", nil); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("execute with the create's answer lost: %v, want the injected error", err)
	}
	r, err := eng.Execute(ctx, "two", "run-lost", nil)
	if err != nil || r.Status != run.StatusCompleted || r.StateRevision != 3 {
		t.Fatalf("execute again: %s rev %d %v", r.Status, r.StateRevision, err)
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("%d step bodies ran, want 2", n)
	}
	if _, err := eng.Execute(ctx, "nope", "x", nil); !errors.Is(err, workflow.ErrUnknownWorkflow) {
		t.Fatalf("execute an unknown workflow: %v", err)
	}
}
