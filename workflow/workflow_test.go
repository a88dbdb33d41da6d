package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
	"github.com/mementohq/memento/workflow/control"
)

var errTransport = errors.New("read tcp: connection reset by peer")

type sendReply struct{ ref string }

// payCall is a Call to the provider for a given amount.
func payCall(p *provider, amount int, approval string) workflow.Call {
	send := p.send(amount)
	return workflow.Call{
		Tool: "pay", Key: "pay", Request: map[string]int{"amount": amount}, RequireApproval: approval,
		Send: func(ctx context.Context, key string) (workflow.Reply, error) {
			r, err := send(ctx, key)
			return workflow.Reply{ExternalRef: r.ref}, err
		},
	}
}

func newEngine(t *testing.T, e env, p *provider, opts workflow.Options, w workflow.Workflow) *workflow.Engine {
	t.Helper()
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 2 * time.Second
	}
	opts.RetryBackoff = time.Millisecond
	eng := workflow.New(e.runs, e.ops, opts)
	if err := eng.RegisterTool(toolop.Tool{Name: "pay", ContractVersion: "v1", Lookup: p.lookup}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(w); err != nil {
		t.Fatal(err)
	}
	return eng
}

func stepCounts(t *testing.T, e env, runID string) map[string]int {
	t.Helper()
	evs, err := e.runs.Events(context.Background(), "default", runID, 0, run.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event seq %d at position %d", ev.Seq, i)
		}
		if ev.EventType == workflow.EventStepCompleted {
			m[ev.StepID]++
		}
	}
	return m
}

// A step that committed is never run again: after an interrupted execution
// the next worker resumes at the step that did not commit.
func TestCommittedStepNeverRedecided(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var decided atomic.Int32
		reached := make(chan struct{}, 1)
		var interrupt atomic.Bool
		interrupt.Store(true)
		w := workflow.Workflow{Name: "wf", Version: "1", Steps: []workflow.Step{
			{Name: "decide", Run: func(ctx context.Context, sc *workflow.StepContext) error {
				decided.Add(1)
				sc.Spend(100, 5)
				return sc.Set("decision", fmt.Sprintf("d-%d", decided.Load()))
			}},
			{Name: "act", Run: func(ctx context.Context, sc *workflow.StepContext) error {
				if interrupt.Load() {
					reached <- struct{}{}
					<-ctx.Done()
					return ctx.Err()
				}
				_, err := sc.Call(ctx, payCall(p, 10, ""))
				return err
			}},
		}}
		ctx, cancel := context.WithCancel(context.Background())
		e1 := newEngine(t, e, p, workflow.Options{Owner: "w1"}, w)
		if _, _, err := e1.Start(ctx, "wf", "run-1", map[string]string{"order": "o1"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := e1.Drive(ctx, "run-1"); done <- err }()
		<-reached
		cancel()
		if err := <-done; err == nil {
			t.Fatalf("interrupted drive returned no error")
		}
		interrupt.Store(false)
		e2 := newEngine(t, e, p, workflow.Options{Owner: "w2"}, w)
		r, err := e2.Drive(context.Background(), "run-1")
		if err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("second drive: %s %v", r.Status, err)
		}
		if decided.Load() != 1 || !strings.Contains(string(r.State), `"decision":"d-1"`) {
			t.Fatalf("decide ran %d times; state %s", decided.Load(), r.State)
		}
		if c := stepCounts(t, e, "run-1"); c["decide"] != 1 || c["act"] != 1 {
			t.Fatalf("steps committed: %v", c)
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends, want 1", sends)
		}
		ctl, _, _ := control.Read(r.State)
		if ctl.Spent.Steps != 2 || ctl.Spent.Tokens != 100 || ctl.Spent.CostMicros != 5 || ctl.Tools["pay"] != "v1" {
			t.Fatalf("control after completion: %+v", ctl)
		}
		// Starting the same run again returns it, it does not make another.
		if _, created, err := e2.Start(context.Background(), "wf", "run-1", nil); err != nil || created {
			t.Fatalf("second start: created=%v %v", created, err)
		}
	})
}

