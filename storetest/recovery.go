package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// RecoverySuite checks run.Store.ListRecoverable and AckWakeups, and the
// wake-ups the operation ledger of the same backend writes (see the
// contract in run/store.go). open returns a fresh, empty store that keeps
// both runs and the ledger (retention subtests count deletions across
// tenants, so it cannot share a store with other tests).
func RecoverySuite(t *testing.T, open func(t *testing.T) (run.Store, toolop.Store)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, rs run.Store, ts toolop.Store)
	}{
		{"RunningWithoutLiveLease", testRecoverRunning},
		{"Paging", testRecoverPaging},
		{"WakeOnDecision", testWakeOnDecision},
		{"WakeOnApprovalExpiry", testWakeOnExpiry},
		{"WakeOnOperationSettled", testWakeOnOperation},
		{"AckKeepsRewritten", testAckKeepsRewritten},
		{"WakeOfRunningRunKept", testWakeOfRunningKept},
		{"FinishedRunsIgnored", testRecoverFinished},
		{"RetentionDeletesWakeups", testRetentionWakeups},
		{"LeaseRevision", testLeaseRevision},
		{"ForkWoken", testForkWoken},
		{"RetentionBatches", testRetentionBatches},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, ts := open(t)
			tc.fn(t, rs, ts)
		})
	}
}

// recFx is a tenant over one backend's run and ledger services.
type recFx struct {
	t    *testing.T
	ctx  context.Context
	rs   run.Store
	runs *run.Service
	ops  *toolop.Service
	tn   string
}

func newRecFx(t *testing.T, rs run.Store, ts toolop.Store) *recFx {
	return &recFx{t: t, ctx: context.Background(), rs: rs, runs: run.NewService(rs, run.Options{}), ops: toolop.NewService(ts, nil), tn: tenant()}
}

func (f *recFx) create(id string) {
	f.t.Helper()
	state := json.RawMessage(`{"x":1,"_memento":{"wait":{"kind":"approval","approval_id":"a-` + id + `"}}}`)
	if _, _, err := f.runs.Create(f.ctx, f.tn, run.CreateRequest{RunID: id, WorkflowName: "wf", State: state}, ""); err != nil {
		f.t.Fatalf("create run %s: %v", id, err)
	}
}

// to commits the run (at its current revision) into status, keeping its state.
func (f *recFx) to(id string, status run.Status) {
	f.t.Helper()
	r, err := f.runs.Get(f.ctx, f.tn, id)
	if err != nil {
		f.t.Fatalf("get run %s: %v", id, err)
	}
	l, err := f.runs.AcquireLease(f.ctx, f.tn, id, "w", 0, time.Minute)
	if err != nil {
		f.t.Fatalf("lease run %s: %v", id, err)
	}
	if _, _, err := f.runs.Commit(f.ctx, f.tn, id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l,
		Event: run.EventInput{EventType: "step"}, State: r.State, Status: status}); err != nil {
		f.t.Fatalf("commit run %s to %s: %v", id, status, err)
	}
	if !status.Terminal() {
		if err := f.runs.ReleaseLease(f.ctx, f.tn, id, l); err != nil {
			f.t.Fatalf("release lease of %s: %v", id, err)
		}
	}
}

func (f *recFx) list(now time.Time) map[string]run.Recoverable {
	f.t.Helper()
	out := map[string]run.Recoverable{}
	after := ""
	for {
		page, err := f.rs.ListRecoverable(f.ctx, f.tn, run.RecoveryQuery{Now: now, ControlKey: "_memento", AfterRunID: after, Limit: 2})
		if err != nil {
			f.t.Fatalf("list recoverable: %v", err)
		}
		for _, rc := range page {
			if _, dup := out[rc.RunID]; dup || rc.RunID <= after {
				f.t.Fatalf("run %s listed twice or out of order (after %q)", rc.RunID, after)
			}
			if rc.TenantID != f.tn {
				f.t.Fatalf("run %s of tenant %q, want %q", rc.RunID, rc.TenantID, f.tn)
			}
			out[rc.RunID] = rc
			after = rc.RunID
		}
		if len(page) < 2 {
			return out
		}
	}
}

func keysOf(m map[string]run.Recoverable) string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	return fmt.Sprint(ids)
}

func (f *recFx) want(now time.Time, ids ...string) map[string]run.Recoverable {
	f.t.Helper()
	got := f.list(now)
	if len(got) != len(ids) {
		f.t.Fatalf("recoverable runs %s, want %v", keysOf(got), ids)
	}
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			f.t.Fatalf("recoverable runs %s, want %v", keysOf(got), ids)
		}
	}
	return got
}

