package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// ToolopStoreSuite is the conformance suite of the operation ledger and approvals.
// newStore returns a fresh store; tests use random tenant ids so stores may be shared.
func ToolopStoreSuite(t *testing.T, newStore func(t *testing.T) toolop.Store) {
	t.Run("PrepareOnce", func(t *testing.T) { testPrepareOnce(t, newStore(t)) })
	t.Run("ConcurrentPrepare", func(t *testing.T) { testConcurrentPrepare(t, newStore(t)) })
	t.Run("Transitions", func(t *testing.T) { testTransitions(t, newStore(t)) })
	t.Run("ConcurrentTransitions", func(t *testing.T) { testConcurrentTransitions(t, newStore(t)) })
	t.Run("TenantIsolation", func(t *testing.T) { testToolopTenants(t, newStore(t)) })
	t.Run("Reconcile", func(t *testing.T) { testReconcile(t, newStore(t)) })
	t.Run("Resolve", func(t *testing.T) { testResolve(t, newStore(t)) })
	t.Run("Approvals", func(t *testing.T) { testApprovals(t, newStore(t)) })
	t.Run("ApprovalValidity", func(t *testing.T) { testApprovalValidity(t, newStore(t)) })
	t.Run("ConcurrentDecide", func(t *testing.T) { testConcurrentDecide(t, newStore(t)) })
	t.Run("RetentionWithRun", func(t *testing.T) { testToolopRetention(t, newStore(t)) })
	t.Run("ListPages", func(t *testing.T) { testToolopPages(t, newStore(t)) })
	t.Run("ListFilters", func(t *testing.T) { testToolopFilters(t, newStore(t)) })
}

