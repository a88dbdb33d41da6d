package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// TestOperationsAPI walks the ledger over HTTP: prepare once, transitions,
// digest mismatch, unknown never failed, operator resolution, and a resume
// refused while an operation is in doubt, then accepted once it is resolved.
func TestOperationsAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		schemas := compileOpenAPI(t, e)
		r, l := e.leasedRun(t, "run-ops")
		prep := map[string]any{"business_key": "refund:o-1", "step_id": "refund", "tool_name": "payments", "request_digest": "sha256:aa"}
		res := e.do(t, "POST", "/v1/runs/run-ops/operations", prep, nil)
		if res.status != http.StatusCreated {
			t.Fatalf("prepare: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Operation", res.body)
		var op toolop.Operation
		_ = json.Unmarshal(res.body, &op)
		if op.OperationID != toolop.OperationID("run-ops", "refund:o-1") || op.Status != toolop.StatusPrepared || op.RunID != "run-ops" {
			t.Fatalf("prepared %+v", op)
		}
		if res := e.do(t, "POST", "/v1/runs/run-ops/operations", prep, nil); res.status != http.StatusOK {
			t.Fatalf("prepare again: %d %s", res.status, res.body)
		}
		prep["request_digest"] = "sha256:bb"
		expectProblem(t, e.do(t, "POST", "/v1/runs/run-ops/operations", prep, nil), http.StatusConflict, "digest-mismatch")
		expectProblem(t, e.do(t, "POST", "/v1/runs/nope/operations", prep, nil), http.StatusNotFound, "run-not-found")
		path := "/v1/operations/" + op.OperationID
		expectProblem(t, e.do(t, "POST", path+"/succeeded", map[string]any{"external_ref": "x"}, nil), http.StatusConflict, "invalid-operation-transition")
		expectProblem(t, e.do(t, "POST", path+"/exploded", nil, nil), http.StatusNotFound, "unsupported-operation-transition")
		if res := e.do(t, "POST", path+"/started", nil, nil); res.status != 200 {
			t.Fatalf("started: %d %s", res.status, res.body)
		}
		if res := e.do(t, "POST", path+"/unknown", map[string]any{"error": "timeout after send"}, nil); res.status != 200 {
			t.Fatalf("unknown: %d %s", res.status, res.body)
		}
		expectProblem(t, e.do(t, "POST", path+"/started", nil, nil), http.StatusConflict, "invalid-operation-transition")

		// Resume while the operation is unknown and no lookup exists here:
		// refused, naming it, and the run is left exactly as it was.
		if err := e.c.ReleaseLease(context.Background(), "run-ops", l); err != nil {
			t.Fatal(err)
		}
		res = e.do(t, "POST", "/v1/runs/run-ops/resume", map[string]any{"owner": "operator-console", "ttl_ms": 5000}, nil)
		p := expectProblem(t, res, http.StatusUnprocessableEntity, "resume-refused")
		schemas.validate(t, "ResumeRefusal", res.body)
		var refusal struct {
			FailedCheck string `json:"failed_check"`
			Run         run.Run
		}
		_ = json.Unmarshal(res.body, &refusal)
		if refusal.FailedCheck != "operations" || !strings.Contains(p.Detail, op.OperationID) || refusal.Run.Status != run.StatusRunning {
			t.Fatalf("refusal: %s", res.body)
		}
		var checks struct {
			Checks []struct{ Name, Status string }
		}
		_ = json.Unmarshal(res.body, &checks)
		if n := len(checks.Checks); n != 8 || checks.Checks[n-1].Name != "operations" || checks.Checks[n-1].Status != "failed" {
			t.Fatalf("refusal checks: %s", res.body)
		}
		cur, _ := e.c.GetRun(context.Background(), "run-ops")
		if cur.Status != run.StatusRunning || cur.StatusReason != r.StatusReason || cur.StateRevision != r.StateRevision || cur.LeaseOwner != "" {
			t.Fatalf("run after refusal: %+v", cur)
		}
		// Asked to, a refusal suspends the run for an operator (rule 4), so
		// no worker takes it up meanwhile.
		res = e.do(t, "POST", "/v1/runs/run-ops/resume", map[string]any{"owner": "operator-console", "ttl_ms": 5000, "suspend_on_refusal": true}, nil)
		expectProblem(t, res, http.StatusUnprocessableEntity, "resume-refused")
		if cur, _ = e.c.GetRun(context.Background(), "run-ops"); cur.Status != run.StatusSuspended || !strings.Contains(cur.StatusReason, "operations") {
			t.Fatalf("run after a refusal asked to suspend it: %+v", cur)
		}
		r = cur
		// No worker takes it up by a plain lease either (it could carry on
		// past the check that refused it); the run stays as it was.
		held := e.do(t, "POST", "/v1/runs/run-ops/lease", map[string]any{"owner": "sneaky", "ttl_ms": 5000}, nil)
		if p := expectProblem(t, held, http.StatusConflict, "run-not-active"); !strings.Contains(p.Detail, "/resume") {
			t.Errorf("the refusal does not say how to take the run up: %s", p.Detail)
		}
		if cur, _ = e.c.GetRun(context.Background(), "run-ops"); cur.Status != run.StatusSuspended || cur.StateRevision != r.StateRevision {
			t.Fatalf("run after a refused lease: %+v", cur)
		}
		// The operator resolves it; the next resume passes every check.
		expectProblem(t, e.do(t, "POST", path+"/resolve", map[string]any{"outcome": "applied", "external_ref": "rf_1"}, nil), http.StatusUnprocessableEntity, "invalid-request")
		res = e.do(t, "POST", path+"/resolve", map[string]any{"outcome": "applied", "external_ref": "rf_1", "by": "alice", "reason": "bank statement"}, nil)
		if res.status != 200 || !strings.Contains(string(res.body), `"succeeded"`) {
			t.Fatalf("resolve: %d %s", res.status, res.body)
		}
		res = e.do(t, "POST", "/v1/runs/run-ops/resume", map[string]any{"owner": "worker-2", "ttl_ms": 5000}, nil)
		if res.status != 200 {
			t.Fatalf("resume after resolution: %d %s", res.status, res.body)
		}
		schemas.validate(t, "ResumeResult", res.body)
		var rr struct {
			Run    run.Run
			Lease  run.Lease
			Checks []struct{ Name, Status string }
		}
		_ = json.Unmarshal(res.body, &rr)
		if rr.Run.Status != run.StatusRunning || rr.Lease.Owner != "worker-2" || len(rr.Checks) != 10 || rr.Checks[7].Name != "operations" || rr.Checks[7].Status != "passed" {
			t.Fatalf("resume result: %s", res.body)
		}
		expectProblem(t, e.do(t, "POST", "/v1/runs/run-ops/resume", map[string]any{"owner": "worker-3"}, nil), http.StatusConflict, "lease-held")
		// A resume that expects another revision says which one the run is at.
		if p := expectProblem(t, e.do(t, "POST", "/v1/runs/run-ops/resume", map[string]any{"owner": "worker-2", "expected_revision": 1}, nil), http.StatusConflict, "revision-conflict"); p.CurrentRevision != rr.Run.StateRevision {
			t.Fatalf("resume conflict: current_revision %d, want %d", p.CurrentRevision, rr.Run.StateRevision)
		}
		expectProblem(t, e.do(t, "GET", "/v1/operations/op_nope", nil, nil), http.StatusNotFound, "operation-not-found")
		res = e.do(t, "GET", "/v1/runs/run-ops/operations", nil, nil)
		schemas.validate(t, "OperationList", res.body)
		if !strings.Contains(string(res.body), op.OperationID) {
			t.Fatalf("list: %s", res.body)
		}
	})
}