// Several workers driving one run at once never commit the same revision
// twice: every step is committed exactly once and the log has no gap.
func TestWorkersRaceOneRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var runsOf [10]atomic.Int32
		var steps []workflow.Step
		for i := 0; i < 10; i++ {
			steps = append(steps, workflow.Step{Name: fmt.Sprintf("s%d", i), Run: func(ctx context.Context, sc *workflow.StepContext) error {
				runsOf[i].Add(1)
				return sc.Set(fmt.Sprintf("s%d", i), i)
			}})
		}
		w := workflow.Workflow{Name: "race", Version: "1", Steps: steps}
		engines := make([]*workflow.Engine, 4)
		for i := range engines {
			engines[i] = newEngine(t, e, p, workflow.Options{Owner: fmt.Sprintf("w%d", i), LeaseTTL: time.Second}, w)
		}
		ctx := context.Background()
		for n := 0; n < 5; n++ {
			id := fmt.Sprintf("run-%d", n)
			if _, _, err := engines[0].Start(ctx, "race", id, nil); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var held atomic.Int32
			for _, eng := range engines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						r, err := eng.Drive(ctx, id)
						if err == nil && r.Status.Terminal() {
							return
						}
						if err != nil && !run.IsConflict(err) {
							t.Errorf("drive: %v", err)
							return
						}
						held.Add(1)
						r, _ = e.runs.Get(ctx, "default", id)
						if r.Status.Terminal() {
							return
						}
						time.Sleep(5 * time.Millisecond) // back off while another worker holds the lease
					}
				}()
			}
			wg.Wait()
			c := stepCounts(t, e, id)
			for i := 0; i < 10; i++ {
				if c[fmt.Sprintf("s%d", i)] != 1 {
					t.Fatalf("run %s: step s%d committed %d times: %v", id, i, c[fmt.Sprintf("s%d", i)], c)
				}
			}
		}
		// A stale owner cannot commit: take a lease, let it expire, let another take it.
		if _, _, err := engines[0].Start(ctx, "race", "run-stale", nil); err != nil {
			t.Fatal(err)
		}
		old, err := e.runs.AcquireLease(ctx, "default", "run-stale", "sleeper", 0, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // real lease expiry
		res, err := engines[1].Resume(ctx, "run-stale")
		if err != nil || res.Lease.Epoch != old.Epoch+1 {
			t.Fatalf("takeover: %+v %v", res.Lease, err)
		}
		r := res.Run
		_, _, err = e.runs.Commit(ctx, "default", "run-stale", run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: old, State: r.State, NextStep: r.NextStep, Event: run.EventInput{EventType: "step.completed"}})
		if !errors.Is(err, run.ErrLeaseLost) {
			t.Fatalf("stale owner commit: %v, want ErrLeaseLost", err)
		}
		if _, _, err := e.runs.Commit(ctx, "default", "run-stale", run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: res.Lease, State: r.State, NextStep: r.NextStep, Event: run.EventInput{EventType: "step.completed"}}); err != nil {
			t.Fatalf("new owner commit: %v", err)
		}
		if _, _, err := e.runs.Commit(ctx, "default", "run-stale", run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: res.Lease, State: r.State, NextStep: r.NextStep, Event: run.EventInput{EventType: "step.completed"}}); !errors.Is(err, run.ErrRevisionConflict) {
			t.Fatalf("second commit of one revision: %v, want ErrRevisionConflict", err)
		}
	})
}

