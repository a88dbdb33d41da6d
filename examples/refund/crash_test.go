package refund_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

const (
	crashOrder = "order-0001" // 89.19 EUR: under the policy limit, so it is refunded
	crashRun   = "refund-order-0001"
)

func demoArgs(url string, b backend, orders int, extra ...string) []string {
	args := []string{"demo", "refund", "--payments", url, "--orders", fmt.Sprint(orders), "--lease-ttl", "1s", "--poll", "50ms", "--log-level", "info"}
	args = append(args, b.args...)
	return append(args, extra...)
}

// TestCrashMatrix kills the worker with SIGKILL at each fault point around
// the refund call, on both backends, then starts it again and checks that the
// run continued at the right step and the payments ledger holds the refund
// exactly once.
func TestCrashMatrix(t *testing.T) {
	for _, mk := range []func(*testing.T) backend{sqliteBackend, postgresBackend} {
		for _, point := range []string{workflow.FaultBeforeCall, workflow.FaultAfterSend, workflow.FaultAfterResponse, workflow.FaultAfterCheckpoint} {
			b := mk(t)
			t.Run(b.name+"/"+point, func(t *testing.T) { crashAt(t, b, point) })
		}
	}
}

func crashAt(t *testing.T, b backend, point string) {
	ctx := context.Background()
	_, url := startPayments(t, t.TempDir()+"/ledger.jsonl")
	p := start(t, []string{"MEMENTO_FAULT_POINT=" + point, "MEMENTO_FAULT_RUN=" + crashRun}, demoArgs(url, b, 1)...)
	if !waitFor(p, p.errb, "fault point "+point+" reached", 60*time.Second) {
		t.Fatalf("worker never reached %s; stdout %s stderr %s", point, p.out, tail(p.errb.String(), 3000))
	}
	p.kill()

	// What the crash left behind.
	e := b.open(t)
	r, err := e.Runs.Get(ctx, "default", crashRun)
	if err != nil {
		t.Fatal(err)
	}
	opID := toolop.OperationID(crashRun, refund.BusinessKey(crashOrder))
	op, err := e.Ops.Get(ctx, "default", opID)
	if err != nil {
		t.Fatalf("operation after crash: %v", err)
	}
	before := refunds(t, url)
	wantNext, wantOp := refund.StepRefund, toolop.StatusStarted
	if point == workflow.FaultAfterCheckpoint {
		wantNext, wantOp = refund.StepVerify, toolop.StatusSucceeded
	}
	// A lease lost to a slow disk may have cost an extra attempt (same key), never a second refund.
	if r.Status != run.StatusRunning || r.NextStep != wantNext || op.Status != wantOp || op.Attempts < 1 {
		t.Fatalf("after a kill at %s: run %s next %s, operation %+v; want running at %s, operation %s after 1 attempt\nevents: %s\nstderr: %s", point, r.Status, r.NextStep, op, wantNext, wantOp, eventSummary(events(t, e, crashRun)), tail(p.errb.String(), 2000))
	}
	switch point {
	case workflow.FaultBeforeCall:
		if len(before) != 0 {
			t.Fatalf("killed before the call, yet the ledger holds %d refunds", len(before))
		}
	case workflow.FaultAfterResponse, workflow.FaultAfterCheckpoint:
		if len(before) != 1 {
			t.Fatalf("killed after the response, the ledger holds %d refunds, want 1", len(before))
		}
	}
	decided := countSteps(events(t, e, crashRun))[refund.StepDecide]
	_ = e.Close()

	// Start again: it must finish the run without a second refund.
	p2 := start(t, nil, demoArgs(url, b, 1)...)
	if err := p2.wait(t, 90*time.Second); err != nil {
		t.Fatalf("restart exited with %v\nstderr: %s", err, tail(p2.errb.String(), 3000))
	}
	sum := lastLineSummary(t, p2)
	if sum.RunsByStatus["completed"] != 1 || sum.RefundsApplied[crashOrder] != 1 || sum.Outcomes[refund.OutcomeRefunded] != 1 {
		t.Fatalf("summary after restart: %+v", sum)
	}
	after := refunds(t, url)
	if len(after) != 1 || after[0].IdempotencyKey != op.IdempotencyKey() || after[0].OrderID != crashOrder {
		t.Fatalf("ledger after restart: %+v, want exactly one refund keyed %s (operation %s)", after, op.IdempotencyKey(), opID)
	}

	e = b.open(t)
	defer e.Close()
	evs := events(t, e, crashRun)
	steps := countSteps(evs)
	for _, s := range []string{refund.StepLookup, refund.StepDecide, refund.StepApprove, refund.StepRefund, refund.StepVerify} {
		if steps[s] != 1 {
			t.Fatalf("step %s committed %d times, want once: %v", s, steps[s], eventSummary(evs))
		}
	}
	if decided != 1 {
		t.Fatalf("decide was committed %d times before the crash", decided)
	}
	// The restart went through resume verification, after the last commit before the kill.
	var verified *run.Event
	for i := range evs {
		if evs[i].EventType == resume.EventVerified {
			verified = &evs[i]
		}
	}
	if verified == nil {
		t.Fatalf("no %s event after the restart: %v", resume.EventVerified, eventSummary(evs))
	}
	op, _ = e.Ops.Get(ctx, "default", opID)
	if op.Status != toolop.StatusSucceeded || op.ExternalRef != after[0].RefundID {
		t.Fatalf("operation after restart: %+v (want succeeded, ref %s)", op, after[0].RefundID)
	}
	if point == workflow.FaultBeforeCall && (op.Attempts < 2 || !strings.Contains(op.Resolution, "not applied")) {
		t.Fatalf("killed before the call: %+v; want reconciled as not applied and sent again with the same key", op)
	}
	t.Logf("%s/%s: resumed at %s, operation %s attempts %d, ledger %d refund(s); resume checks: %s",
		b.name, point, wantNext, op.Status, op.Attempts, len(after), verified.Payload)
}