// TestApprovalsAPI: request, decide, expiry and the admin role on decisions.
func TestApprovalsAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		schemas := compileOpenAPI(t, e)
		e.leasedRun(t, "run-ap")
		req := map[string]any{"step_id": "approve", "request_digest": "sha256:r", "summary": map[string]int{"amount": 120}, "ttl_ms": 60000}
		res := e.do(t, "POST", "/v1/runs/run-ap/approvals", req, nil)
		if res.status != http.StatusCreated {
			t.Fatalf("request: %d %s", res.status, res.body)
		}
		schemas.validate(t, "Approval", res.body)
		var a struct {
			ApprovalID string `json:"approval_id"`
			Effective  string `json:"effective_status"`
		}
		_ = json.Unmarshal(res.body, &a)
		if a.Effective != "pending" {
			t.Fatalf("new approval: %s", res.body)
		}
		expectProblem(t, e.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"approve": true}, nil), http.StatusUnprocessableEntity, "invalid-request")
		// A decision that says neither yes nor no is refused, not taken as a no.
		expectProblem(t, e.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"by": "bob"}, nil), http.StatusUnprocessableEntity, "invalid-request")
		res = e.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"approve": true, "by": "carol", "reason": "ok"}, nil)
		if res.status != 200 || !strings.Contains(string(res.body), `"effective_status":"approved"`) {
			t.Fatalf("decide: %d %s", res.status, res.body)
		}
		expectProblem(t, e.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"approve": false, "by": "dave"}, nil), http.StatusConflict, "approval-decided")
		short := map[string]any{"step_id": "other", "request_digest": "sha256:s", "ttl_ms": 100}
		res = e.do(t, "POST", "/v1/runs/run-ap/approvals", short, nil)
		_ = json.Unmarshal(res.body, &a)
		time.Sleep(120 * time.Millisecond) // real approval expiry
		expectProblem(t, e.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"approve": true, "by": "carol"}, nil), http.StatusConflict, "approval-expired")
		res = e.do(t, "GET", "/v1/approvals/"+a.ApprovalID, nil, nil)
		if !strings.Contains(string(res.body), `"effective_status":"expired"`) {
			t.Fatalf("expired approval: %s", res.body)
		}
		res = e.do(t, "GET", "/v1/runs/run-ap/approvals", nil, nil)
		schemas.validate(t, "ApprovalList", res.body)
		expectProblem(t, e.do(t, "GET", "/v1/approvals/apr_nope", nil, nil), http.StatusNotFound, "approval-not-found")

		// With keys, deciding needs the admin role.
		e2 := newEnv(t, backend, envOptions{keys: "writer-key-0123456789=t1:writer,admin-key-0123456789=t1:admin", apiKey: "writer-key-0123456789"})
		e2.leasedRun(t, "run-k")
		res = e2.do(t, "POST", "/v1/runs/run-k/approvals", req, map[string]string{"Authorization": "Bearer writer-key-0123456789"})
		_ = json.Unmarshal(res.body, &a)
		expectProblem(t, e2.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"approve": true, "by": "w"}, map[string]string{"Authorization": "Bearer writer-key-0123456789"}), http.StatusForbidden, "forbidden")
		if res := e2.do(t, "POST", "/v1/approvals/"+a.ApprovalID+"/decision", map[string]any{"approve": true, "by": "a"}, map[string]string{"Authorization": "Bearer admin-key-0123456789"}); res.status != 200 {
			t.Fatalf("admin decision: %d %s", res.status, res.body)
		}
	})
}