// testToolopFilters: a page kept to one step's approvals or to the
// operations in doubt holds exactly those, in creation order, of that run
// and tenant only (what the approval checks and a resume read).
func testToolopFilters(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	var inDoubt []string
	for i := range 6 {
		op := prepare(t, svc, tn, "run-f", fmt.Sprintf("k%d", i))
		if i%2 == 1 {
			if _, err := svc.Start(ctx, tn, op.OperationID); err != nil {
				t.Fatal(err)
			}
			inDoubt = append(inDoubt, op.OperationID)
		}
	}
	started := prepare(t, svc, tn, "run-g", "k9") // another run's, in doubt
	if _, err := svc.Start(ctx, tn, started.OperationID); err != nil {
		t.Fatal(err)
	}
	var wantStep []string
	for i := range 6 {
		step := "s-" + strconv.Itoa(i%3)
		a, _, err := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: "run-f", StepID: step, RequestDigest: fmt.Sprintf("sha256:%d", i), TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if step == "s-1" {
			wantStep = append(wantStep, a.ApprovalID)
		}
	}
	ops, err := st.ListOperations(ctx, tn, "run-f", toolop.Page{InDoubt: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range ops {
		got = append(got, op.OperationID)
	}
	if !slices.Equal(got, inDoubt) {
		t.Fatalf("operations in doubt %v, want %v", got, inDoubt)
	}
	if ops, err := st.ListOperations(ctx, tenant(), "run-f", toolop.Page{InDoubt: true}); err != nil || len(ops) != 0 {
		t.Fatalf("another tenant's operations in doubt: %d (%v)", len(ops), err)
	}
	aps, err := st.ListApprovals(ctx, tn, "run-f", toolop.Page{StepID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, a := range aps {
		got = append(got, a.ApprovalID)
	}
	if !slices.Equal(got, wantStep) {
		t.Fatalf("approvals of step s-1 %v, want %v", got, wantStep)
	}
	// The filter holds with paging too.
	first, err := st.ListApprovals(ctx, tn, "run-f", toolop.Page{StepID: "s-1", Limit: 1})
	if err != nil || len(first) != 1 {
		t.Fatalf("first page: %d (%v)", len(first), err)
	}
	rest, err := st.ListApprovals(ctx, tn, "run-f", toolop.Page{StepID: "s-1", AfterCreatedAt: first[0].CreatedAt, AfterID: first[0].ApprovalID})
	if err != nil || len(rest) != len(wantStep)-1 || (len(rest) > 0 && rest[0].ApprovalID != wantStep[1]) {
		t.Fatalf("after the first page: %d (%v)", len(rest), err)
	}
}

// testToolopPages pages through a run's operations and approvals with
// cursors: every item once, in creation order, of that run only.
func testToolopPages(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	var wantOps, wantAps []string
	for i := range 5 {
		wantOps = append(wantOps, prepare(t, svc, tn, "run-p", fmt.Sprintf("k%d", i)).OperationID)
		a, _, err := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{ApprovalID: fmt.Sprintf("ap-%d", i), RunID: "run-p", StepID: "s", RequestDigest: "sha256:x", TTL: time.Hour})
		if err != nil {
			t.Fatalf("request approval: %v", err)
		}
		wantAps = append(wantAps, a.ApprovalID)
	}
	prepare(t, svc, tn, "run-other", "k0")
	var gotOps, gotAps []string
	for cur, pages := "", 0; ; pages++ {
		ops, next, err := svc.ListPage(ctx, tn, "run-p", cur, 2)
		if err != nil || len(ops) > 2 || pages > 3 {
			t.Fatalf("operations page %d: %d items, %v", pages, len(ops), err)
		}
		for _, op := range ops {
			gotOps = append(gotOps, op.OperationID)
		}
		if next == "" {
			break
		}
		cur = next
	}
	for cur, pages := "", 0; ; pages++ {
		as, next, err := svc.ListApprovalsPage(ctx, tn, "run-p", cur, 3)
		if err != nil || len(as) > 3 || pages > 2 {
			t.Fatalf("approvals page %d: %d items, %v", pages, len(as), err)
		}
		for _, a := range as {
			gotAps = append(gotAps, a.ApprovalID)
		}
		if next == "" {
			break
		}
		cur = next
	}
	all, err := svc.List(ctx, tn, "run-p")
	if err != nil || len(all) != 5 {
		t.Fatalf("all operations: %d %v", len(all), err)
	}
	var inOrder []string
	for _, op := range all {
		inOrder = append(inOrder, op.OperationID)
	}
	if fmt.Sprint(gotOps) != fmt.Sprint(inOrder) || len(gotOps) != len(wantOps) {
		t.Fatalf("paged operations %v, want %v (creation order)", gotOps, inOrder)
	}
	if fmt.Sprint(gotAps) != fmt.Sprint(wantAps) {
		t.Fatalf("paged approvals %v, want %v", gotAps, wantAps)
	}
	if _, _, err := svc.ListPage(ctx, tn, "run-p", "", toolop.MaxListLimit+1); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("a limit over the maximum: %v, want ErrInvalidInput (it was cut silently)", err)
	}
	if _, _, err := svc.ListPage(ctx, tn, "run-p", "bogus", 2); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("malformed cursor: %v, want ErrInvalidInput", err)
	}
	// An approvals cursor is not an operations cursor.
	_, next, _ := svc.ListApprovalsPage(ctx, tn, "run-p", "", 1)
	if _, _, err := svc.ListPage(ctx, tn, "run-p", next, 2); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("an approvals cursor for operations: %v, want ErrInvalidInput", err)
	}
}

// testToolopRetention checks that a backend keeping both runs and the ledger
// deletes a terminal run's operations and approvals with it, and keeps those
// of a live run.
func testToolopRetention(t *testing.T, st toolop.Store) {
	rs, ok := st.(run.Store)
	if !ok {
		t.Fatalf("%T keeps the operation ledger but not runs; this suite expects one backend for both", st)
	}
	ctx := context.Background()
	runs := run.NewService(rs, run.Options{})
	ops := toolop.NewService(st, nil)
	tn := tenant()
	mk := func(id string) {
		if _, _, err := runs.Create(ctx, tn, run.CreateRequest{RunID: id, WorkflowName: "wf"}, ""); err != nil {
			t.Fatalf("create run %s: %v", id, err)
		}
		prepare(t, ops, tn, id, "k-"+id)
		if _, _, err := ops.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: id, StepID: "approve", RequestDigest: "sha256:" + id, TTL: time.Hour}); err != nil {
			t.Fatalf("request approval for %s: %v", id, err)
		}
	}
	mk("done")
	mk("live")
	l, err := runs.AcquireLease(ctx, tn, "done", "w", 0, time.Minute)
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if _, _, err := runs.Commit(ctx, tn, "done", run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "step"}, State: []byte(`{}`), Status: run.StatusCompleted}); err != nil {
		t.Fatalf("complete run: %v", err)
	}
	if _, err := rs.DeleteTerminalBefore(ctx, time.Now().Add(time.Hour), 1000); err != nil {
		t.Fatalf("retention: %v", err)
	}
	if _, err := ops.Get(ctx, tn, toolop.OperationID("done", "k-done")); !errors.Is(err, toolop.ErrNotFound) {
		t.Fatalf("operation of a deleted run: err=%v, want ErrNotFound", err)
	}
	if as, err := ops.ListApprovals(ctx, tn, "done"); err != nil || len(as) != 0 {
		t.Fatalf("approvals of a deleted run: %v %v, want none", as, err)
	}
	if _, err := ops.Get(ctx, tn, toolop.OperationID("live", "k-live")); err != nil {
		t.Fatalf("operation of a live run was deleted: %v", err)
	}
	if as, err := ops.ListApprovals(ctx, tn, "live"); err != nil || len(as) != 1 {
		t.Fatalf("approvals of a live run: %v %v, want 1", as, err)
	}
}