func countSteps(evs []run.Event) map[string]int {
	m := map[string]int{}
	for _, ev := range evs {
		if ev.EventType == workflow.EventStepCompleted {
			m[ev.StepID]++
		}
	}
	return m
}

func eventSummary(evs []run.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d:%s/%s ", ev.Seq, ev.EventType, ev.StepID)
	}
	return b.String()
}

// TestNonAuthoritativeLookup: after a crash between the response and the
// ledger update, with the payments lookup switched to non-authoritative, the
// restarted worker must not send again: the operation stays unknown and the
// run is suspended naming it. An operator's resolution lets it finish. On
// both backends.
func TestNonAuthoritativeLookup(t *testing.T) { eachBackend(t, nonAuthoritativeLookup) }

func nonAuthoritativeLookup(t *testing.T, b backend) {
	ctx := context.Background()
	_, url := startPayments(t, t.TempDir()+"/ledger.jsonl")
	p := start(t, []string{"MEMENTO_FAULT_POINT=" + workflow.FaultAfterResponse}, demoArgs(url, b, 1)...)
	if !waitFor(p, p.errb, "fault point after_response reached", 60*time.Second) {
		t.Fatalf("worker never reached after_response: %s", tail(p.errb.String(), 3000))
	}
	p.kill()
	pay := refund.NewClient(url)
	if err := pay.SetAuthoritative(ctx, false); err != nil {
		t.Fatal(err)
	}
	p2 := start(t, nil, demoArgs(url, b, 1)...)
	if err := p2.wait(t, 90*time.Second); err != nil {
		t.Fatalf("restart exited with %v: %s", err, tail(p2.errb.String(), 3000))
	}
	sum := lastLineSummary(t, p2)
	opID := toolop.OperationID(crashRun, refund.BusinessKey(crashOrder))
	if sum.RunsByStatus["suspended"] != 1 || !strings.Contains(sum.Suspended[crashRun], opID) {
		t.Fatalf("summary: %+v; want the run suspended naming %s", sum, opID)
	}
	e := b.open(t)
	op, err := e.Ops.Get(ctx, "default", opID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != toolop.StatusUnknown || op.Attempts != 1 {
		t.Fatalf("operation %+v: want unknown after 1 attempt (nothing retried)", op)
	}
	r, _ := e.Runs.Get(ctx, "default", crashRun)
	if r.Status != run.StatusSuspended || !strings.Contains(r.StatusReason, opID) || !strings.Contains(r.StatusReason, resume.CheckOperations) {
		t.Fatalf("run %s: %q; want suspended by the operations check naming %s", r.Status, r.StatusReason, opID)
	}
	rs := refunds(t, url)
	if len(rs) != 1 {
		t.Fatalf("ledger holds %d refunds, want the 1 sent before the crash", len(rs))
	}
	// The operator checks the provider by hand and resolves the operation.
	if _, err := e.Ops.Resolve(ctx, "default", opID, toolop.Resolution{Outcome: "applied", ExternalRef: rs[0].RefundID, By: "operator", Reason: "seen in the provider dashboard"}); err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	if err := pay.SetAuthoritative(ctx, true); err != nil {
		t.Fatal(err)
	}
	p3 := start(t, nil, demoArgs(url, b, 1)...)
	if err := p3.wait(t, 90*time.Second); err != nil {
		t.Fatalf("third start exited with %v: %s", err, tail(p3.errb.String(), 3000))
	}
	if sum := lastLineSummary(t, p3); sum.RunsByStatus["completed"] != 1 || sum.RefundsApplied[crashOrder] != 1 {
		t.Fatalf("after resolution: %+v", sum)
	}
	if rs := refunds(t, url); len(rs) != 1 {
		t.Fatalf("ledger holds %d refunds after resolution, want 1", len(rs))
	}
}

var _ = errors.Is