// TestApprovalAskedOnce: asking again for the approval of a request that
// is pending or approved (a retry after a lost answer) answers that
// approval (200), so no second one can be decided the other way; after a
// rejection, asking again is a new question (201).
func TestApprovalAskedOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		e.leasedRun(t, "run-once")
		ask := func(status int) string {
			t.Helper()
			res := e.do(t, "POST", "/v1/runs/run-once/approvals", map[string]any{"step_id": "pay", "request_digest": "sha256:aa", "ttl_ms": 60000}, nil)
			var a struct {
				ApprovalID string `json:"approval_id"`
			}
			if res.status != status || json.Unmarshal(res.body, &a) != nil || a.ApprovalID == "" {
				t.Fatalf("ask: %d %s, want %d", res.status, res.body, status)
			}
			return a.ApprovalID
		}
		first := ask(http.StatusCreated)
		if again := ask(http.StatusOK); again != first {
			t.Fatalf("asked again while pending: %s, want %s", again, first)
		}
		decide := func(id string, approve bool) {
			t.Helper()
			if res := e.do(t, "POST", "/v1/approvals/"+id+"/decision", map[string]any{"approve": approve, "by": "carol"}, nil); res.status != http.StatusOK {
				t.Fatalf("decide %s: %d %s", id, res.status, res.body)
			}
		}
		decide(first, true)
		if again := ask(http.StatusOK); again != first {
			t.Fatalf("asked again once approved: %s, want %s", again, first)
		}
		res := e.do(t, "GET", "/v1/runs/run-once/approvals", nil, nil)
		if n := strings.Count(string(res.body), `"approval_id"`); n != 1 {
			t.Fatalf("%d approvals of one request, want 1: %s", n, res.body)
		}
		e.leasedRun(t, "run-twice")
		res = e.do(t, "POST", "/v1/runs/run-twice/approvals", map[string]any{"step_id": "pay", "request_digest": "sha256:aa", "ttl_ms": 60000}, nil)
		var a struct {
			ApprovalID string `json:"approval_id"`
		}
		_ = json.Unmarshal(res.body, &a)
		decide(a.ApprovalID, false)
		res = e.do(t, "POST", "/v1/runs/run-twice/approvals", map[string]any{"step_id": "pay", "request_digest": "sha256:aa", "ttl_ms": 60000}, nil)
		var b struct {
			ApprovalID string `json:"approval_id"`
		}
		if res.status != http.StatusCreated || json.Unmarshal(res.body, &b) != nil || b.ApprovalID == a.ApprovalID {
			t.Fatalf("asked again after a rejection: %d %s", res.status, res.body)
		}
	})
}