func (f *recFx) approval(runID string, ttl time.Duration) toolop.Approval {
	f.t.Helper()
	a, _, err := f.ops.RequestApproval(f.ctx, f.tn, toolop.ApprovalRequest{RunID: runID, StepID: "approve", RequestDigest: "sha256:" + runID + ttl.String(), TTL: ttl})
	if err != nil {
		f.t.Fatalf("request approval for %s: %v", runID, err)
	}
	return a
}

func (f *recFx) decide(a toolop.Approval) {
	f.t.Helper()
	if _, err := f.ops.Decide(f.ctx, f.tn, a.ApprovalID, toolop.Decision{Approve: true, By: "ops"}); err != nil {
		f.t.Fatalf("decide %s: %v", a.ApprovalID, err)
	}
}

// settle runs an operation of the run from prepared to succeeded.
func (f *recFx) settle(runID, key string) {
	f.t.Helper()
	op := prepare(f.t, f.ops, f.tn, runID, key)
	if _, err := f.ops.Start(f.ctx, f.tn, op.OperationID); err != nil {
		f.t.Fatalf("start %s: %v", op.OperationID, err)
	}
	if _, err := f.ops.Succeed(f.ctx, f.tn, op.OperationID, toolop.Outcome{ExternalRef: "ref-" + key}); err != nil {
		f.t.Fatalf("succeed %s: %v", op.OperationID, err)
	}
}

func testRecoverRunning(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	for _, id := range []string{"free", "held", "expired", "done", "waiting"} {
		f.create(id)
	}
	if _, err := f.runs.AcquireLease(f.ctx, f.tn, "held", "w1", 0, longTTL); err != nil {
		t.Fatal(err)
	}
	f.to("done", run.StatusCompleted)
	f.to("waiting", run.StatusSuspended)
	// The short lease is taken last, and long enough that the first list
	// answers before it ends on a loaded machine; then it is waited out.
	l, err := f.runs.AcquireLease(f.ctx, f.tn, "expired", "w1", 0, 3*shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	f.want(time.Now(), "free")
	time.Sleep(time.Until(l.ExpiresAt) + afterShortTTL - shortTTL)
	got := f.want(time.Now(), "expired", "free")
	if rc := got["free"]; rc.Status != run.StatusRunning || rc.WorkflowName != "wf" || rc.LeaseExpiresAt != nil || len(rc.Wakeups) != 0 || rc.Control != nil {
		t.Fatalf("free run: %+v", rc)
	}
	if rc := got["expired"]; rc.LeaseExpiresAt == nil || rc.LeaseExpiresAt.After(time.Now()) {
		t.Fatalf("expired run: lease expires at %v", rc.LeaseExpiresAt)
	}
	// Another tenant sees none of them.
	other := *f
	other.tn = tenant()
	other.want(time.Now())
}

func testRecoverPaging(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	var ids []string
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("r%02d", i)
		f.create(id)
		ids = append(ids, id)
		if i%2 == 1 {
			f.to(id, run.StatusSuspended)
			f.decide(f.approval(id, time.Hour))
		}
	}
	f.want(time.Now(), ids...) // f.list checks the order and that no run repeats across pages of 2
}

func testWakeOnDecision(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	f.to("r", run.StatusSuspended)
	a := f.approval("r", time.Hour)
	f.want(time.Now()) // pending: nothing woke it
	f.decide(a)
	got := f.want(time.Now(), "r")
	rc := got["r"]
	if rc.Status != run.StatusSuspended || len(rc.Wakeups) != 1 || !rc.Wakeups[0].At.Equal(run.WakeNow) || rc.Wakeups[0].N < 1 {
		t.Fatalf("woken run: %+v", rc)
	}
	var ctl struct {
		Wait struct {
			ApprovalID string `json:"approval_id"`
		} `json:"wait"`
	}
	if err := json.Unmarshal(rc.Control, &ctl); err != nil || ctl.Wait.ApprovalID != "a-r" {
		t.Fatalf("control %s (%v), want the state's _memento member", rc.Control, err)
	}
	// Without a control key, no control is read.
	page, err := rs.ListRecoverable(f.ctx, f.tn, run.RecoveryQuery{Now: time.Now(), Limit: 10})
	if err != nil || len(page) != 1 || page[0].Control != nil {
		t.Fatalf("without control key: %+v %v", page, err)
	}
	// Listing does not consume; an ack does.
	f.want(time.Now(), "r")
	if err := rs.AckWakeups(f.ctx, f.tn, "r", rc.Wakeups); err != nil {
		t.Fatalf("ack: %v", err)
	}
	f.want(time.Now())
	if err := rs.AckWakeups(f.ctx, f.tn, "r", rc.Wakeups); err != nil {
		t.Fatalf("ack again: %v", err)
	}
}

