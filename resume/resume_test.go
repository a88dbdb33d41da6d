package resume_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

type fixture struct {
	db   *divergent
	runs *run.Service
	ops  *toolop.Service
	v    *resume.Verifier
}

func setup(t *testing.T) fixture { return setupFaults(t, faultstore.New(1)) }

// setupFaults is setup with the stores behind the injector's rules.
func setupFaults(t *testing.T, in *faultstore.Injector) fixture {
	mem := memstore.New()
	db := &divergent{Store: mem}
	f := fixture{db: db, runs: run.NewService(in.Runs(db), run.Options{}), ops: toolop.NewService(in.Ops(mem), nil)}
	f.v = &resume.Verifier{Runs: f.runs, Ops: f.ops}
	return f
}

// divergent is a run store that can be told to answer a run's state as
// something other than what its log's last snapshot holds: the damage a
// hand edit or a torn write would leave behind.
type divergent struct {
	*memstore.Store
	mu    sync.Mutex
	state map[string]json.RawMessage
}

func (d *divergent) set(runID string, state json.RawMessage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == nil {
		d.state = map[string]json.RawMessage{}
	}
	d.state[runID] = state
}

func (d *divergent) GetRun(ctx context.Context, tenantID, runID string) (run.Run, error) {
	r, err := d.Store.GetRun(ctx, tenantID, runID)
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.state[runID]; ok && err == nil {
		r.State = s
	}
	return r, err
}