// TestOperationsClient drives the same routes through the Go client, whose
// errors match the domain sentinels.
func TestOperationsClient(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	ctx := context.Background()
	e.leasedRun(t, "run-c")
	op, created, err := e.c.PrepareOperation(ctx, "run-c", client.PrepareOperation{BusinessKey: "k", StepID: "s", ToolName: "t", RequestDigest: "sha256:1"})
	if err != nil || !created {
		t.Fatalf("prepare: %v %v", created, err)
	}
	if _, _, err := e.c.PrepareOperation(ctx, "run-c", client.PrepareOperation{BusinessKey: "k", StepID: "s", ToolName: "t", RequestDigest: "sha256:2"}); !errors.Is(err, toolop.ErrDigestMismatch) {
		t.Fatalf("digest mismatch: %v", err)
	}
	if _, err := e.c.MarkOperation(ctx, op.OperationID, "started", client.OperationUpdate{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.MarkOperation(ctx, op.OperationID, "succeeded", client.OperationUpdate{ExternalRef: "r1", Result: map[string]int{"n": 1}})
	if err != nil || got.Status != toolop.StatusSucceeded || got.ExternalRef != "r1" {
		t.Fatalf("succeeded: %+v %v", got, err)
	}
	if _, err := e.c.MarkOperation(ctx, op.OperationID, "failed", client.OperationUpdate{Error: "x"}); !errors.Is(err, toolop.ErrInvalidTransition) {
		t.Fatalf("failed after succeeded: %v", err)
	}
	if ops, err := e.c.Operations(ctx, "run-c"); err != nil || len(ops) != 1 {
		t.Fatalf("operations: %v %v", ops, err)
	}
	a, err := e.c.RequestApproval(ctx, "run-c", "approve", "sha256:1", map[string]int{"amount": 5}, time.Minute)
	if err != nil || a.EffectiveStatus != "pending" {
		t.Fatalf("request approval: %+v %v", a, err)
	}
	if a, err = e.c.DecideApproval(ctx, a.ApprovalID, false, "lead", "no"); err != nil || a.EffectiveStatus != "rejected" {
		t.Fatalf("decide: %+v %v", a, err)
	}
	if _, err := e.c.DecideApproval(ctx, a.ApprovalID, true, "other", ""); !errors.Is(err, toolop.ErrApprovalDecided) {
		t.Fatalf("decide twice: %v", err)
	}
	if _, err := e.c.ResumeRun(ctx, "run-c", "w2", time.Second, 0); !errors.Is(err, run.ErrLeaseHeld) {
		t.Fatalf("resume while leased: %v", err)
	}
}

// TestEndedRunTakesNoSideEffects: once a run is cancelled, an operation of
// it is not started (a worker that missed the cancel would still perform
// it) and no new approval is asked for; one already started may still be
// settled, which records what happened.
func TestEndedRunTakesNoSideEffects(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		_, l := e.leasedRun(t, "run-end")
		prep := func(id string) string {
			res := e.do(t, "POST", "/v1/runs/run-end/operations", map[string]any{"operation_id": id, "step_id": "pay", "tool_name": "payments", "request_digest": "d"}, nil)
			if res.status != http.StatusCreated {
				t.Fatalf("prepare %s: %d %s", id, res.status, res.body)
			}
			return "/v1/operations/" + id
		}
		idle, inFlight := prep("op-idle"), prep("op-flight")
		if res := e.do(t, "POST", inFlight+"/started", nil, nil); res.status != 200 {
			t.Fatalf("start: %d %s", res.status, res.body)
		}
		asked := e.do(t, "POST", "/v1/runs/run-end/approvals", map[string]any{"step_id": "refund", "request_digest": "d", "ttl_ms": 60000}, nil)
		if asked.status != http.StatusCreated {
			t.Fatalf("approval before the cancel: %d %s", asked.status, asked.body)
		}
		pending := decodeAs[toolop.Approval](t, asked, http.StatusCreated)
		cur, _ := e.c.GetRun(context.Background(), "run-end")
		res := e.do(t, "POST", "/v1/runs/run-end/commit", map[string]any{"expected_revision": cur.StateRevision, "lease": l,
			"event": map[string]any{"event_type": "cancelled"}, "state": map[string]any{}, "status": "cancelled"}, nil)
		if res.status != 200 {
			t.Fatalf("cancel: %d %s", res.status, res.body)
		}
		expectProblem(t, e.do(t, "POST", idle+"/started", nil, nil), http.StatusConflict, "run-not-active")
		if op := decodeAs[toolop.Operation](t, e.do(t, "GET", idle, nil, nil), 200); op.Status != toolop.StatusPrepared || op.Attempts != 0 {
			t.Fatalf("a refused start changed the operation: %+v", op)
		}
		if res := e.do(t, "POST", inFlight+"/succeeded", map[string]any{"result": map[string]any{"charged": 100}}, nil); res.status != 200 {
			t.Fatalf("settling an operation in flight: %d %s", res.status, res.body)
		}
		expectProblem(t, e.do(t, "POST", "/v1/runs/run-end/approvals", map[string]any{"step_id": "pay", "request_digest": "d", "ttl_ms": 60000}, nil), http.StatusConflict, "run-not-active")
		if res := e.do(t, "GET", "/v1/runs/run-end/approvals", nil, nil); strings.Contains(string(res.body), `"pay"`) {
			t.Fatalf("a refused approval was stored: %s", res.body)
		}
		// One asked before the cancel is not decided after it.
		expectProblem(t, e.do(t, "POST", "/v1/approvals/"+pending.ApprovalID+"/decision", map[string]any{"approve": true, "by": "alice"}, nil), http.StatusConflict, "run-not-active")
		if a := decodeAs[toolop.Approval](t, e.do(t, "GET", "/v1/approvals/"+pending.ApprovalID, nil, nil), 200); a.Status != toolop.ApprovalPending {
			t.Fatalf("a refused decision changed the approval: %+v", a)
		}
	})
}