// A send whose answer is lost and a lookup with no authority: the operation
// stays unknown, nothing is sent again, the run is suspended naming it; an
// operator's resolution lets it finish without another send.
func TestNonAuthoritativeSuspends(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		p.failTransport, p.authoritative = true, false
		w := workflow.Workflow{Name: "pay", Version: "1", Steps: []workflow.Step{
			{Name: "pay", Run: func(ctx context.Context, sc *workflow.StepContext) error {
				_, err := sc.Call(ctx, payCall(p, 10, ""))
				return err
			}},
		}}
		eng := newEngine(t, e, p, workflow.Options{}, w)
		ctx := context.Background()
		_, _, _ = eng.Start(ctx, "pay", "run-na", nil)
		r, err := eng.Drive(ctx, "run-na")
		opID := toolop.OperationID("run-na", "pay")
		if err != nil || r.Status != run.StatusSuspended || !strings.Contains(r.StatusReason, opID) {
			t.Fatalf("drive: %s %q %v; want suspended naming %s", r.Status, r.StatusReason, err, opID)
		}
		op, _ := e.ops.Get(ctx, "default", opID)
		if op.Status != toolop.StatusUnknown || op.Attempts != 1 {
			t.Fatalf("operation %+v, want unknown after one attempt", op)
		}
		if eng.Ready(ctx, r) {
			t.Fatalf("run ready while the operation is unknown")
		}
		// A resume now is refused by the operations check and sends nothing.
		if _, err := eng.Drive(ctx, "run-na"); !errors.Is(err, resume.ErrRefused) {
			t.Fatalf("drive while unknown: %v, want ErrRefused", err)
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends, want 1 (nothing retried)", sends)
		}
		if _, err := e.ops.Resolve(ctx, "default", opID, toolop.Resolution{Outcome: "applied", ExternalRef: "ref-manual", By: "ops"}); err != nil {
			t.Fatal(err)
		}
		r, _ = e.runs.Get(ctx, "default", "run-na")
		if !eng.Ready(ctx, r) {
			t.Fatalf("run not ready after resolution: %q", r.StatusReason)
		}
		due, err := eng.Due(ctx)
		if err != nil || len(due) != 1 {
			t.Fatalf("due: %v %v", due, err)
		}
		r, err = eng.Drive(ctx, "run-na")
		if err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("after resolution: %s %v", r.Status, err)
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends after resolution, want 1", sends)
		}
	})
}

// With an authoritative lookup a lost answer is reconciled at once: applied
// means succeeded without a second send.
func TestLostAnswerReconciled(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		p.failTransport = true
		w := workflow.Workflow{Name: "pay", Version: "1", Steps: []workflow.Step{
			{Name: "pay", Run: func(ctx context.Context, sc *workflow.StepContext) error {
				op, err := sc.Call(ctx, payCall(p, 10, ""))
				if err != nil {
					return err
				}
				return sc.Set("ref", op.ExternalRef)
			}},
		}}
		eng := newEngine(t, e, p, workflow.Options{}, w)
		ctx := context.Background()
		_, _, _ = eng.Start(ctx, "pay", "run-l", nil)
		r, err := eng.Drive(ctx, "run-l")
		if err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("drive: %s %q %v", r.Status, r.StatusReason, err)
		}
		op, _ := e.ops.Get(ctx, "default", toolop.OperationID("run-l", "pay"))
		if sends, applied := p.counts(); sends != 1 || applied != 1 || op.Status != toolop.StatusSucceeded || op.Resolution != "reconciled: applied" {
			t.Fatalf("sends %d applied %d op %+v", sends, applied, op)
		}
	})
}

func approvalFlow(p *provider, amount *atomic.Int32, pause func(ctx context.Context) error) workflow.Workflow {
	return workflow.Workflow{Name: "appr", Version: "1", Steps: []workflow.Step{
		{Name: "approve", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			_, err := sc.Approve(ctx, workflow.ApprovalSpec{Request: map[string]int{"amount": int(amount.Load())}, TTL: 300 * time.Millisecond})
			return err
		}},
		{Name: "pause", Run: func(ctx context.Context, sc *workflow.StepContext) error { return pause(ctx) }},
		{Name: "pay", Run: func(ctx context.Context, sc *workflow.StepContext) error {
			_, err := sc.Call(ctx, payCall(p, int(amount.Load()), "approve"))
			return err
		}},
	}}
}