func testWakeOnExpiry(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	f.to("r", run.StatusSuspended)
	a := f.approval("r", time.Hour)
	f.want(time.Now())
	f.want(a.ExpiresAt.Add(-time.Microsecond))
	got := f.want(a.ExpiresAt, "r")
	if w := got["r"].Wakeups; len(w) != 1 || !w[0].At.Equal(a.ExpiresAt) {
		t.Fatalf("wake-ups %+v, want one at %v", w, a.ExpiresAt)
	}
	// A decision adds an immediate wake-up beside the timed one, in At order.
	f.decide(a)
	w := f.want(a.ExpiresAt, "r")["r"].Wakeups
	if len(w) != 2 || !w[0].At.Equal(run.WakeNow) || !w[1].At.Equal(a.ExpiresAt) {
		t.Fatalf("wake-ups %+v, want the immediate one then the timed one", w)
	}
	// Acking what is due now leaves the timed one for later.
	now := f.want(time.Now(), "r")["r"].Wakeups
	if err := rs.AckWakeups(f.ctx, f.tn, "r", now); err != nil {
		t.Fatal(err)
	}
	f.want(time.Now())
	f.want(a.ExpiresAt, "r")
}

func testWakeOnOperation(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	f.to("r", run.StatusSuspended)
	op := prepare(t, f.ops, f.tn, "r", "k1")
	if _, err := f.ops.Start(f.ctx, f.tn, op.OperationID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ops.MarkUnknown(f.ctx, f.tn, op.OperationID, "timeout"); err != nil {
		t.Fatal(err)
	}
	f.want(time.Now()) // started, unknown: still in doubt
	if _, err := f.ops.Resolve(f.ctx, f.tn, op.OperationID, toolop.Resolution{Outcome: "applied", ExternalRef: "ref", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if w := f.want(time.Now(), "r")["r"].Wakeups; len(w) != 1 || !w[0].At.Equal(run.WakeNow) {
		t.Fatalf("wake-ups %+v, want one immediate", w)
	}
}

func testAckKeepsRewritten(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	f.to("r", run.StatusSuspended)
	f.settle("r", "k1")
	seen := f.want(time.Now(), "r")["r"].Wakeups
	f.settle("r", "k2") // after the caller looked
	if err := rs.AckWakeups(f.ctx, f.tn, "r", seen); err != nil {
		t.Fatal(err)
	}
	w := f.want(time.Now(), "r")["r"].Wakeups
	if len(w) != 1 || w[0].N <= seen[0].N {
		t.Fatalf("wake-ups after a stale ack %+v, want one written again (n > %d)", w, seen[0].N)
	}
	if err := rs.AckWakeups(f.ctx, f.tn, "r", w); err != nil {
		t.Fatal(err)
	}
	f.want(time.Now())
}

func testWakeOfRunningKept(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	if _, err := f.runs.AcquireLease(f.ctx, f.tn, "r", "w", 0, longTTL); err != nil {
		t.Fatal(err)
	}
	f.decide(f.approval("r", time.Hour)) // decided while the run still runs
	f.want(time.Now())                   // leased and running: nothing to do
	r, _ := f.runs.Get(f.ctx, f.tn, "r")
	l := run.Lease{Owner: "w", Epoch: r.LeaseEpoch}
	if _, _, err := f.runs.Commit(f.ctx, f.tn, "r", run.CommitRequest{ExpectedRevision: 1, Lease: l,
		Event: run.EventInput{EventType: "step"}, State: r.State, Status: run.StatusSuspended}); err != nil {
		t.Fatal(err)
	}
	if err := f.runs.ReleaseLease(f.ctx, f.tn, "r", l); err != nil {
		t.Fatal(err)
	}
	// Suspended after the decision: the wake-up written before still wakes it.
	if w := f.want(time.Now(), "r")["r"].Wakeups; len(w) != 1 {
		t.Fatalf("wake-ups %+v, want the one written while running", w)
	}
}

func testRecoverFinished(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("woken")
	f.to("woken", run.StatusSuspended)
	f.settle("woken", "k1")
	f.to("woken", run.StatusCancelled) // finished after its wake-up
	f.create("done")
	f.to("done", run.StatusCompleted)
	f.settle("done", "k2") // settles after the run finished: wakes nothing
	for i := 0; i < 3; i++ {
		f.want(time.Now().Add(2 * time.Hour))
	}
}

func testRetentionWakeups(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	f.to("r", run.StatusSuspended)
	f.approval("r", time.Hour) // a timed wake-up, not due yet
	f.to("r", run.StatusCancelled)
	for {
		n, err := rs.DeleteTerminalBefore(f.ctx, time.Now().Add(time.Minute), 100)
		if err != nil {
			t.Fatalf("retention: %v", err)
		}
		if n < 100 {
			break
		}
	}
	if _, err := f.runs.Get(f.ctx, f.tn, "r"); err == nil {
		t.Fatalf("finished run not deleted")
	}
	// A new run under the same id is not woken by the old run's wake-up.
	f.create("r")
	f.to("r", run.StatusSuspended)
	f.want(time.Now().Add(2 * time.Hour))
}

func testLeaseRevision(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("r")
	l, err := rs.AcquireLease(f.ctx, f.tn, "r", "w", 0, longTTL)
	if err != nil || l.Revision != 1 {
		t.Fatalf("lease: %+v %v, want revision 1", l, err)
	}
	r, _ := f.runs.Get(f.ctx, f.tn, "r")
	if _, _, err := f.runs.Commit(f.ctx, f.tn, "r", run.CommitRequest{ExpectedRevision: 1, Lease: l,
		Event: run.EventInput{EventType: "step"}, State: r.State}); err != nil {
		t.Fatal(err)
	}
	if l, err = rs.AcquireLease(f.ctx, f.tn, "r", "w", l.Epoch, longTTL); err != nil || l.Revision != 2 {
		t.Fatalf("renewed lease: %+v %v, want revision 2", l, err)
	}
	if l, err = rs.AcquireLease(f.ctx, f.tn, "r", "w", 0, longTTL); err != nil || l.Revision != 2 {
		t.Fatalf("re-taken lease: %+v %v, want revision 2", l, err)
	}
}

func testForkWoken(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("src")
	f.to("src", run.StatusCompleted)
	if _, err := f.runs.Fork(f.ctx, f.tn, "src", run.ForkRequest{FromRevision: 2, RunID: "fork"}); err != nil {
		t.Fatalf("fork: %v", err)
	}
	// The fork is suspended: the loop looks at it once, then it waits.
	w := f.want(time.Now(), "fork")["fork"].Wakeups
	if err := rs.AckWakeups(f.ctx, f.tn, "fork", w); err != nil {
		t.Fatal(err)
	}
	f.want(time.Now())
}

// Batches walk the finished runs oldest first and resume where the last
// full one stopped; once a sweep is done, the next one starts over and
// finds runs finished since. Live runs are never deleted.
func testRetentionBatches(t *testing.T, rs run.Store, ts toolop.Store) {
	f := newRecFx(t, rs, ts)
	f.create("late") // created first, finished last
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("r%d", i)
		f.create(id)
		f.to(id, run.StatusCompleted)
	}
	f.create("live")
	waitClockPast(time.Now(), time.Millisecond)
	cutoff := time.Now()
	waitClockPast(cutoff, time.Millisecond)
	f.to("late", run.StatusFailed)
	var got []int
	for {
		n, err := rs.DeleteTerminalBefore(f.ctx, cutoff, 3)
		if err != nil {
			t.Fatalf("retention: %v", err)
		}
		got = append(got, n)
		if n < 3 {
			break
		}
	}
	if fmt.Sprint(got) != "[3 1]" {
		t.Fatalf("batches deleted %v, want [3 1]", got)
	}
	for _, id := range []string{"late", "live"} {
		if _, err := f.runs.Get(f.ctx, f.tn, id); err != nil {
			t.Fatalf("run %s (finished after the cutoff, or live) deleted: %v", id, err)
		}
	}
	n, err := rs.DeleteTerminalBefore(f.ctx, time.Now().Add(time.Minute), 3)
	if err != nil || n != 1 {
		t.Fatalf("next sweep: %d %v, want the run finished since", n, err)
	}
	if _, err := f.runs.Get(f.ctx, f.tn, "live"); err != nil {
		t.Fatalf("live run deleted: %v", err)
	}
}