// newRun makes a run with one committed step and a control object, leaves it
// with no lease, and returns it.
func (f fixture) newRun(t *testing.T, id string, ctl control.Record) run.Run {
	t.Helper()
	ctx := context.Background()
	state, _ := control.Write(json.RawMessage(`{"a":1}`), ctl)
	r, _, err := f.runs.Create(ctx, "t1", run.CreateRequest{RunID: id, WorkflowName: "wf", WorkflowVersion: "1", State: state, NextStep: "s1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.runs.AcquireLease(ctx, "t1", id, "w0", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"spend": ctl.Spent})
	r, _, err = f.runs.Commit(ctx, "t1", id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: state, NextStep: "s2",
		Event: run.EventInput{EventType: "step.completed", StepID: "s1", Payload: payload}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.runs.ReleaseLease(ctx, "t1", id, l); err != nil {
		t.Fatal(err)
	}
	return r
}

func (f fixture) resume(id string) (resume.Result, error) {
	return f.v.Resume(context.Background(), resume.Request{TenantID: "t1", RunID: id, Owner: "w1", LeaseTTL: time.Minute})
}

// expectRefused resumes id and wants a refusal by check that changes nothing
// but the lease it took and gave back.
func expectRefused(t *testing.T, f fixture, id, check, detail string) {
	t.Helper()
	ctx := context.Background()
	before, err := f.runs.Get(ctx, "t1", id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.resume(id)
	if !errors.Is(err, resume.ErrRefused) || res.FailedCheck != check || !strings.Contains(res.Reason, detail) {
		t.Fatalf("resume %s: err %v, failed %q, reason %q; want %s refusing with %q", id, err, res.FailedCheck, res.Reason, check, detail)
	}
	if last := res.Checks[len(res.Checks)-1]; last.Name != check || last.Status != resume.Failed {
		t.Fatalf("checks end with %+v, want %s failed", last, check)
	}
	r, _ := f.runs.Get(ctx, "t1", id)
	if r.Status != before.Status || r.StatusReason != before.StatusReason || r.StateRevision != before.StateRevision ||
		run.Digest(r.State) != run.Digest(before.State) || r.LeaseOwner != "" ||
		r.LeaseEpoch != before.LeaseEpoch || !r.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a refused resume changed the run: before %s %q rev %d epoch %d, after %s %q rev %d lease %q epoch %d",
			before.Status, before.StatusReason, before.StateRevision, before.LeaseEpoch, r.Status, r.StatusReason, r.StateRevision, r.LeaseOwner, r.LeaseEpoch)
	}
}

// The workflow engine asks a refusal to suspend the run with the reason.
func TestResumeSuspendOnRefusal(t *testing.T) {
	f := setup(t)
	before := f.newRun(t, "susp", control.Record{Artifacts: []control.ArtifactRef{{URI: "s3://b/k", Digest: "sha256:1"}}})
	res, err := f.v.Resume(context.Background(), resume.Request{TenantID: "t1", RunID: "susp", Owner: "w1", LeaseTTL: time.Minute, SuspendOnRefusal: true})
	if !errors.Is(err, resume.ErrRefused) || res.FailedCheck != resume.CheckArtifacts {
		t.Fatalf("resume: %v %q", err, res.FailedCheck)
	}
	r, _ := f.runs.Get(context.Background(), "t1", "susp")
	if r.Status != run.StatusSuspended || r.StatusReason != res.Reason || r.LeaseOwner != "" || r.StateRevision != before.StateRevision+1 {
		t.Fatalf("after refusal: %s %q lease %q rev %d", r.Status, r.StatusReason, r.LeaseOwner, r.StateRevision)
	}
}

func TestResumePasses(t *testing.T) {
	f := setup(t)
	f.newRun(t, "ok", control.Record{Budget: control.Budget{MaxSteps: 5}, Spent: control.Spend{Steps: 1}})
	res, err := f.resume("ok")
	if err != nil || res.Refused || res.Run.Status != run.StatusRunning || res.Lease.Owner != "w1" {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if len(res.Checks) != 10 || res.Checks[9].Name != resume.CheckBudgets || !strings.Contains(res.Checks[9].Detail, "remaining steps 4") {
		t.Fatalf("checks: %+v", res.Checks)
	}
	evs, _ := f.runs.Events(context.Background(), "t1", "ok", 0, 100)
	if last := evs[len(evs)-1]; last.EventType != resume.EventVerified {
		t.Fatalf("last event %s", last.EventType)
	}
	// Another owner now finds the lease held: 409 material, nothing changes.
	if _, err := f.v.Resume(context.Background(), resume.Request{TenantID: "t1", RunID: "ok", Owner: "w2", LeaseTTL: time.Minute}); !errors.Is(err, run.ErrLeaseHeld) {
		t.Fatalf("second resume: %v", err)
	}
	// Another tenant does not see the run at all.
	if _, err := f.v.Resume(context.Background(), resume.Request{TenantID: "t2", RunID: "ok", Owner: "w2", LeaseTTL: time.Minute}); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
}

func TestResumeRevisionCheck(t *testing.T) {
	f := setup(t)
	r := f.newRun(t, "rev", control.Record{})
	_, err := f.v.Resume(context.Background(), resume.Request{TenantID: "t1", RunID: "rev", Owner: "w1", LeaseTTL: time.Minute, ExpectedRevision: r.StateRevision - 1})
	if !errors.Is(err, run.ErrRevisionConflict) {
		t.Fatalf("stale expected revision: %v", err)
	}
	got, _ := f.runs.Get(context.Background(), "t1", "rev")
	if got.StateRevision != r.StateRevision || got.LeaseOwner != "" {
		t.Fatalf("run changed by a refused resume: %+v", got)
	}
}

// The materialized state no longer matches the last event's snapshot.
func TestResumeRefusesDivergedState(t *testing.T) {
	f := setup(t)
	f.newRun(t, "div", control.Record{})
	f.db.set("div", json.RawMessage(`{"a":2}`))
	expectRefused(t, f, "div", resume.CheckEvents, "differs from the snapshot")
}

func TestResumeRefusesBudgetMismatch(t *testing.T) {
	f := setup(t)
	// The state claims less spend than the log recorded.
	r := f.newRun(t, "budget", control.Record{Budget: control.Budget{MaxTokens: 100}, Spent: control.Spend{Tokens: 10}})
	ctx := context.Background()
	l, _ := f.runs.AcquireLease(ctx, "t1", "budget", "w0", 0, time.Minute)
	state, _ := control.Write(r.State, control.Record{Budget: control.Budget{MaxTokens: 100}, Spent: control.Spend{Tokens: 10}})
	if _, _, err := f.runs.Commit(ctx, "t1", "budget", run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: state, NextStep: "s3",
		Event: run.EventInput{EventType: "step.completed", StepID: "s2", Payload: json.RawMessage(`{"spend":{"tokens":50}}`)}}); err != nil {
		t.Fatal(err)
	}
	_ = f.runs.ReleaseLease(ctx, "t1", "budget", l)
	expectRefused(t, f, "budget", resume.CheckBudgets, "differs from the log")
}

func TestResumeRefusesArtifactsAndContracts(t *testing.T) {
	f := setup(t)
	f.newRun(t, "art", control.Record{Artifacts: []control.ArtifactRef{{URI: "s3://b/k", Digest: "sha256:1"}}})
	expectRefused(t, f, "art", resume.CheckArtifacts, "no resolver")
	f.v.Artifacts = func(ctx context.Context, uri string) (string, error) { return "sha256:2", nil }
	f.newRun(t, "art2", control.Record{Artifacts: []control.ArtifactRef{{URI: "s3://b/k", Digest: "sha256:1"}}})
	expectRefused(t, f, "art2", resume.CheckArtifacts, "changed")
	f.v.Artifacts = func(ctx context.Context, uri string) (string, error) { return "sha256:1", nil }
	_ = f.ops.RegisterTool(toolop.Tool{Name: "pay", ContractVersion: "v2"})
	f.newRun(t, "tool", control.Record{Artifacts: []control.ArtifactRef{{URI: "s3://b/k", Digest: "sha256:1"}}, Tools: map[string]string{"pay": "v1"}})
	expectRefused(t, f, "tool", resume.CheckToolContracts, "contract is v2")
	f.v.Workflows = func(name, version string) (bool, error) { return true, errors.New("this code runs v2") }
	f.newRun(t, "wfv", control.Record{})
	expectRefused(t, f, "wfv", resume.CheckWorkflow, "this code runs v2")
}

// backends gives the verifier over each SQL store, with a way to change
// rows behind the store's back.
func backends(t *testing.T) map[string]struct {
	v    *resume.Verifier
	exec func(q string) error
} {
	out := map[string]struct {
		v    *resume.Verifier
		exec func(q string) error
	}{}
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memento.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	out["sqlite"] = struct {
		v    *resume.Verifier
		exec func(q string) error
	}{&resume.Verifier{Runs: run.NewService(db, run.Options{}), Ops: toolop.NewService(db, nil)},
		func(q string) error { _, err := db.SQL().Exec(q); return err }}
	pg, err := postgres.Open(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(pg.Close)
	out["postgres"] = struct {
		v    *resume.Verifier
		exec func(q string) error
	}{&resume.Verifier{Runs: run.NewService(pg, run.Options{}), Ops: toolop.NewService(pg, nil)},
		func(q string) error { _, err := pg.Pool().Exec(context.Background(), q); return err }}
	return out
}

// commitSteps commits n steps to a fresh run, each spending one step and
// changing one small field of a state that also carries a large one.
func commitSteps(t *testing.T, runs *run.Service, id string, n int) run.Run {
	t.Helper()
	ctx := context.Background()
	ctl := control.Record{Budget: control.Budget{MaxSteps: 1000}}
	state, _ := control.Write(json.RawMessage(`{"i":0,"blob":"`+strings.Repeat("x", 4096)+`"}`), ctl)
	r, _, err := runs.Create(ctx, "t1", run.CreateRequest{RunID: id, WorkflowName: "wf", State: state}, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := runs.AcquireLease(ctx, "t1", id, "w0", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		ctl.Spent.Steps++
		state, _ = control.Write(json.RawMessage(`{"i":`+strconv.Itoa(i)+`,"blob":"`+strings.Repeat("x", 4096)+`"}`), ctl)
		r, _, err = runs.Commit(ctx, "t1", id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: state,
			NextStep: "s" + strconv.Itoa(i+1), Event: run.EventInput{EventType: "step.completed", StepID: "s" + strconv.Itoa(i),
				Payload: json.RawMessage(`{"spend":{"steps":1}}`)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := runs.ReleaseLease(ctx, "t1", id, l); err != nil {
		t.Fatal(err)
	}
	return r
}

// Resume verifies only what no resume verified before, and still finds an
// event row altered behind the store's back in that part.
func TestResumeChainIncremental(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			runs := b.v.Runs
			resumeOK := func(id string) resume.Result {
				t.Helper()
				res, err := b.v.Resume(ctx, resume.Request{TenantID: "t1", RunID: id, Owner: "w1", LeaseTTL: time.Minute})
				if err != nil {
					t.Fatalf("resume %s: %v (%+v)", id, err, res.Checks)
				}
				if err := runs.ReleaseLease(ctx, "t1", id, res.Lease); err != nil {
					t.Fatal(err)
				}
				return res
			}
			refused := func(id, detail string) {
				t.Helper()
				before, _ := runs.Get(ctx, "t1", id)
				res, err := b.v.Resume(ctx, resume.Request{TenantID: "t1", RunID: id, Owner: "w1", LeaseTTL: time.Minute})
				if !errors.Is(err, resume.ErrRefused) || res.FailedCheck != resume.CheckEvents || !strings.Contains(res.Reason, detail) {
					t.Fatalf("resume %s: err %v, failed %q, reason %q; want event_sequence with %q", id, err, res.FailedCheck, res.Reason, detail)
				}
				after, _ := runs.Get(ctx, "t1", id)
				if after.StateRevision != before.StateRevision || after.Status != before.Status || after.LeaseOwner != "" {
					t.Fatalf("refusal changed the run: %+v", after)
				}
			}

			r := commitSteps(t, runs, "chain", 70)
			res := resumeOK("chain")
			if d := res.Checks[6].Detail; !strings.Contains(d, "events 1..71") {
				t.Fatalf("first resume verified %q, want events 1..71", d)
			}
			got, _ := runs.Get(ctx, "t1", "chain")
			if got.VerifiedSeq != r.StateRevision || got.StateRevision != r.StateRevision+1 {
				t.Fatalf("after resume: verified %d revision %d, want %d and %d", got.VerifiedSeq, got.StateRevision, r.StateRevision, r.StateRevision+1)
			}
			if got.Spent["steps"] != 70 || !strings.Contains(res.Checks[9].Detail, "remaining steps 930") {
				t.Fatalf("totals %v, budget check %q", got.Spent, res.Checks[9].Detail)
			}
			// The second resume reads only the event after the verified one:
			// an old row altered since is not re-read (it was verified)...
			if err := b.exec(`UPDATE run_events SET step_id = 'forged' WHERE tenant_id = 't1' AND run_id = 'chain' AND seq = 10`); err != nil {
				t.Fatal(err)
			}
			res = resumeOK("chain")
			if d := res.Checks[6].Detail; !strings.Contains(d, "events 72..72") {
				t.Fatalf("second resume verified %q, want only event 72", d)
			}

			// ...while a row altered in the part not yet verified is found.
			commitSteps(t, runs, "tamper", 40)
			if err := b.exec(`UPDATE run_events SET payload = '{"spend":{"steps":0}}' WHERE tenant_id = 't1' AND run_id = 'tamper' AND seq = 20`); err != nil {
				t.Fatal(err)
			}
			refused("tamper", "event 20 does not match the hash chain")
			// A state delta altered, and a gap, likewise.
			commitSteps(t, runs, "delta", 40)
			if err := b.exec(`UPDATE run_events SET delta = '{"s":{"i":999},"d":[]}' WHERE tenant_id = 't1' AND run_id = 'delta' AND seq = 35`); err != nil {
				t.Fatal(err)
			}
			refused("delta", "event 35 does not match the hash chain")
			commitSteps(t, runs, "gap", 10)
			if err := b.exec(`DELETE FROM run_events WHERE tenant_id = 't1' AND run_id = 'gap' AND seq = 5`); err != nil {
				t.Fatal(err)
			}
			refused("gap", "seq 6 follows 4")
		})
	}
}

// Under a small state limit the resume events still fit: the checks (in
// the caller's answer anyway) are left out of their payloads, so a refusal
// still suspends the run and a passing resume is still recorded, instead
// of both failing as too large.
func TestResumeEventsFitSmallStateLimit(t *testing.T) {
	const limit = 400
	mem := memstore.New()
	f := fixture{db: &divergent{Store: mem}, ops: toolop.NewService(mem, nil)}
	f.runs = run.NewService(f.db, run.Options{MaxStateBytes: limit})
	f.v = &resume.Verifier{Runs: f.runs, Ops: f.ops}
	ctx := context.Background()
	lastPayload := func(id, eventType string) map[string]any {
		t.Helper()
		evs, err := f.runs.Events(ctx, "t1", id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		var p map[string]any
		if last.EventType != eventType || json.Unmarshal(last.Payload, &p) != nil || len(last.Payload) > limit {
			t.Fatalf("last event of %s: %s %s, want %s within %d bytes", id, last.EventType, last.Payload, eventType, limit)
		}
		return p
	}

	before := f.newRun(t, "small-refused", control.Record{Artifacts: []control.ArtifactRef{{URI: "s3://b/k", Digest: "sha256:1"}}})
	res, err := f.v.Resume(ctx, resume.Request{TenantID: "t1", RunID: "small-refused", Owner: "w1", LeaseTTL: time.Minute, SuspendOnRefusal: true})
	if !errors.Is(err, resume.ErrRefused) || res.FailedCheck != resume.CheckArtifacts || len(res.Checks) == 0 {
		t.Fatalf("resume: %v %q %d checks", err, res.FailedCheck, len(res.Checks))
	}
	r, _ := f.runs.Get(ctx, "t1", "small-refused")
	if r.Status != run.StatusSuspended || r.StateRevision != before.StateRevision+1 || r.LeaseOwner != "" {
		t.Fatalf("after refusal: %s rev %d lease %q, want suspended at rev %d", r.Status, r.StateRevision, r.LeaseOwner, before.StateRevision+1)
	}
	if p := lastPayload("small-refused", resume.EventRefused); p["failed_check"] != resume.CheckArtifacts || p["checks_omitted"] != true {
		t.Fatalf("refusal payload %v", p)
	}

	f.newRun(t, "small-ok", control.Record{})
	if res, err := f.resume("small-ok"); err != nil || res.Run.Status != run.StatusRunning || len(res.Checks) == 0 {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if p := lastPayload("small-ok", resume.EventVerified); p["owner"] != "w1" || p["checks_omitted"] != true {
		t.Fatalf("verified payload %v", p)
	}
}

// movingStore runs hook once, the first time the event log is read: a
// concurrent caller acting between a resume's read of the run and of its log.
type movingStore struct {
	*memstore.Store
	fired atomic.Bool
	hook  func()
}

func (m *movingStore) ListEvents(ctx context.Context, tenantID, runID string, after int64, limit int) ([]run.Event, error) {
	if m.hook != nil && m.fired.CompareAndSwap(false, true) {
		m.hook()
	}
	return m.Store.ListEvents(ctx, tenantID, runID, after, limit)
}

// Two workers resume the same run at once: the one whose dry pass read the
// run before the other took it and committed its verification reads a log
// that runs past the revision it read. That is a race, not a broken log:
// it answers that the lease is held, never an event_sequence refusal.
func TestResumeRaceIsNotARefusal(t *testing.T) {
	mem := memstore.New()
	ms := &movingStore{Store: mem}
	runs := run.NewService(ms, run.Options{})
	v := &resume.Verifier{Runs: runs, Ops: toolop.NewService(mem, nil)}
	ctx := context.Background()
	if _, _, err := runs.Create(ctx, "t1", run.CreateRequest{RunID: "race", WorkflowName: "wf", State: json.RawMessage(`{}`)}, ""); err != nil {
		t.Fatal(err)
	}
	var otherErr error
	ms.hook = func() {
		_, otherErr = v.Resume(ctx, resume.Request{TenantID: "t1", RunID: "race", Owner: "w2", LeaseTTL: time.Minute})
	}
	res, err := v.Resume(ctx, resume.Request{TenantID: "t1", RunID: "race", Owner: "w1", LeaseTTL: time.Minute})
	if otherErr != nil {
		t.Fatalf("the other resume: %v", otherErr)
	}
	if !errors.Is(err, run.ErrLeaseHeld) || errors.Is(err, resume.ErrRefused) {
		t.Fatalf("resume racing another: err %v, failed check %q (%s); want the lease held by w2", err, res.FailedCheck, res.Reason)
	}
	r, err := runs.Get(ctx, "t1", "race")
	if err != nil || r.LeaseOwner != "w2" || r.StateRevision != 2 {
		t.Fatalf("after the race: %v, lease %q, revision %d; want w2's resume alone", err, r.LeaseOwner, r.StateRevision)
	}
}

// TestResumeGuardNeedsItsOwnRunsOperation: an approval guard is spent only
// by its own run's operation once final; a guard naming another run's final
// operation (the state is the writer's) still needs its approval.
func TestResumeGuardNeedsItsOwnRunsOperation(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	other, _, err := f.ops.Prepare(ctx, "t1", toolop.PrepareRequest{OperationID: "op-other", RunID: "run-other", StepID: "pay", ToolName: "payments.refund", RequestDigest: "sha256:x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ops.Start(ctx, "t1", other.OperationID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ops.Succeed(ctx, "t1", other.OperationID, toolop.Outcome{ExternalRef: "r1"}); err != nil {
		t.Fatal(err)
	}
	ctl := control.Record{}
	ctl.SetGuard(control.ApprovalGuard{StepID: "approve", RequestDigest: "sha256:x", OperationID: other.OperationID})
	f.newRun(t, "guarded", ctl)
	expectRefused(t, f, "guarded", resume.CheckApprovals, "approval")
}