func autoApprove(ctx context.Context, a toolop.Approval) (toolop.Decision, bool) {
	return toolop.Decision{Approve: true, By: "policy"}, true
}

// An approval that expired while the run was down is not used after resume:
// the resume is refused by the approvals check, nothing is sent, and a new
// approval for the same request lets the run finish.
func TestExpiredApprovalNotUsedAfterResume(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var amount atomic.Int32
		amount.Store(100)
		reached := make(chan struct{}, 1)
		var crash atomic.Bool
		crash.Store(true)
		w := approvalFlow(p, &amount, func(ctx context.Context) error {
			if crash.Load() {
				reached <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		e1 := newEngine(t, e, p, workflow.Options{Approver: autoApprove}, w)
		_, _, _ = e1.Start(ctx, "appr", "run-a", nil)
		done := make(chan struct{})
		go func() { _, _ = e1.Drive(ctx, "run-a"); close(done) }()
		<-reached
		cancel()
		<-done
		crash.Store(false)
		time.Sleep(300 * time.Millisecond) // real approval expiry
		e2 := newEngine(t, e, p, workflow.Options{}, w)
		bg := context.Background()
		_, err := e2.Drive(bg, "run-a")
		r, _ := e.runs.Get(bg, "default", "run-a")
		if !errors.Is(err, resume.ErrRefused) || r.Status != run.StatusSuspended || !strings.Contains(r.StatusReason, "approvals") || !strings.Contains(r.StatusReason, "expired") {
			t.Fatalf("resume with an expired approval: err %v, run %s %q", err, r.Status, r.StatusReason)
		}
		if sends, _ := p.counts(); sends != 0 {
			t.Fatalf("%d sends with an expired approval", sends)
		}
		if e2.Ready(bg, r) {
			t.Fatalf("ready before a new approval")
		}
		digest, _ := toolop.RequestDigest(map[string]int{"amount": 100})
		a, _, err := e.ops.RequestApproval(bg, "default", toolop.ApprovalRequest{RunID: "run-a", StepID: "approve", RequestDigest: digest, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.ops.Decide(bg, "default", a.ApprovalID, toolop.Decision{Approve: true, By: "manager", Reason: "checked"}); err != nil {
			t.Fatal(err)
		}
		r, _ = e.runs.Get(bg, "default", "run-a")
		if !e2.Ready(bg, r) {
			t.Fatalf("not ready after a new approval")
		}
		r, err = e2.Drive(bg, "run-a")
		if err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("after a new approval: %s %q %v", r.Status, r.StatusReason, err)
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends, want 1", sends)
		}
	})
}

// An approval that lapses between its step and the guarded call (no crash,
// a slow step between) is asked again at the call, so the run does not
// wait for good: the engine's policy decides it at once and the call goes
// out; without a policy the run waits on the new approval, whose decision
// wakes it.
func TestApprovalLapsedBeforeTheCallIsAskedAgain(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		bg := context.Background()
		slow := func(ctx context.Context) error { time.Sleep(400 * time.Millisecond); return nil } // past the 300 ms TTL
		var amount atomic.Int32
		amount.Store(100)

		e, p := open(t), newProvider()
		eng := newEngine(t, e, p, workflow.Options{Approver: autoApprove}, approvalFlow(p, &amount, slow))
		if r, err := eng.Execute(bg, "appr", "run-auto", nil); err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("with a policy: %s %q %v", r.Status, r.StatusReason, err)
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("with a policy: %d sends, want 1", sends)
		}

		e, p = open(t), newProvider()
		eng2 := newEngine(t, e, p, workflow.Options{}, approvalFlow(p, &amount, slow))
		if _, _, err := eng2.Start(bg, "appr", "run-person", nil); err != nil {
			t.Fatal(err)
		}
		// The first approval is decided by hand right away, then lapses in the slow step.
		go func() {
			for range 100 {
				as, _ := e.ops.ListApprovals(bg, "default", "run-person")
				if len(as) > 0 {
					_, _ = e.ops.Decide(bg, "default", as[0].ApprovalID, toolop.Decision{Approve: true, By: "manager"})
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		r, _ := eng2.Drive(bg, "run-person")
		for i := 0; r.Status == run.StatusSuspended && r.NextStep == "approve" && i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
			r, _ = eng2.Drive(bg, "run-person")
		}
		if r.Status != run.StatusSuspended || r.NextStep != "pay" || !strings.Contains(r.StatusReason, "asked again") {
			t.Fatalf("lapsed approval without a policy: %s at %s %q", r.Status, r.NextStep, r.StatusReason)
		}
		if eng2.Ready(bg, r) {
			t.Fatal("ready before the new approval is decided")
		}
		as, err := e.ops.ListApprovals(bg, "default", "run-person")
		if err != nil || len(as) != 2 || as[1].Status != toolop.ApprovalPending {
			t.Fatalf("approvals: %+v %v, want the lapsed one and a pending one", as, err)
		}
		if _, err := e.ops.Decide(bg, "default", as[1].ApprovalID, toolop.Decision{Approve: true, By: "manager"}); err != nil {
			t.Fatal(err)
		}
		r, _ = e.runs.Get(bg, "default", "run-person")
		if !eng2.Ready(bg, r) {
			t.Fatal("not ready once the new approval is decided")
		}
		// The step sleeps again before the call: a quick decision is still in force.
		if r, err = eng2.Drive(bg, "run-person"); err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("after the new approval: %s %q %v", r.Status, r.StatusReason, err)
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends, want 1", sends)
		}
	})
}