// newClock is a test clock at now, to the microsecond the stores keep.
func newClock() *testenv.Clock { return testenv.NewClock(time.Now().UTC().Truncate(time.Microsecond)) }

func tenant() string { return "t-" + uuid.NewString()[:8] }

func prepare(t *testing.T, svc *toolop.Service, tn, runID, key string) toolop.Operation {
	t.Helper()
	op, created, err := svc.Prepare(context.Background(), tn, toolop.PrepareRequest{
		OperationID: toolop.OperationID(runID, key), RunID: runID, StepID: "refund", ToolName: "payments.refund",
		RequestDigest: "sha256:" + key,
	})
	if err != nil || !created {
		t.Fatalf("prepare %s: created=%v err=%v", key, created, err)
	}
	return op
}

func testPrepareOnce(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	c := newClock()
	svc := toolop.NewService(st, c.Now)
	tn := tenant()
	req := toolop.PrepareRequest{OperationID: toolop.OperationID("run-1", "refund:order-1"), RunID: "run-1", StepID: "refund", ToolName: "payments.refund", RequestDigest: "sha256:aa"}
	op, created, err := svc.Prepare(ctx, tn, req)
	if err != nil || !created {
		t.Fatalf("first prepare: created=%v err=%v", created, err)
	}
	if op.Status != toolop.StatusPrepared || op.Attempts != 0 || op.TenantID != tn || op.RunID != "run-1" || op.RequestDigest != "sha256:aa" {
		t.Fatalf("prepared operation = %+v", op)
	}
	if !op.CreatedAt.Equal(c.Now()) {
		t.Fatalf("created_at %s, want %s (microsecond precision)", op.CreatedAt, c.Now())
	}
	c.Advance(time.Second)
	again, created, err := svc.Prepare(ctx, tn, req)
	if err != nil || created {
		t.Fatalf("second prepare: created=%v err=%v", created, err)
	}
	if again.OperationID != op.OperationID || !again.CreatedAt.Equal(op.CreatedAt) || again.Status != toolop.StatusPrepared {
		t.Fatalf("second prepare returned %+v, want the stored %+v", again, op)
	}
	// The same id from another step is another request too (it was taken
	// for the first one's, as another tool's already was not).
	otherStep := req
	otherStep.StepID = req.StepID + "-other"
	if _, _, err := svc.Prepare(ctx, tn, otherStep); !errors.Is(err, toolop.ErrDigestMismatch) {
		t.Fatalf("prepare from another step: err=%v, want ErrDigestMismatch", err)
	}
	req.RequestDigest = "sha256:bb"
	if _, _, err := svc.Prepare(ctx, tn, req); !errors.Is(err, toolop.ErrDigestMismatch) {
		t.Fatalf("prepare with another digest: err=%v, want ErrDigestMismatch", err)
	}
	got, err := svc.Get(ctx, tn, op.OperationID)
	if err != nil || got.RequestDigest != "sha256:aa" {
		t.Fatalf("after refused prepare: %+v %v", got, err)
	}
	if _, err := svc.Get(ctx, tn, "op_missing"); !errors.Is(err, toolop.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	if toolop.OperationID("run-1", "refund:order-1") != op.OperationID || toolop.OperationID("run-2", "refund:order-1") == op.OperationID {
		t.Fatalf("OperationID is not a stable function of run and key")
	}
}

func testConcurrentPrepare(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	var created atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := svc.Prepare(ctx, tn, toolop.PrepareRequest{OperationID: "op-same", RunID: "run-1", StepID: "s", ToolName: "tool", RequestDigest: "sha256:x"})
			if err != nil {
				errs <- err
				return
			}
			if c {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent prepare: %v", err)
	}
	if created.Load() != 1 {
		t.Fatalf("%d prepares reported created, want exactly 1", created.Load())
	}
	ops, err := svc.List(ctx, tn, "run-1")
	if err != nil || len(ops) != 1 {
		t.Fatalf("list after concurrent prepare: %d ops, err %v", len(ops), err)
	}
}

func testTransitions(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	c := newClock()
	svc := toolop.NewService(st, c.Now)
	tn := tenant()
	op := prepare(t, svc, tn, "run-1", "a")
	if _, err := svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: "r"}); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("prepared -> succeeded: %v, want ErrInvalidTransition", err)
	}
	c.Advance(time.Millisecond)
	started, err := svc.Start(ctx, tn, op.OperationID)
	if err != nil || started.Status != toolop.StatusStarted || started.Attempts != 1 || !started.UpdatedAt.Equal(c.Now()) {
		t.Fatalf("start: %+v %v", started, err)
	}
	if _, err := svc.Start(ctx, tn, op.OperationID); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("started -> started: %v, want ErrInvalidTransition", err)
	}
	unk, err := svc.MarkUnknown(ctx, tn, op.OperationID, "read tcp: i/o timeout")
	if err != nil || unk.Status != toolop.StatusUnknown || unk.Error != "read tcp: i/o timeout" {
		t.Fatalf("mark unknown: %+v %v", unk, err)
	}
	if _, err := svc.MarkUnknown(ctx, tn, op.OperationID, "again"); err != nil {
		t.Fatalf("mark unknown twice should be harmless: %v", err)
	}
	if _, err := svc.Start(ctx, tn, op.OperationID); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("unknown -> started without reconciliation: %v, want ErrInvalidTransition", err)
	}
	res := json.RawMessage(`{"refund_id":"rf_1","amount":1250}`)
	done, err := svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: "rf_1", Result: res})
	if err != nil || done.Status != toolop.StatusSucceeded || done.ExternalRef != "rf_1" || done.Error != "" {
		t.Fatalf("succeed: %+v %v", done, err)
	}
	var a, b map[string]any
	_ = json.Unmarshal(res, &a)
	if err := json.Unmarshal(done.Result, &b); err != nil || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("result round trip: %s", done.Result)
	}
	if _, err := svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: "rf_1"}); err != nil {
		t.Fatalf("repeating the same success should be harmless: %v", err)
	}
	if _, err := svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: "rf_1", Result: json.RawMessage(` {"amount":1250, "refund_id":"rf_1"}`)}); err != nil {
		t.Fatalf("repeating the same result, spaced and ordered otherwise: %v", err)
	}
	if _, err := svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: "rf_1", Result: json.RawMessage(`{"refund_id":"rf_1","amount":9999}`)}); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("success again with another result: %v, want ErrInvalidTransition (it kept the first silently)", err)
	}
	if got, err := svc.Get(ctx, tn, op.OperationID); err != nil || !strings.Contains(string(got.Result), "1250") {
		t.Fatalf("the result after a refused repeat: %s %v", got.Result, err)
	}
	if _, err := svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: "rf_2"}); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("success with another ref: %v, want ErrInvalidTransition", err)
	}
	for _, f := range []func() error{
		func() error { _, err := svc.Fail(ctx, tn, op.OperationID, toolop.Outcome{Error: "x"}); return err },
		func() error { _, err := svc.MarkUnknown(ctx, tn, op.OperationID, "x"); return err },
		func() error { _, err := svc.Start(ctx, tn, op.OperationID); return err },
	} {
		if err := f(); !errors.Is(err, toolop.ErrInvalidTransition) {
			t.Fatalf("transition out of succeeded: %v, want ErrInvalidTransition", err)
		}
	}
	got, _ := svc.Get(ctx, tn, op.OperationID)
	if got.Status != toolop.StatusSucceeded || got.Attempts != 1 || got.ExternalRef != "rf_1" {
		t.Fatalf("after refused transitions: %+v", got)
	}
	f := prepare(t, svc, tn, "run-1", "b")
	if _, err := svc.Start(ctx, tn, f.OperationID); err != nil {
		t.Fatal(err)
	}
	failed, err := svc.Fail(ctx, tn, f.OperationID, toolop.Outcome{Error: "card closed"})
	if err != nil || failed.Status != toolop.StatusFailed || failed.Error != "card closed" {
		t.Fatalf("fail: %+v %v", failed, err)
	}
	if _, err := svc.Start(ctx, tn, "op-missing"); !errors.Is(err, toolop.ErrNotFound) {
		t.Fatalf("start missing: %v, want ErrNotFound", err)
	}
	ops, err := svc.List(ctx, tn, "run-1")
	if err != nil || len(ops) != 2 {
		t.Fatalf("list: %d %v", len(ops), err)
	}
}