// TestOperatorSettlesASuspendedRun: a run a refused resume suspended for a
// check of its state (here its budget) is settled by an operator's lease
// and commit, then resumed; a worker's lease, or an operator's lease
// without the admin role, is refused.
func TestOperatorSettlesASuspendedRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const writer, admin = "writer-key-0123456789abcdef", "admin-key-0123456789abcdef"
		tn := testenv.RandomID("op-")
		e := serveEngine(t, openEngine(t, backend, memento.Config{}), writer+"="+tn+":writer,"+admin+"="+tn+":admin", writer)
		hw, ha := map[string]string{"Authorization": "Bearer " + writer}, map[string]string{"Authorization": "Bearer " + admin}
		budget := func(spent int) map[string]any {
			return map[string]any{"_memento": map[string]any{"budget": map[string]any{"max_steps": 2},
				"spent": map[string]any{"steps": spent, "tokens": 0, "cost_micros": 0, "wall_ms": 0}}}
		}
		if res := e.do(t, "POST", "/v1/runs", map[string]any{"run_id": "bu1", "workflow_name": "wf", "state": budget(0)}, hw); res.status != 201 {
			t.Fatalf("create: %d %s", res.status, res.body)
		}
		lease := decodeAs[run.Lease](t, e.do(t, "POST", "/v1/runs/bu1/lease", map[string]any{"owner": "w"}, hw), 200)
		if res := e.do(t, "POST", "/v1/runs/bu1/commit", map[string]any{"expected_revision": 1, "lease": lease,
			"event": map[string]any{"event_type": "step", "payload": map[string]any{"spend": map[string]any{"steps": 5}}}, "state": budget(5)}, hw); res.status != 200 {
			t.Fatalf("commit: %d %s", res.status, res.body)
		}
		if res := e.do(t, "DELETE", "/v1/runs/bu1/lease", map[string]any{"lease": lease}, hw); res.status/100 != 2 {
			t.Fatalf("release: %d %s", res.status, res.body)
		}
		expectProblem(t, e.do(t, "POST", "/v1/runs/bu1/resume", map[string]any{"owner": "w2", "suspend_on_refusal": true}, hw), http.StatusUnprocessableEntity, "resume-refused")
		expectProblem(t, e.do(t, "POST", "/v1/runs/bu1/lease", map[string]any{"owner": "w3"}, hw), http.StatusConflict, "run-not-active")
		expectProblem(t, e.do(t, "POST", "/v1/runs/bu1/lease", map[string]any{"owner": "w3", "operator": true}, hw), http.StatusForbidden, "forbidden")
		op := decodeAs[run.Lease](t, e.do(t, "POST", "/v1/runs/bu1/lease", map[string]any{"owner": "alice", "operator": true}, ha), 200)
		// The operator grants the budget the run needs, and hands it back.
		grant := budget(5)
		grant["_memento"].(map[string]any)["budget"] = map[string]any{"max_steps": 10}
		held := decodeAs[run.Run](t, e.do(t, "GET", "/v1/runs/bu1", nil, ha), 200)
		if held.Status != run.StatusSuspended {
			t.Fatalf("the run under the operator's lease: %+v", held)
		}
		// A note the operator leaves on it, the run still suspended, keeps
		// it held too: the refusal's reason stays first, the note after it.
		res := e.do(t, "POST", "/v1/runs/bu1/commit", map[string]any{"expected_revision": held.StateRevision, "lease": op,
			"event": map[string]any{"event_type": "operator.note"}, "state": budget(5), "status": "suspended", "status_reason": "looking at it, ticket 7"}, ha)
		if res.status != 200 {
			t.Fatalf("operator's note: %d %s", res.status, res.body)
		}
		noted := decodeAs[run.Run](t, e.do(t, "GET", "/v1/runs/bu1", nil, ha), 200)
		if noted.Status != run.StatusSuspended || !strings.HasPrefix(noted.StatusReason, held.StatusReason) || !strings.Contains(noted.StatusReason, "ticket 7") {
			t.Fatalf("after the operator's note: %s %q, want held (%q) with the note", noted.Status, noted.StatusReason, held.StatusReason)
		}
		res = e.do(t, "POST", "/v1/runs/bu1/commit", map[string]any{"expected_revision": noted.StateRevision, "lease": op,
			"event": map[string]any{"event_type": "operator.budget_raised", "payload": map[string]any{"by": "alice"}}, "state": grant}, ha)
		if res.status != 200 {
			t.Fatalf("operator commit: %d %s", res.status, res.body)
		}
		if res := e.do(t, "DELETE", "/v1/runs/bu1/lease", map[string]any{"lease": op}, ha); res.status/100 != 2 {
			t.Fatalf("operator release: %d %s", res.status, res.body)
		}
		// The operator's commit left the run suspended: it stays held, and
		// only a resume that passes its checks hands it to a worker.
		expectProblem(t, e.do(t, "POST", "/v1/runs/bu1/lease", map[string]any{"owner": "w3"}, hw), http.StatusConflict, "run-not-active")
		expectProblem(t, e.do(t, "POST", "/v1/runs/bu1/lease", map[string]any{"owner": "alice"}, hw), http.StatusConflict, "run-not-active")
		if res := e.do(t, "POST", "/v1/runs/bu1/resume", map[string]any{"owner": "w4"}, hw); res.status != 200 {
			t.Fatalf("resume after the operator settled it: %d %s", res.status, res.body)
		}
	})
}