// An approval covers one request digest: if the request changes after it
// was approved, nothing is sent and the run waits for a new approval.
func TestChangedDigestInvalidatesApproval(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var amount atomic.Int32
		amount.Store(100)
		w := approvalFlow(p, &amount, func(ctx context.Context) error {
			amount.Store(900) // the request changes after approval
			return nil
		})
		eng := newEngine(t, e, p, workflow.Options{Approver: autoApprove}, w)
		ctx := context.Background()
		_, _, _ = eng.Start(ctx, "appr", "run-d", nil)
		r, err := eng.Drive(ctx, "run-d")
		if err != nil || r.Status != run.StatusSuspended || !strings.Contains(r.StatusReason, "different request digest") {
			t.Fatalf("drive: %s %q %v; want suspended for a digest mismatch", r.Status, r.StatusReason, err)
		}
		if sends, _ := p.counts(); sends != 0 {
			t.Fatalf("%d sends under an approval for another digest", sends)
		}
		op, _ := e.ops.Get(ctx, "default", toolop.OperationID("run-d", "pay"))
		if op.Status != toolop.StatusPrepared || op.Attempts != 0 {
			t.Fatalf("operation %+v, want prepared and never sent", op)
		}
	})
}

// Approvals are a wait: without a policy the run suspends until a person decides.
func TestApprovalWait(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var amount atomic.Int32
		amount.Store(100)
		w := approvalFlow(p, &amount, func(ctx context.Context) error { return nil })
		w.Steps[0].Run = func(ctx context.Context, sc *workflow.StepContext) error {
			_, err := sc.Approve(ctx, workflow.ApprovalSpec{Request: map[string]int{"amount": 100}, TTL: time.Hour})
			if errors.Is(err, workflow.ErrRejected) {
				sc.Complete()
				return sc.Set("outcome", "rejected")
			}
			return err
		}
		eng := newEngine(t, e, p, workflow.Options{}, w)
		ctx := context.Background()
		for _, tc := range []struct {
			id      string
			approve bool
			status  run.Status
			sends   int
		}{{"run-yes", true, run.StatusCompleted, 1}, {"run-no", false, run.StatusCompleted, 1}} {
			_, _, _ = eng.Start(ctx, "appr", tc.id, nil)
			r, err := eng.Drive(ctx, tc.id)
			if err != nil || r.Status != run.StatusSuspended || !strings.Contains(r.StatusReason, "waiting for approval") {
				t.Fatalf("%s: %s %q %v", tc.id, r.Status, r.StatusReason, err)
			}
			as, _ := e.ops.ListApprovals(ctx, "default", tc.id)
			if len(as) != 1 || eng.Ready(ctx, r) {
				t.Fatalf("%s: %d approvals, ready %v", tc.id, len(as), eng.Ready(ctx, r))
			}
			if _, err := e.ops.Decide(ctx, "default", as[0].ApprovalID, toolop.Decision{Approve: tc.approve, By: "lead"}); err != nil {
				t.Fatal(err)
			}
			r, _ = e.runs.Get(ctx, "default", tc.id)
			if !eng.Ready(ctx, r) {
				t.Fatalf("%s: not ready after the decision", tc.id)
			}
			if r, err = eng.Drive(ctx, tc.id); err != nil || r.Status != tc.status {
				t.Fatalf("%s after decision: %s %q %v", tc.id, r.Status, r.StatusReason, err)
			}
		}
		if sends, _ := p.counts(); sends != 1 {
			t.Fatalf("%d sends, want 1 (only the approved run pays)", sends)
		}
	})
}