func testConcurrentTransitions(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	for round := 0; round < 10; round++ {
		op := prepare(t, svc, tn, "run-c", fmt.Sprint(round))
		if _, err := svc.Start(ctx, tn, op.OperationID); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				var err error
				if i%2 == 0 {
					_, err = svc.Succeed(ctx, tn, op.OperationID, toolop.Outcome{ExternalRef: fmt.Sprintf("ref-%d", i)})
				} else {
					_, err = svc.Fail(ctx, tn, op.OperationID, toolop.Outcome{Error: fmt.Sprintf("no-%d", i)})
				}
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, toolop.ErrInvalidTransition) {
					t.Errorf("concurrent transition: %v", err)
				}
			}(i)
		}
		wg.Wait()
		got, _ := svc.Get(ctx, tn, op.OperationID)
		// Repeating an identical final outcome is harmless, so only the
		// fails may tie; a success with a distinct ref can only win alone.
		if got.Status == toolop.StatusSucceeded && wins.Load() != 1 {
			t.Fatalf("round %d: %d transitions won with a success, want 1", round, wins.Load())
		}
		if !got.Status.Final() || wins.Load() < 1 {
			t.Fatalf("round %d: final %s after %d wins", round, got.Status, wins.Load())
		}
	}
}

func testToolopTenants(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	a, b := tenant(), tenant()
	op := prepare(t, svc, a, "run-1", "x")
	if _, err := svc.Get(ctx, b, op.OperationID); !errors.Is(err, toolop.ErrNotFound) {
		t.Fatalf("other tenant reads the operation: %v", err)
	}
	if _, err := svc.Start(ctx, b, op.OperationID); !errors.Is(err, toolop.ErrNotFound) {
		t.Fatalf("other tenant starts the operation: %v", err)
	}
	if ops, err := svc.List(ctx, b, "run-1"); err != nil || len(ops) != 0 {
		t.Fatalf("other tenant lists %d operations (%v)", len(ops), err)
	}
	// The same id in another tenant is another operation.
	other, created, err := svc.Prepare(ctx, b, toolop.PrepareRequest{OperationID: op.OperationID, RunID: "run-1", StepID: "s", ToolName: "t", RequestDigest: "sha256:other"})
	if err != nil || !created || other.TenantID != b {
		t.Fatalf("same id in tenant b: %+v created=%v %v", other, created, err)
	}
	// Its idempotency key is another one too: an external system shared by
	// the tenants must not take b's request for a replay of a's. The key is
	// stored as prepared, and read back as it was.
	if other.IdempotencyKey() == op.IdempotencyKey() || op.IdempotencyKey() == op.OperationID {
		t.Fatalf("tenants a and b send operation %s under keys %s and %s", op.OperationID, op.IdempotencyKey(), other.IdempotencyKey())
	}
	if got, err := svc.Get(ctx, a, op.OperationID); err != nil || got.IdempotencyKey() != op.IdempotencyKey() {
		t.Fatalf("read back: key %s, want %s (%v)", got.IdempotencyKey(), op.IdempotencyKey(), err)
	}
	ap, _, err := svc.RequestApproval(ctx, a, toolop.ApprovalRequest{RunID: "run-1", StepID: "approve", RequestDigest: "sha256:x", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetApproval(ctx, b, ap.ApprovalID); !errors.Is(err, toolop.ErrApprovalNotFound) {
		t.Fatalf("other tenant reads the approval: %v", err)
	}
	if _, err := svc.Decide(ctx, b, ap.ApprovalID, toolop.Decision{Approve: true, By: "mallory"}); !errors.Is(err, toolop.ErrApprovalNotFound) {
		t.Fatalf("other tenant decides the approval: %v", err)
	}
	if as, err := svc.ListApprovals(ctx, b, "run-1"); err != nil || len(as) != 0 {
		t.Fatalf("other tenant lists %d approvals (%v)", len(as), err)
	}
}

func testReconcile(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	answers := map[string]toolop.LookupResult{}
	var lookups atomic.Int32
	var mu sync.Mutex
	_ = svc.RegisterTool(toolop.Tool{Name: "payments.refund", ContractVersion: "v1", Lookup: func(ctx context.Context, key string) (toolop.LookupResult, error) {
		lookups.Add(1)
		mu.Lock()
		defer mu.Unlock()
		r, ok := answers[key]
		if !ok {
			return toolop.LookupResult{}, errors.New("connection refused")
		}
		return r, nil
	}})
	startOp := func(key string) toolop.Operation {
		op := prepare(t, svc, tn, "run-r", key)
		if _, err := svc.Start(ctx, tn, op.OperationID); err != nil {
			t.Fatal(err)
		}
		return op
	}
	applied, notApplied, noAuth, broken := startOp("applied"), startOp("not-applied"), startOp("no-auth"), startOp("broken")
	mu.Lock()
	answers[applied.IdempotencyKey()] = toolop.LookupResult{Answer: toolop.Applied, ExternalRef: "rf_9", Result: json.RawMessage(`{"ok":true}`)}
	answers[notApplied.IdempotencyKey()] = toolop.LookupResult{Answer: toolop.NotApplied}
	answers[noAuth.IdempotencyKey()] = toolop.LookupResult{Answer: toolop.NotAuthoritative, Detail: "lookup switched off"}
	mu.Unlock()

	r, err := svc.Reconcile(ctx, tn, applied.OperationID)
	if err != nil || r.Answer != toolop.Applied || r.Operation.Status != toolop.StatusSucceeded || r.Operation.ExternalRef != "rf_9" || r.Operation.Resolution == "" {
		t.Fatalf("reconcile applied: %+v %v", r, err)
	}
	r, err = svc.Reconcile(ctx, tn, notApplied.OperationID)
	if err != nil || r.Answer != toolop.NotApplied || !r.SafeToSend() {
		t.Fatalf("reconcile not applied: %+v %v", r, err)
	}
	again, err := svc.Start(ctx, tn, notApplied.OperationID)
	if err != nil || again.Attempts != 2 || again.OperationID != notApplied.OperationID {
		t.Fatalf("resend after not applied: %+v %v", again, err)
	}
	for _, op := range []toolop.Operation{noAuth, broken} {
		r, err = svc.Reconcile(ctx, tn, op.OperationID)
		if err != nil || r.Answer != toolop.NotAuthoritative || r.Operation.Status != toolop.StatusUnknown || r.SafeToSend() || r.Detail == "" {
			t.Fatalf("reconcile without authority: %+v %v", r, err)
		}
	}
	n := lookups.Load()
	// A prepared or final operation is settled without asking the tool.
	fresh := prepare(t, svc, tn, "run-r", "fresh")
	if r, err := svc.Reconcile(ctx, tn, fresh.OperationID); err != nil || !r.SafeToSend() {
		t.Fatalf("reconcile prepared: %+v %v", r, err)
	}
	if r, err := svc.Reconcile(ctx, tn, applied.OperationID); err != nil || r.Answer != toolop.Applied {
		t.Fatalf("reconcile succeeded: %+v %v", r, err)
	}
	if lookups.Load() != n {
		t.Fatalf("settled operations were looked up")
	}
	// A tool without a lookup is never authoritative.
	op, _, _ := svc.Prepare(ctx, tn, toolop.PrepareRequest{OperationID: "op-nolookup", RunID: "run-r", StepID: "s", ToolName: "email.send", RequestDigest: "sha256:e"})
	_, _ = svc.Start(ctx, tn, op.OperationID)
	if r, err := svc.Reconcile(ctx, tn, op.OperationID); err != nil || r.Answer != toolop.NotAuthoritative || r.Operation.Status != toolop.StatusUnknown {
		t.Fatalf("reconcile without lookup: %+v %v", r, err)
	}
}

func testResolve(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	mk := func(key string) string {
		op := prepare(t, svc, tn, "run-x", key)
		_, _ = svc.Start(ctx, tn, op.OperationID)
		if _, err := svc.MarkUnknown(ctx, tn, op.OperationID, "timeout"); err != nil {
			t.Fatal(err)
		}
		return op.OperationID
	}
	a, n, f := mk("a"), mk("n"), mk("f")
	if _, err := svc.Resolve(ctx, tn, a, toolop.Resolution{Outcome: "applied"}); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("resolve without by: %v", err)
	}
	op, err := svc.Resolve(ctx, tn, a, toolop.Resolution{Outcome: "applied", ExternalRef: "rf_7", By: "alice", Reason: "seen in the bank statement"})
	if err != nil || op.Status != toolop.StatusSucceeded || op.ExternalRef != "rf_7" || op.Resolution != "resolved by alice: seen in the bank statement" {
		t.Fatalf("resolve applied: %+v %v", op, err)
	}
	op, err = svc.Resolve(ctx, tn, n, toolop.Resolution{Outcome: "not_applied", By: "alice"})
	if err != nil || op.Status != toolop.StatusPrepared {
		t.Fatalf("resolve not applied: %+v %v", op, err)
	}
	op, err = svc.Resolve(ctx, tn, f, toolop.Resolution{Outcome: "failed", Error: "declined", By: "bob"})
	if err != nil || op.Status != toolop.StatusFailed || op.Error != "declined" {
		t.Fatalf("resolve failed: %+v %v", op, err)
	}
	if _, err := svc.Resolve(ctx, tn, a, toolop.Resolution{Outcome: "failed", By: "bob"}); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("resolving a final operation: %v", err)
	}
}