// TestOperationTransitionChunkedEmptyBody: a transition's body is optional;
// a client that streams it (chunked, no Content-Length) and sends nothing is
// answered as one that sent Content-Length: 0, not refused for an empty body.
func TestOperationTransitionChunkedEmptyBody(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	e.preparedOp(t, "run-chunked", "op-chunked")
	for _, ct := range []string{"application/json", ""} {
		req, err := http.NewRequest("POST", e.http.URL+"/v1/operations/op-chunked/started", struct{ io.Reader }{strings.NewReader("")})
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && !(resp.StatusCode == http.StatusConflict && strings.Contains(string(body), "it is started")) {
			t.Fatalf("started with an empty chunked body (Content-Type %q): %d %s", ct, resp.StatusCode, body)
		}
	}
	op, err := e.c.GetOperation(context.Background(), "op-chunked")
	if err != nil || op.Status != toolop.StatusStarted {
		t.Fatalf("operation after started: %+v %v", op, err)
	}
}

// TestResumeInvalidInput: a resume body the document refuses (a negative
// expected_revision; no owner) is an invalid request (422), not a revision
// conflict, and its answer matches the operation's own 422 schema.
func TestResumeInvalidInput(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	schemas := compileOpenAPI(t, e)
	const answer = "/paths/~1v1~1runs~1%7Brun_id%7D~1resume/post/responses/422/content/application~1problem+json/schema"
	if _, _, err := e.c.CreateRun(context.Background(), run.CreateRequest{RunID: "run-rbad", WorkflowName: "wf", WorkflowVersion: "1", State: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []map[string]any{
		{"owner": "w", "expected_revision": -1},
		{"owner": ""},
		{"owner": "w", "ttl_ms": 5},
	} {
		res := e.do(t, "POST", "/v1/runs/run-rbad/resume", body, nil)
		expectProblem(t, res, http.StatusUnprocessableEntity, "invalid-request")
		schemas.validateAt(t, answer, fmt.Sprintf("resume answer to %v", body), res.body)
	}
	if cur, _ := e.c.GetRun(context.Background(), "run-rbad"); cur.StateRevision != 1 || cur.LeaseOwner != "" || cur.LeaseEpoch != 0 {
		t.Fatalf("run after refused resumes: %+v", cur)
	}
}

// TestOperatorLeaseCommitNeedsAdmin: settling a run held for an operator
// needs the admin role (README); a writer who rebuilds the operator's lease
// from the run it can read (owner, epoch, expiry) cannot commit under it,
// and the run stays held, unchanged.
func TestOperatorLeaseCommitNeedsAdmin(t *testing.T) {
	const writer, admin = "writer-key-0123456789abcdef", "admin-key-0123456789abcdef"
	tn := testenv.RandomID("opw-")
	e := serveEngine(t, openEngine(t, "sqlite", memento.Config{}), writer+"="+tn+":writer,"+admin+"="+tn+":admin", writer)
	hw, ha := map[string]string{"Authorization": "Bearer " + writer}, map[string]string{"Authorization": "Bearer " + admin}
	state := map[string]any{"_memento": map[string]any{"budget": map[string]any{"max_steps": 2},
		"spent": map[string]any{"steps": 2, "tokens": 0, "cost_micros": 0, "wall_ms": 0}}}
	if res := e.do(t, "POST", "/v1/runs", map[string]any{"run_id": "bu2", "workflow_name": "wf", "state": state}, hw); res.status != 201 {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	expectProblem(t, e.do(t, "POST", "/v1/runs/bu2/resume", map[string]any{"owner": "w", "suspend_on_refusal": true}, hw), http.StatusUnprocessableEntity, "resume-refused")
	decodeAs[run.Lease](t, e.do(t, "POST", "/v1/runs/bu2/lease", map[string]any{"owner": "alice", "operator": true}, ha), 200)
	held := decodeAs[run.Run](t, e.do(t, "GET", "/v1/runs/bu2", nil, hw), 200)
	if held.Status != run.StatusSuspended || held.LeaseExpiresAt == nil {
		t.Fatalf("held run: %+v", held)
	}
	rebuilt := run.Lease{Owner: held.LeaseOwner, Epoch: held.LeaseEpoch, ExpiresAt: *held.LeaseExpiresAt}
	expectProblem(t, e.do(t, "POST", "/v1/runs/bu2/commit", map[string]any{"expected_revision": held.StateRevision, "lease": rebuilt,
		"event": map[string]any{"event_type": "sneaky"}, "state": map[string]any{}, "status": "running"}, hw), http.StatusForbidden, "forbidden")
	after := decodeAs[run.Run](t, e.do(t, "GET", "/v1/runs/bu2", nil, hw), 200)
	if after.Status != run.StatusSuspended || after.StateRevision != held.StateRevision || after.StatusReason != held.StatusReason {
		t.Fatalf("run after a writer's commit under the operator's lease: %+v", after)
	}
}

// TestTransitionRefusesFieldsItDoesNotRecord: a field a transition does
// not record is refused (422) and changes nothing: a success sent with an
// error, or a start with an outcome, was taken as a plain success or start
// and the field dropped without a word.
func TestTransitionRefusesFieldsItDoesNotRecord(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	e.preparedOp(t, "run-fields", "op-fields")
	expectProblem(t, e.do(t, "POST", "/v1/operations/op-fields/started", map[string]any{"outcome": "applied"}, nil), http.StatusUnprocessableEntity, "invalid-request")
	if res := e.do(t, "POST", "/v1/operations/op-fields/started", nil, nil); res.status != http.StatusOK {
		t.Fatalf("start: %d %s", res.status, res.body)
	}
	expectProblem(t, e.do(t, "POST", "/v1/operations/op-fields/succeeded", map[string]any{"external_ref": "r-1", "error": "boom"}, nil), http.StatusUnprocessableEntity, "invalid-request")
	expectProblem(t, e.do(t, "POST", "/v1/operations/op-fields/unknown", map[string]any{"result": map[string]any{"a": 1}}, nil), http.StatusUnprocessableEntity, "invalid-request")
	op, err := e.c.GetOperation(context.Background(), "op-fields")
	if err != nil || op.Status != toolop.StatusStarted {
		t.Fatalf("operation after refused transitions: %+v %v", op, err)
	}
	if res := e.do(t, "POST", "/v1/operations/op-fields/failed", map[string]any{"external_ref": "r-1", "error": "card declined"}, nil); res.status != http.StatusOK {
		t.Fatalf("failed with its fields: %d %s", res.status, res.body)
	}
}