// Exhausting a budget suspends the run with the reason, and resume refuses
// while it stays exhausted.
func TestBudgetExhaustion(t *testing.T) {
	withStore(t, func(t *testing.T, open backendFn) {
		e, p := open(t), newProvider()
		var ran atomic.Int32
		step := func(name string) workflow.Step {
			return workflow.Step{Name: name, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				ran.Add(1)
				sc.Spend(600, 1000)
				return nil
			}}
		}
		w := workflow.Workflow{Name: "budget", Version: "1", Budget: control.Budget{MaxTokens: 1000, MaxSteps: 10},
			Steps: []workflow.Step{step("a"), step("b"), step("c")}}
		eng := newEngine(t, e, p, workflow.Options{}, w)
		ctx := context.Background()
		_, _, _ = eng.Start(ctx, "budget", "run-b", nil)
		r, err := eng.Drive(ctx, "run-b")
		if err != nil || r.Status != run.StatusSuspended || r.StatusReason != "budget exhausted: tokens 1200 of 1000" || r.NextStep != "c" {
			t.Fatalf("drive: %s %q next %s %v", r.Status, r.StatusReason, r.NextStep, err)
		}
		if ran.Load() != 2 {
			t.Fatalf("%d steps ran, want 2", ran.Load())
		}
		res, err := eng.Resume(ctx, "run-b")
		if !errors.Is(err, resume.ErrRefused) || res.FailedCheck != resume.CheckBudgets {
			t.Fatalf("resume: %v %+v", err, res.Checks)
		}
		// Every check before it passed, in order.
		names := []string{resume.CheckLease, resume.CheckTenant, resume.CheckWorkflow, resume.CheckSchema, resume.CheckArtifacts, resume.CheckToolContracts, resume.CheckEvents, resume.CheckOperations, resume.CheckApprovals, resume.CheckBudgets}
		if len(res.Checks) != len(names) {
			t.Fatalf("checks: %+v", res.Checks)
		}
		for i, c := range res.Checks {
			if c.Name != names[i] || (i < len(names)-1) == (c.Status == resume.Failed) {
				t.Fatalf("check %d: %+v", i, c)
			}
		}
	})
}