func testApprovals(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	c := newClock()
	svc := toolop.NewService(st, c.Now)
	tn := tenant()
	req := toolop.ApprovalRequest{RunID: "run-a", StepID: "approve", RequestDigest: "sha256:r1", Summary: json.RawMessage(`{"amount":120}`), TTL: time.Minute}
	a, created, err := svc.RequestApproval(ctx, tn, req)
	if err != nil || !created || a.Status != toolop.ApprovalPending || !a.ExpiresAt.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("request: %+v created=%v %v", a, created, err)
	}
	req.ApprovalID = a.ApprovalID
	same, created, err := svc.RequestApproval(ctx, tn, req)
	if err != nil || created || same.ApprovalID != a.ApprovalID {
		t.Fatalf("request again by id: %+v created=%v %v", same, created, err)
	}
	bad := req
	bad.RequestDigest = "sha256:other"
	if _, _, err := svc.RequestApproval(ctx, tn, bad); !errors.Is(err, toolop.ErrApprovalExists) {
		t.Fatalf("reuse of approval id with another digest: %v", err)
	}
	c.Advance(time.Second)
	d, err := svc.Decide(ctx, tn, a.ApprovalID, toolop.Decision{Approve: true, By: "carol", Reason: "within policy"})
	if err != nil || d.Status != toolop.ApprovalApproved || d.DecidedBy != "carol" || d.Reason != "within policy" || d.DecidedAt == nil || !d.DecidedAt.Equal(c.Now()) {
		t.Fatalf("decide: %+v %v", d, err)
	}
	if _, err := svc.Decide(ctx, tn, a.ApprovalID, toolop.Decision{Approve: true, By: "carol"}); err != nil {
		t.Fatalf("repeating the same decision should be harmless: %v", err)
	}
	if _, err := svc.Decide(ctx, tn, a.ApprovalID, toolop.Decision{Approve: false, By: "dave"}); !errors.Is(err, toolop.ErrApprovalDecided) {
		t.Fatalf("second different decision: %v, want ErrApprovalDecided", err)
	}
	exp, _, err := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: "run-a", StepID: "other", RequestDigest: "sha256:r2", TTL: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(200 * time.Millisecond)
	if _, err := svc.Decide(ctx, tn, exp.ApprovalID, toolop.Decision{Approve: true, By: "carol"}); !errors.Is(err, toolop.ErrApprovalExpired) {
		t.Fatalf("decide after expiry: %v, want ErrApprovalExpired", err)
	}
	got, _ := svc.GetApproval(ctx, tn, exp.ApprovalID)
	if got.Status != toolop.ApprovalPending || got.Effective(c.Now()) != "expired" {
		t.Fatalf("expired approval changed: %+v", got)
	}
	if _, err := svc.Decide(ctx, tn, "apr_missing", toolop.Decision{Approve: true, By: "carol"}); !errors.Is(err, toolop.ErrApprovalNotFound) {
		t.Fatalf("decide missing: %v", err)
	}
	as, err := svc.ListApprovals(ctx, tn, "run-a")
	if err != nil || len(as) != 2 || as[0].ApprovalID != a.ApprovalID {
		t.Fatalf("list approvals: %+v %v", as, err)
	}
}

func testApprovalValidity(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	c := newClock()
	svc := toolop.NewService(st, c.Now)
	tn := tenant()
	if _, err := svc.ValidApproval(ctx, tn, "run-v", "approve", "sha256:d1"); !errors.Is(err, toolop.ErrApprovalNotFound) {
		t.Fatalf("no approval: %v", err)
	}
	a, _, _ := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: "run-v", StepID: "approve", RequestDigest: "sha256:d1", TTL: time.Minute})
	if _, err := svc.ValidApproval(ctx, tn, "run-v", "approve", "sha256:d1"); !errors.Is(err, toolop.ErrApprovalPending) {
		t.Fatalf("pending approval: %v", err)
	}
	if _, err := svc.Decide(ctx, tn, a.ApprovalID, toolop.Decision{Approve: true, By: "erin"}); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.ValidApproval(ctx, tn, "run-v", "approve", "sha256:d1"); err != nil || got.ApprovalID != a.ApprovalID {
		t.Fatalf("approved approval: %+v %v", got, err)
	}
	if _, err := svc.ValidApproval(ctx, tn, "run-v", "approve", "sha256:d2"); !errors.Is(err, toolop.ErrApprovalDigestMismatch) {
		t.Fatalf("changed digest: %v, want ErrApprovalDigestMismatch", err)
	}
	c.Advance(time.Minute)
	if _, err := svc.ValidApproval(ctx, tn, "run-v", "approve", "sha256:d1"); !errors.Is(err, toolop.ErrApprovalExpired) {
		t.Fatalf("expired approval: %v, want ErrApprovalExpired", err)
	}
	// A new approval for the same digest gets the next generation id and counts again.
	b, created, err := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: "run-v", StepID: "approve", RequestDigest: "sha256:d1", TTL: time.Minute})
	if err != nil || !created || b.ApprovalID == a.ApprovalID {
		t.Fatalf("second approval: %+v created=%v %v", b, created, err)
	}
	if _, err := svc.Decide(ctx, tn, b.ApprovalID, toolop.Decision{Approve: false, By: "erin", Reason: "too much"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ValidApproval(ctx, tn, "run-v", "approve", "sha256:d1"); !errors.Is(err, toolop.ErrApprovalRejected) {
		t.Fatalf("rejected approval: %v, want ErrApprovalRejected", err)
	}
	if got := a.Effective(c.Now()); got != "expired" {
		t.Fatalf("effective status of an approval past its expiry: %q, want expired", got)
	}

	// The newest decision on a request stands: asked again under an id of
	// its own while approved, a newer question left pending keeps the
	// approval in force, and its rejection revokes it, expired or not.
	ok, _, _ := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: "run-r", StepID: "pay", RequestDigest: "sha256:p", TTL: time.Hour})
	if _, err := svc.Decide(ctx, tn, ok.ApprovalID, toolop.Decision{Approve: true, By: "erin"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	again, created, err := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{ApprovalID: "pay-review", RunID: "run-r", StepID: "pay", RequestDigest: "sha256:p", TTL: time.Minute})
	if err != nil || !created {
		t.Fatalf("second question: %+v %v", again, err)
	}
	if got, err := svc.ValidApproval(ctx, tn, "run-r", "pay", "sha256:p"); err != nil || got.ApprovalID != ok.ApprovalID {
		t.Fatalf("approval with a newer question pending: %+v %v, want %s in force", got, err, ok.ApprovalID)
	}
	if _, err := svc.Decide(ctx, tn, again.ApprovalID, toolop.Decision{Approve: false, By: "frank", Reason: "fraud suspected"}); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.ValidApproval(ctx, tn, "run-r", "pay", "sha256:p"); !errors.Is(err, toolop.ErrApprovalRejected) || got.ApprovalID != again.ApprovalID {
		t.Fatalf("approval after a later rejection: %+v %v, want ErrApprovalRejected of %s", got, err, again.ApprovalID)
	}
	c.Advance(2 * time.Minute)
	if _, err := svc.ValidApproval(ctx, tn, "run-r", "pay", "sha256:p"); err == nil {
		t.Fatal("the rejection's expiry put the earlier approval back in force")
	}
}

func testConcurrentDecide(t *testing.T, st toolop.Store) {
	ctx := context.Background()
	svc := toolop.NewService(st, nil)
	tn := tenant()
	a, _, err := svc.RequestApproval(ctx, tn, toolop.ApprovalRequest{RunID: "run-d", StepID: "approve", RequestDigest: "sha256:z", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := svc.Decide(ctx, tn, a.ApprovalID, toolop.Decision{Approve: i%2 == 0, By: fmt.Sprintf("p%d", i)})
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, toolop.ErrApprovalDecided) {
				t.Errorf("decide: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d decisions won, want exactly 1", wins.Load())
	}
}