// TestStepSeesRemainingBudget: a step reads what the budget leaves, less
// what earlier steps and itself have spent, and nothing for an unlimited
// dimension.
func TestStepSeesRemainingBudget(t *testing.T) {
	e, p := memEnv(t), newProvider()
	var seen []control.Spend
	step := func(name string) workflow.Step {
		return workflow.Step{Name: name, Run: func(ctx context.Context, sc *workflow.StepContext) error {
			before := sc.Remaining()
			sc.Spend(300, 0)
			time.Sleep(20 * time.Millisecond)
			seen = append(seen, before, sc.Remaining())
			return nil
		}}
	}
	w := workflow.Workflow{Name: "rem", Version: "1", Budget: control.Budget{MaxTokens: 1000, MaxWallMS: 60000}, Steps: []workflow.Step{step("a"), step("b")}}
	eng := newEngine(t, e, p, workflow.Options{}, w)
	r, err := eng.Execute(context.Background(), "rem", "run-rem", nil)
	if err != nil || r.Status != run.StatusCompleted {
		t.Fatalf("execute: %s %v", r.Status, err)
	}
	want := []int64{1000, 700, 700, 400}
	if len(seen) != len(want) {
		t.Fatalf("seen %+v", seen)
	}
	for i, s := range seen {
		if s.Tokens != want[i] || s.CostMicros != -1 {
			t.Fatalf("remaining %d = %+v, want tokens %d and unlimited cost", i, s, want[i])
		}
	}
	// Wall time counts while the step runs: after its 20 ms, less is left
	// than when it began, and the second step starts with the first's spent.
	if seen[1].WallMS > seen[0].WallMS-20 || seen[2].WallMS > seen[0].WallMS-20 {
		t.Fatalf("wall time left %d, %d, %d ms: the running step's time is not counted", seen[0].WallMS, seen[1].WallMS, seen[2].WallMS)
	}
}

// TestRefusedResultIsAFailedAttempt: a step that returns nil with a result
// the store refuses (a state over the size limit, a step that does not
// exist) has failed: its attempts count, the run fails after MaxAttempts
// with the refusal as the reason, and the step is not run again.
func TestRefusedResultIsAFailedAttempt(t *testing.T) {
	for name, run1 := range map[string]func(context.Context, *workflow.StepContext) error{
		"state too large": func(_ context.Context, sc *workflow.StepContext) error {
			return sc.Set("blob", strings.Repeat("x", 20000))
		},
		"unknown step": func(_ context.Context, sc *workflow.StepContext) error {
			sc.Goto("nowhere")
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := memstore.New()
			e := env{runs: run.NewService(s, run.Options{MaxStateBytes: 10000}), ops: toolop.NewService(s, nil)}
			var calls atomic.Int32
			w := workflow.Workflow{Name: "big", Version: "1", Steps: []workflow.Step{
				{Name: "a", MaxAttempts: 2, Run: func(ctx context.Context, sc *workflow.StepContext) error {
					calls.Add(1)
					return run1(ctx, sc)
				}},
				{Name: "b", Run: func(context.Context, *workflow.StepContext) error { return nil }},
			}}
			eng := newEngine(t, e, nil, workflow.Options{}, w)
			r, err := eng.Execute(t.Context(), "big", "r1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != run.StatusFailed || !strings.Contains(r.StatusReason, "after 2 attempts") || !(strings.Contains(r.StatusReason, "size limit") || strings.Contains(r.StatusReason, "nowhere")) || calls.Load() != 2 {
				t.Fatalf("status %s (%s) after %d runs of the step, want failed after 2", r.Status, r.StatusReason, calls.Load())
			}
			evs, err := e.runs.Events(t.Context(), "default", "r1", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, ev := range evs {
				if ev.EventType == workflow.EventStepFailed {
					failed++
				}
			}
			if failed != 2 {
				t.Fatalf("%d step.failed events, want 2: %+v", failed, evs)
			}
		})
	}
}
