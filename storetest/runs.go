package storetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
)

// RunStoreSuite checks that a run.Store honours the contract written in
// run/store.go. open is called once per subtest and must return an empty
// store that stays usable until t's cleanup (the retention subtest counts
// deletions across tenants, so it cannot share a store with other tests).
// Subtests also use random tenant ids, so a backend may share one database.
func RunStoreSuite(t *testing.T, open func(t *testing.T) run.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s run.Store)
	}{
		{"CreateGet", testCreateGet},
		{"Idempotency", testIdempotency},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"DuplicateRunID", testDuplicateRunID},
		{"TenantIsolation", testTenantIsolation},
		{"ListPaging", testListPaging},
		{"Commit", testCommit},
		{"StaleRevision", testStaleRevision},
		{"LeaseLost", testLeaseLost},
		{"CommitCheckOrder", testCommitCheckOrder},
		{"ConcurrentCommitters", testConcurrentCommitters},
		{"ConcurrentLeaseAcquire", testConcurrentLeaseAcquire},
		{"LeaseTakeover", testLeaseTakeover},
		{"CreateLeased", testCreateLeased},
		{"EventSeqContinuity", testEventSeqContinuity},
		{"Checkpoints", testCheckpoints},
		{"ForkFidelity", testForkFidelity},
		{"ForkIdempotencyKey", testForkIdempotencyKey},
		{"CompactHistory", testCompactHistory},
		{"SpendOverflow", testSpendOverflow},
		{"RegisteredSchemas", testRegisteredSchemas},
		{"Migrations", testMigrations},
		{"StatusTransitions", testStatusTransitions},
		{"Retention", testRetention},
		{"StateSizeLimit", testStateSizeLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

// Lease TTLs: long enough never to expire by accident, short enough that
// the expiry tests sleep only a little.
const (
	longTTL  = time.Minute
	shortTTL = 300 * time.Millisecond
	// afterShortTTL is how long to sleep for a shortTTL lease to have expired.
	afterShortTTL = 400 * time.Millisecond
)

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func newTenant() string { return "t-" + randHex(6) }

func newID(prefix string) string { return prefix + "-" + randHex(6) }

// fx bundles a store, a service over it and one tenant.
type fx struct {
	t      *testing.T
	s      run.Store
	svc    *run.Service
	tenant string
}

func newFx(t *testing.T, s run.Store) *fx {
	return &fx{t: t, s: s, svc: run.NewService(s, run.Options{}), tenant: newTenant()}
}

func (f *fx) withTenant(tenant string) *fx {
	return &fx{t: f.t, s: f.s, svc: f.svc, tenant: tenant}
}

func (f *fx) create(workflow, state string) run.Run {
	f.t.Helper()
	r, created, err := f.svc.Create(f.t.Context(), f.tenant, run.CreateRequest{
		RunID:           newID("run"),
		WorkflowName:    workflow,
		WorkflowVersion: "1.0.0",
		State:           json.RawMessage(state),
		NextStep:        "start",
	}, "")
	if err != nil {
		f.t.Fatalf("create run: %v", err)
	}
	if !created {
		f.t.Fatalf("create run %s: created=false for a new run", r.RunID)
	}
	return r
}

func (f *fx) lease(runID, owner string, ttl time.Duration) run.Lease {
	f.t.Helper()
	l, err := f.svc.AcquireLease(f.t.Context(), f.tenant, runID, owner, 0, ttl)
	if err != nil {
		f.t.Fatalf("acquire lease of %s for %s: %v", runID, owner, err)
	}
	return l
}

func (f *fx) commitReq(r run.Run, l run.Lease, step, state string, status run.Status) run.CommitRequest {
	return run.CommitRequest{
		ExpectedRevision: r.StateRevision,
		Lease:            l,
		Event:            run.EventInput{EventType: "step.completed", StepID: step, Attempt: 1, Payload: json.RawMessage(`{"step":"` + step + `"}`)},
		State:            json.RawMessage(state),
		NextStep:         step + ".next",
		Status:           status,
	}
}

// commit applies one step and fails the test if it is refused.
func (f *fx) commit(r run.Run, l run.Lease, step, state string, status run.Status) run.Run {
	f.t.Helper()
	nr, _, err := f.svc.Commit(f.t.Context(), f.tenant, r.RunID, f.commitReq(r, l, step, state, status))
	if err != nil {
		f.t.Fatalf("commit %s on %s: %v", step, r.RunID, err)
	}
	return nr
}

// toStatus creates a run and moves it to status (through a commit).
func (f *fx) runIn(workflow string, status run.Status) run.Run {
	f.t.Helper()
	r := f.create(workflow, `{"n":0}`)
	if status == run.StatusRunning {
		return r
	}
	l := f.lease(r.RunID, "setup", longTTL)
	return f.commit(r, l, "to-"+string(status), `{"n":1}`, status)
}

func (f *fx) get(runID string) run.Run {
	f.t.Helper()
	r, err := f.s.GetRun(f.t.Context(), f.tenant, runID)
	if err != nil {
		f.t.Fatalf("get run %s: %v", runID, err)
	}
	return r
}

func (f *fx) events(runID string) []run.Event {
	f.t.Helper()
	var all []run.Event
	after := int64(0)
	for {
		page, err := f.s.ListEvents(f.t.Context(), f.tenant, runID, after, 100)
		if err != nil {
			f.t.Fatalf("list events of %s after %d: %v", runID, after, err)
		}
		checkAfter(f.t, page, after)
		all = append(all, page...)
		if len(page) < 100 {
			return all
		}
		after = page[len(page)-1].Seq
	}
}

// checkAfter fails unless page holds strictly increasing seqs above after,
// so a pager built on it always ends.
func checkAfter(t *testing.T, page []run.Event, after int64) {
	t.Helper()
	for _, ev := range page {
		if ev.Seq <= after {
			t.Fatalf("events after %d include seq %d", after, ev.Seq)
		}
		after = ev.Seq
	}
}

func (f *fx) event(runID string, seq int64) run.Event {
	f.t.Helper()
	ev, err := f.s.GetEvent(f.t.Context(), f.tenant, runID, seq)
	if err != nil {
		f.t.Fatalf("get event %d of %s: %v", seq, runID, err)
	}
	return ev
}

// snapshot is everything stored about one run, to prove a refused call changed nothing.
type snapshot struct {
	run         run.Run
	events      []run.Event
	checkpoints []run.Checkpoint
}

func (f *fx) snap(runID string) snapshot {
	f.t.Helper()
	cps, err := f.s.ListCheckpoints(f.t.Context(), f.tenant, runID, 0, "", 0)
	if err != nil {
		f.t.Fatalf("list checkpoints of %s: %v", runID, err)
	}
	evs := f.events(runID)
	// Snapshots of every event too: a refused commit must not touch them either.
	for i := range evs {
		evs[i] = f.event(runID, evs[i].Seq)
	}
	return snapshot{run: f.get(runID), events: evs, checkpoints: cps}
}

func (f *fx) assertUnchanged(before snapshot, what string) {
	f.t.Helper()
	after := f.snap(before.run.RunID)
	if d := diffRun(before.run, after.run); d != "" {
		f.t.Fatalf("%s changed the run: %s", what, d)
	}
	if len(before.events) != len(after.events) {
		f.t.Fatalf("%s changed the event count: %d -> %d", what, len(before.events), len(after.events))
	}
	for i := range before.events {
		if d := diffEvent(before.events[i], after.events[i], true); d != "" {
			f.t.Fatalf("%s changed event %d: %s", what, before.events[i].Seq, d)
		}
	}
	if !reflect.DeepEqual(cpKeys(before.checkpoints), cpKeys(after.checkpoints)) {
		f.t.Fatalf("%s changed the checkpoints: %v -> %v", what, cpKeys(before.checkpoints), cpKeys(after.checkpoints))
	}
}

func cpKeys(cps []run.Checkpoint) []string {
	out := []string{}
	for _, c := range cps {
		out = append(out, fmt.Sprintf("%s@%d", c.Label, c.Revision))
	}
	return out
}

// jsonEqual compares two JSON documents by value; numbers compare by their
// exact text so a backend that rounds through float64 is caught.
func jsonEqual(a, b []byte) bool {
	va, err1 := decodeJSON(a)
	vb, err2 := decodeJSON(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// diffRun returns "" if two runs are the same, else what differs.
func diffRun(a, b run.Run) string {
	var d []string
	add := func(name string, x, y any) { d = append(d, fmt.Sprintf("%s %v != %v", name, x, y)) }
	if a.TenantID != b.TenantID {
		add("tenant_id", a.TenantID, b.TenantID)
	}
	if a.RunID != b.RunID {
		add("run_id", a.RunID, b.RunID)
	}
	if a.WorkflowName != b.WorkflowName {
		add("workflow_name", a.WorkflowName, b.WorkflowName)
	}
	if a.WorkflowVersion != b.WorkflowVersion {
		add("workflow_version", a.WorkflowVersion, b.WorkflowVersion)
	}
	if a.StateSchemaVersion != b.StateSchemaVersion {
		add("state_schema_version", a.StateSchemaVersion, b.StateSchemaVersion)
	}
	if a.Status != b.Status {
		add("status", a.Status, b.Status)
	}
	if a.StatusReason != b.StatusReason {
		add("status_reason", a.StatusReason, b.StatusReason)
	}
	if a.NextStep != b.NextStep {
		add("next_step", a.NextStep, b.NextStep)
	}
	if !jsonEqual(a.State, b.State) {
		add("state", string(a.State), string(b.State))
	}
	if a.StateRevision != b.StateRevision {
		add("state_revision", a.StateRevision, b.StateRevision)
	}
	if a.LeaseOwner != b.LeaseOwner {
		add("lease_owner", a.LeaseOwner, b.LeaseOwner)
	}
	if a.LeaseEpoch != b.LeaseEpoch {
		add("lease_epoch", a.LeaseEpoch, b.LeaseEpoch)
	}
	if !sameTime(a.LeaseExpiresAt, b.LeaseExpiresAt) {
		add("lease_expires_at", a.LeaseExpiresAt, b.LeaseExpiresAt)
	}
	if a.ParentRunID != b.ParentRunID {
		add("parent_run_id", a.ParentRunID, b.ParentRunID)
	}
	if a.ParentRevision != b.ParentRevision {
		add("parent_revision", a.ParentRevision, b.ParentRevision)
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		add("created_at", a.CreatedAt, b.CreatedAt)
	}
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		add("updated_at", a.UpdatedAt, b.UpdatedAt)
	}
	return strings.Join(d, "; ")
}

// diffEvent compares the logged fields, and the snapshot too if withSnapshot.
func diffEvent(a, b run.Event, withSnapshot bool) string {
	var d []string
	add := func(name string, x, y any) { d = append(d, fmt.Sprintf("%s %v != %v", name, x, y)) }
	if a.Seq != b.Seq {
		add("seq", a.Seq, b.Seq)
	}
	if a.EventType != b.EventType {
		add("event_type", a.EventType, b.EventType)
	}
	if a.StepID != b.StepID {
		add("step_id", a.StepID, b.StepID)
	}
	if a.Attempt != b.Attempt {
		add("attempt", a.Attempt, b.Attempt)
	}
	if !jsonEqual(a.Payload, b.Payload) {
		add("payload", string(a.Payload), string(b.Payload))
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		add("created_at", a.CreatedAt, b.CreatedAt)
	}
	if withSnapshot {
		if !jsonEqual(a.State, b.State) {
			add("snapshot state", string(a.State), string(b.State))
		}
		if a.NextStep != b.NextStep {
			add("snapshot next_step", a.NextStep, b.NextStep)
		}
		if a.Status != b.Status {
			add("snapshot status", a.Status, b.Status)
		}
		if a.StateSchemaVersion != b.StateSchemaVersion {
			add("snapshot state_schema_version", a.StateSchemaVersion, b.StateSchemaVersion)
		}
	}
	return strings.Join(d, "; ")
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %v", what, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

// richState exercises JSON fidelity: nesting, exact big and decimal numbers,
// escapes, unicode, empty containers and null.
const richState = `{"order":{"id":"o-1","amount":"19.99","cents":1999,"items":[{"sku":"a","qty":2},{"sku":"b","qty":1}]},` +
	`"big":9007199254740993,"pi":3.14159,"neg":-0.5,"flag":true,"none":null,` +
	`"text":"h\u00e9llo \"quoted\" \\ \u65e5\u672c <tag>&","empty_obj":{},"empty_arr":[]}`

func testCreateGet(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	before := time.Now()
	r, created, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{
		RunID: "refund-42", WorkflowName: "refund", WorkflowVersion: "2.1.0",
		StateSchemaVersion: 3, State: json.RawMessage(richState), NextStep: "check-order",
	}, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !created {
		t.Fatalf("create: created=false for a new run")
	}
	want := run.Run{
		TenantID: f.tenant, RunID: "refund-42", WorkflowName: "refund", WorkflowVersion: "2.1.0",
		StateSchemaVersion: 3, Status: run.StatusRunning, NextStep: "check-order",
		State: json.RawMessage(richState), StateRevision: 1,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if d := diffRun(want, r); d != "" {
		t.Fatalf("created run: %s", d)
	}
	if r.CreatedAt.Before(before.Add(-time.Minute)) || r.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("created_at %v is not near now %v", r.CreatedAt, before)
	}
	if r.UpdatedAt.Before(r.CreatedAt) {
		t.Fatalf("updated_at %v before created_at %v", r.UpdatedAt, r.CreatedAt)
	}
	got := f.get("refund-42")
	if d := diffRun(r, got); d != "" {
		t.Fatalf("GetRun differs from what CreateRun returned: %s", d)
	}

	evs := f.events("refund-42")
	if len(evs) != 1 || evs[0].Seq != 1 || evs[0].EventType != run.EventRunCreated {
		t.Fatalf("events after create: %+v, want one %s at seq 1", evs, run.EventRunCreated)
	}
	if !json.Valid(evs[0].Payload) {
		t.Fatalf("run.created payload is not JSON: %q", evs[0].Payload)
	}
	ev := f.event("refund-42", 1)
	if d := diffEvent(evs[0], ev, false); d != "" {
		t.Fatalf("GetEvent(1) differs from ListEvents: %s", d)
	}
	if !jsonEqual(ev.State, []byte(richState)) || ev.NextStep != "check-order" || ev.Status != run.StatusRunning || ev.StateSchemaVersion != 3 {
		t.Fatalf("snapshot of seq 1: state %s next %q status %q v%d", ev.State, ev.NextStep, ev.Status, ev.StateSchemaVersion)
	}

	// A run id is generated when none is given; state defaults to {}.
	r2, _, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{WorkflowName: "refund"}, "")
	if err != nil {
		t.Fatalf("create without id: %v", err)
	}
	if r2.RunID == "" || r2.RunID == r.RunID {
		t.Fatalf("generated run id %q", r2.RunID)
	}
	if !jsonEqual(f.get(r2.RunID).State, []byte(`{}`)) {
		t.Fatalf("default state %s, want {}", f.get(r2.RunID).State)
	}

	_, err = s.GetRun(ctx, f.tenant, "no-such-run")
	wantErr(t, err, run.ErrNotFound, "get unknown run")
	_, err = s.GetEvent(ctx, f.tenant, "refund-42", 2)
	wantErr(t, err, run.ErrRevisionNotFound, "get event past the log")
	_, err = s.GetEvent(ctx, f.tenant, "no-such-run", 1)
	wantErr(t, err, run.ErrNotFound, "get event of unknown run")
	_, err = s.ListEvents(ctx, f.tenant, "no-such-run", 0, 10)
	wantErr(t, err, run.ErrNotFound, "list events of unknown run")
}

func testIdempotency(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	req := run.CreateRequest{WorkflowName: "refund", State: json.RawMessage(`{"order":"o-1"}`), NextStep: "start"}

	// No run_id in the request: a retry must still match the first attempt.
	r1, created, err := f.svc.Create(ctx, f.tenant, req, "key-1")
	if err != nil || !created {
		t.Fatalf("first create: created=%v err=%v", created, err)
	}
	r2, created, err := f.svc.Create(ctx, f.tenant, req, "key-1")
	if err != nil {
		t.Fatalf("retry with the same key and request: %v", err)
	}
	if created {
		t.Fatalf("retry with the same key: created=true, want false")
	}
	if d := diffRun(r1, r2); d != "" {
		t.Fatalf("retry returned another run: %s", d)
	}

	other := req
	other.State = json.RawMessage(`{"order":"o-2"}`)
	_, _, err = f.svc.Create(ctx, f.tenant, other, "key-1")
	wantErr(t, err, run.ErrIdempotencyMismatch, "same key, different request")
	if !strings.Contains(err.Error(), `"key-1"`) || strings.Count(err.Error(), "-") > 2 {
		t.Fatalf("the mismatch should name the key, not an id generated for the attempt: %v", err)
	}

	withID := req
	withID.RunID = r1.RunID
	_, _, err = f.svc.Create(ctx, f.tenant, withID, "key-1")
	wantErr(t, err, run.ErrIdempotencyMismatch, "same key, request now naming the run id")

	// Store level: the key is looked up before the run id clashes.
	_, created, err = s.CreateRun(ctx, run.NewRun{
		Run:            run.Run{TenantID: f.tenant, RunID: r1.RunID, WorkflowName: "refund", Status: run.StatusRunning, State: json.RawMessage(`{}`), StateRevision: 1, StateSchemaVersion: 1},
		IdempotencyKey: "key-1", RequestDigest: "something-else",
	})
	wantErr(t, err, run.ErrIdempotencyMismatch, "store: same key, different digest")

	r3, created, err := f.svc.Create(ctx, f.tenant, req, "key-2")
	if err != nil || !created || r3.RunID == r1.RunID {
		t.Fatalf("another key: created=%v err=%v id=%s (first %s)", created, err, r3.RunID, r1.RunID)
	}

	// Keys are per tenant.
	g := f.withTenant(newTenant())
	r4, created, err := g.svc.Create(ctx, g.tenant, req, "key-1")
	if err != nil || !created || r4.RunID == r1.RunID {
		t.Fatalf("same key in another tenant: created=%v err=%v id=%s", created, err, r4.RunID)
	}

	runs, err := s.ListRuns(ctx, f.tenant, run.ListFilter{Limit: 100})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(runs) != 2 {
		t.Fatalf("tenant has %d runs, want 2 (one per key)", len(runs))
	}
	if n := len(f.events(r1.RunID)); n != 1 {
		t.Fatalf("idempotent retries appended events: %d, want 1", n)
	}
}

func testIdempotencyConcurrent(t *testing.T, s run.Store) {
	f := newFx(t, s)
	const n = 8
	req := run.CreateRequest{WorkflowName: "refund", State: json.RawMessage(`{"order":"o-9"}`)}
	type result struct {
		r       run.Run
		created bool
		err     error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			r, created, err := f.svc.Create(t.Context(), f.tenant, req, "race-key")
			results[i] = result{r, created, err}
		})
	}
	close(start)
	wg.Wait()
	createdCount := 0
	for i, res := range results {
		if res.err != nil {
			t.Fatalf("creator %d: %v", i, res.err)
		}
		if res.created {
			createdCount++
		}
		if res.r.RunID != results[0].r.RunID {
			t.Fatalf("creator %d got run %s, creator 0 got %s", i, res.r.RunID, results[0].r.RunID)
		}
	}
	if createdCount != 1 {
		t.Fatalf("%d creators saw created=true, want exactly 1", createdCount)
	}
	runs, err := s.ListRuns(t.Context(), f.tenant, run.ListFilter{Limit: 100})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after concurrent idempotent creates: %d (err %v), want 1", len(runs), err)
	}
}

func testDuplicateRunID(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("refund", `{"a":1}`)
	before := f.snap(r.RunID)
	_, _, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: r.RunID, WorkflowName: "other", State: json.RawMessage(`{"b":2}`)}, "")
	wantErr(t, err, run.ErrAlreadyExists, "create with a taken run id")
	_, _, err = f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: r.RunID, WorkflowName: "other"}, "fresh-key")
	wantErr(t, err, run.ErrAlreadyExists, "create with a taken run id and a new idempotency key")
	f.assertUnchanged(before, "a duplicate create")

	// The same run id in another tenant is another run.
	g := f.withTenant(newTenant())
	r2, created, err := g.svc.Create(ctx, g.tenant, run.CreateRequest{RunID: r.RunID, WorkflowName: "other", State: json.RawMessage(`{"b":2}`)}, "")
	if err != nil || !created {
		t.Fatalf("same run id in another tenant: created=%v err=%v", created, err)
	}
	if r2.TenantID != g.tenant || r2.WorkflowName != "other" {
		t.Fatalf("other tenant's run: %+v", r2)
	}
	f.assertUnchanged(before, "a create of the same id in another tenant")
}

func testTenantIsolation(t *testing.T, s run.Store) {
	a := newFx(t, s)
	ctx := t.Context()
	r := a.create("refund", `{"secret":"a"}`)
	l := a.lease(r.RunID, "worker-a", longTTL)
	r = a.commit(r, l, "s1", `{"secret":"a2"}`, "")
	if _, err := a.svc.Checkpoint(ctx, a.tenant, r.RunID, "cp", 0); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	before := a.snap(r.RunID)

	b := a.withTenant(newTenant())
	id := r.RunID
	_, err := s.GetRun(ctx, b.tenant, id)
	wantErr(t, err, run.ErrNotFound, "other tenant: GetRun")
	_, err = s.ListEvents(ctx, b.tenant, id, 0, 10)
	wantErr(t, err, run.ErrNotFound, "other tenant: ListEvents")
	_, err = s.GetEvent(ctx, b.tenant, id, 1)
	wantErr(t, err, run.ErrNotFound, "other tenant: GetEvent")
	_, err = s.AcquireLease(ctx, b.tenant, id, "worker-b", 0, longTTL)
	wantErr(t, err, run.ErrNotFound, "other tenant: AcquireLease")
	_, err = s.AcquireLease(ctx, b.tenant, id, l.Owner, l.Epoch, longTTL)
	wantErr(t, err, run.ErrNotFound, "other tenant: renew with the owner's lease")
	err = s.ReleaseLease(ctx, b.tenant, id, l.Owner, l.Epoch)
	wantErr(t, err, run.ErrNotFound, "other tenant: ReleaseLease")
	_, _, err = b.svc.Commit(ctx, b.tenant, id, a.commitReq(r, l, "evil", `{"secret":"b"}`, ""))
	wantErr(t, err, run.ErrNotFound, "other tenant: Commit with the owner's lease")
	_, err = s.CreateCheckpoint(ctx, b.tenant, id, "b-cp", 1)
	wantErr(t, err, run.ErrNotFound, "other tenant: CreateCheckpoint")
	_, err = s.ListCheckpoints(ctx, b.tenant, id, 0, "", 0)
	wantErr(t, err, run.ErrNotFound, "other tenant: ListCheckpoints")
	_, err = s.GetCheckpoint(ctx, b.tenant, id, "cp")
	wantErr(t, err, run.ErrNotFound, "other tenant: GetCheckpoint")
	_, err = b.svc.Fork(ctx, b.tenant, id, run.ForkRequest{FromRevision: 1, RunID: "stolen"})
	wantErr(t, err, run.ErrNotFound, "other tenant: Fork")
	_, err = b.svc.Fork(ctx, b.tenant, id, run.ForkRequest{Checkpoint: "cp", RunID: "stolen"})
	wantErr(t, err, run.ErrNotFound, "other tenant: Fork from checkpoint")
	_, err = s.GetRun(ctx, b.tenant, "stolen")
	wantErr(t, err, run.ErrNotFound, "other tenant: a refused fork left a run")
	runs, err := s.ListRuns(ctx, b.tenant, run.ListFilter{Limit: 100})
	if err != nil || len(runs) != 0 {
		t.Fatalf("other tenant lists %d runs (err %v), want 0", len(runs), err)
	}
	a.assertUnchanged(before, "another tenant's calls")

	// B's own run under the same id does not disturb A's.
	if _, _, err := b.svc.Create(ctx, b.tenant, run.CreateRequest{RunID: id, WorkflowName: "refund", State: json.RawMessage(`{"secret":"b"}`)}, ""); err != nil {
		t.Fatalf("other tenant creates the same run id: %v", err)
	}
	rb := b.get(id)
	lb := b.lease(id, "worker-b", longTTL)
	if lb.Epoch != 1 {
		t.Fatalf("other tenant's lease epoch %d, want 1 (epochs are per tenant's run)", lb.Epoch)
	}
	b.commit(rb, lb, "b1", `{"secret":"b2"}`, run.StatusCompleted)
	if _, err := b.svc.Checkpoint(ctx, b.tenant, id, "cp", 1); err != nil {
		t.Fatalf("other tenant checkpoints its own run with the same label: %v", err)
	}
	a.assertUnchanged(before, "another tenant's own run with the same id")
	runs, err = s.ListRuns(ctx, a.tenant, run.ListFilter{Limit: 100})
	if err != nil || len(runs) != 1 || runs[0].RunID != id || runs[0].TenantID != a.tenant {
		t.Fatalf("tenant A lists %+v (err %v), want only its run", runs, err)
	}
}

func testListPaging(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	type spec struct {
		wf     string
		status run.Status
	}
	var specs []spec
	for i := range 14 {
		wf := "wf-a"
		if i%2 == 1 {
			wf = "wf-b"
		}
		st := run.StatusRunning
		switch i % 3 {
		case 1:
			st = run.StatusSuspended
		case 2:
			st = run.StatusCompleted
		}
		specs = append(specs, spec{wf, st})
	}
	byID := map[string]spec{}
	for _, sp := range specs {
		r := f.runIn(sp.wf, sp.status)
		byID[r.RunID] = sp
	}
	// Noise in another tenant.
	g := f.withTenant(newTenant())
	for range 3 {
		g.runIn("wf-a", run.StatusRunning)
	}

	cases := []struct {
		status run.Status
		wf     string
	}{{"", ""}, {run.StatusSuspended, ""}, {"", "wf-a"}, {run.StatusCompleted, "wf-b"}, {run.StatusFailed, ""}, {"", "wf-none"}}
	for _, c := range cases {
		want := map[string]bool{}
		for id, sp := range byID {
			if (c.status == "" || sp.status == c.status) && (c.wf == "" || sp.wf == c.wf) {
				want[id] = true
			}
		}
		for _, limit := range []int{1, 3, 4, 100} {
			seen := map[string]bool{}
			var prev *run.Run
			cursor := ""
			pages := 0
			for {
				page, next, err := f.svc.List(ctx, f.tenant, c.status, c.wf, cursor, limit)
				if err != nil {
					t.Fatalf("list %+v limit %d: %v", c, limit, err)
				}
				pages++
				if len(page) > limit {
					t.Fatalf("list %+v: page of %d, limit %d", c, len(page), limit)
				}
				for i := range page {
					r := page[i]
					if r.TenantID != f.tenant {
						t.Fatalf("list shows tenant %s's run %s", r.TenantID, r.RunID)
					}
					if seen[r.RunID] {
						t.Fatalf("list %+v limit %d: run %s twice", c, limit, r.RunID)
					}
					seen[r.RunID] = true
					if !want[r.RunID] {
						t.Fatalf("list %+v: run %s (%s, %s) does not match the filter", c, r.RunID, r.WorkflowName, r.Status)
					}
					if prev != nil && (r.CreatedAt.Before(prev.CreatedAt) || (r.CreatedAt.Equal(prev.CreatedAt) && r.RunID <= prev.RunID)) {
						t.Fatalf("list %+v: %s (%v) after %s (%v) breaks (created_at, run_id) order", c, r.RunID, r.CreatedAt, prev.RunID, prev.CreatedAt)
					}
					prev = &r
				}
				if next == "" {
					break
				}
				if len(page) != limit {
					t.Fatalf("list %+v: a short page (%d of %d) with a next cursor", c, len(page), limit)
				}
				cursor = next
				if pages > 100 {
					t.Fatalf("list %+v: paging does not end", c)
				}
			}
			if len(seen) != len(want) {
				t.Fatalf("list %+v limit %d: saw %d runs, want %d (gaps)", c, limit, len(seen), len(want))
			}
			wantPages := (len(want) + limit - 1) / limit
			if wantPages == 0 {
				wantPages = 1
			}
			if pages != wantPages {
				t.Fatalf("list %+v limit %d: %d pages for %d runs, want %d", c, limit, pages, len(want), wantPages)
			}
		}
	}
	_, _, err := f.svc.List(ctx, f.tenant, "", "", "not-a-cursor!", 10)
	wantErr(t, err, run.ErrInvalidInput, "list with a malformed cursor")
}

func testCommit(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("refund", `{"n":0}`)
	l := f.lease(r.RunID, "worker-1", longTTL)
	req := run.CommitRequest{
		ExpectedRevision: 1, Lease: l,
		Event:    run.EventInput{EventType: "step.completed", StepID: "charge", Attempt: 2, Payload: json.RawMessage(`{"amount":"19.99","ok":true}`)},
		State:    json.RawMessage(richState),
		NextStep: "notify",
	}
	got, ev, err := f.svc.Commit(ctx, f.tenant, r.RunID, req)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got.StateRevision != 2 || got.NextStep != "notify" || got.Status != run.StatusRunning || !jsonEqual(got.State, []byte(richState)) {
		t.Fatalf("committed run: revision %d next %q status %q state %s", got.StateRevision, got.NextStep, got.Status, got.State)
	}
	if got.StateSchemaVersion != r.StateSchemaVersion || got.LeaseOwner != "worker-1" || got.LeaseEpoch != l.Epoch {
		t.Fatalf("committed run: schema v%d lease %s/%d, want v%d %s/%d", got.StateSchemaVersion, got.LeaseOwner, got.LeaseEpoch, r.StateSchemaVersion, l.Owner, l.Epoch)
	}
	if !got.CreatedAt.Equal(r.CreatedAt) || got.UpdatedAt.Before(r.UpdatedAt) {
		t.Fatalf("committed run: created_at %v (was %v), updated_at %v (was %v)", got.CreatedAt, r.CreatedAt, got.UpdatedAt, r.UpdatedAt)
	}
	if d := diffRun(got, f.get(r.RunID)); d != "" {
		t.Fatalf("GetRun differs from what Commit returned: %s", d)
	}
	wantEv := run.Event{Seq: 2, EventType: "step.completed", StepID: "charge", Attempt: 2, Payload: req.Event.Payload,
		CreatedAt: ev.CreatedAt, State: req.State, NextStep: "notify", Status: run.StatusRunning, StateSchemaVersion: r.StateSchemaVersion}
	if d := diffEvent(wantEv, ev, true); d != "" {
		t.Fatalf("committed event: %s", d)
	}
	if d := diffEvent(ev, f.event(r.RunID, 2), true); d != "" {
		t.Fatalf("GetEvent(2) differs from what Commit returned: %s", d)
	}
	evs := f.events(r.RunID)
	if len(evs) != 2 || diffEvent(ev, evs[1], false) != "" {
		t.Fatalf("events after one commit: %+v", evs)
	}

	// Status and reason change; the schema version stays when not given.
	got = f.get(r.RunID)
	req2 := f.commitReq(got, l, "wait", `{"n":2}`, run.StatusSuspended)
	req2.StatusReason = "waiting for approval"
	got2, ev2, err := f.svc.Commit(ctx, f.tenant, r.RunID, req2)
	if err != nil {
		t.Fatalf("commit suspend: %v", err)
	}
	if got2.Status != run.StatusSuspended || got2.StatusReason != "waiting for approval" || got2.StateRevision != 3 || ev2.Seq != 3 || ev2.Status != run.StatusSuspended {
		t.Fatalf("suspend commit: status %q reason %q revision %d event seq %d snapshot status %q", got2.Status, got2.StatusReason, got2.StateRevision, ev2.Seq, ev2.Status)
	}
	// No status: unchanged. A schema version: changed.
	req3 := f.commitReq(got2, l, "migrate-ish", `{"n":3}`, "")
	req3.StateSchemaVersion = 7
	got3, ev3, err := f.svc.Commit(ctx, f.tenant, r.RunID, req3)
	if err != nil {
		t.Fatalf("commit without status: %v", err)
	}
	if got3.Status != run.StatusSuspended || got3.StateSchemaVersion != 7 || ev3.StateSchemaVersion != 7 || ev3.Status != run.StatusSuspended {
		t.Fatalf("status-less commit: status %q v%d, event status %q v%d", got3.Status, got3.StateSchemaVersion, ev3.Status, ev3.StateSchemaVersion)
	}
	got4 := f.commit(got3, l, "resume", `{"n":4}`, run.StatusRunning)
	if got4.Status != run.StatusRunning || got4.StateSchemaVersion != 7 || got4.StateRevision != 5 || got4.StatusReason != "" {
		t.Fatalf("resume commit: status %q v%d revision %d reason %q", got4.Status, got4.StateSchemaVersion, got4.StateRevision, got4.StatusReason)
	}
	// Commits do not need a renewal in between, and renewal keeps the epoch.
	l2, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, l.Owner, l.Epoch, longTTL)
	if err != nil || l2.Epoch != l.Epoch {
		t.Fatalf("renew: epoch %d err %v, want epoch %d", l2.Epoch, err, l.Epoch)
	}
	f.commit(got4, l2, "after-renew", `{"n":5}`, "")
}

func testStaleRevision(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r0 := f.create("refund", `{"n":0}`)
	l := f.lease(r0.RunID, "w", longTTL)
	r1 := f.commit(r0, l, "s1", `{"n":1}`, "")
	before := f.snap(r1.RunID)
	for _, rev := range []int64{1, 3, 100} {
		req := f.commitReq(r1, l, "stale", `{"n":"stale"}`, "")
		req.ExpectedRevision = rev
		_, _, err := f.svc.Commit(ctx, f.tenant, r1.RunID, req)
		wantErr(t, err, run.ErrRevisionConflict, fmt.Sprintf("commit at revision %d when the run is at 2", rev))
		if errors.Is(err, run.ErrLeaseLost) {
			t.Fatalf("a revision conflict also reports a lost lease: %v", err)
		}
		f.assertUnchanged(before, fmt.Sprintf("a commit at stale revision %d", rev))
	}
	f.commit(r1, l, "s2", `{"n":2}`, "")
}

func testLeaseLost(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("refund", `{"n":0}`)
	l1 := f.lease(r.RunID, "w1", longTTL)
	if err := f.svc.ReleaseLease(ctx, f.tenant, r.RunID, l1); err != nil {
		t.Fatalf("release: %v", err)
	}
	before := f.snap(r.RunID)
	_, _, err := f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, l1, "x", `{"n":1}`, ""))
	wantErr(t, err, run.ErrLeaseLost, "commit after releasing the lease")
	f.assertUnchanged(before, "a commit on a released lease")

	l2 := f.lease(r.RunID, "w1", longTTL)
	if l2.Epoch != l1.Epoch+1 {
		t.Fatalf("re-acquire after release: epoch %d, want %d", l2.Epoch, l1.Epoch+1)
	}
	before = f.snap(r.RunID)
	for _, bad := range []run.Lease{
		{Owner: "w1", Epoch: l1.Epoch},     // stale epoch
		{Owner: "w1", Epoch: l2.Epoch + 1}, // future epoch
		{Owner: "w2", Epoch: l2.Epoch},     // wrong owner
	} {
		_, _, err := f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, bad, "x", `{"n":1}`, ""))
		wantErr(t, err, run.ErrLeaseLost, fmt.Sprintf("commit with lease %s/%d while %s/%d holds it", bad.Owner, bad.Epoch, l2.Owner, l2.Epoch))
		if errors.Is(err, run.ErrRevisionConflict) {
			t.Fatalf("a lost lease also reports a revision conflict: %v", err)
		}
		f.assertUnchanged(before, "a commit with a bad lease")
		_, err = f.svc.AcquireLease(ctx, f.tenant, r.RunID, bad.Owner, bad.Epoch, longTTL)
		wantErr(t, err, run.ErrLeaseLost, fmt.Sprintf("renew with lease %s/%d", bad.Owner, bad.Epoch))
		err = f.svc.ReleaseLease(ctx, f.tenant, r.RunID, bad)
		wantErr(t, err, run.ErrLeaseLost, fmt.Sprintf("release with lease %s/%d", bad.Owner, bad.Epoch))
		f.assertUnchanged(before, "a renewal or release with a bad lease")
	}

	// An expired lease commits nothing and cannot be renewed, even with no
	// other owner in sight.
	l3, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, "w1", l2.Epoch, shortTTL)
	if err != nil || l3.Epoch != l2.Epoch {
		t.Fatalf("renew with a short ttl: %+v %v", l3, err)
	}
	time.Sleep(afterShortTTL)
	before = f.snap(r.RunID)
	_, _, err = f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, l3, "late", `{"n":1}`, ""))
	wantErr(t, err, run.ErrLeaseLost, "commit with an expired lease")
	f.assertUnchanged(before, "a commit with an expired lease")
	_, err = f.svc.AcquireLease(ctx, f.tenant, r.RunID, "w1", l3.Epoch, longTTL)
	wantErr(t, err, run.ErrLeaseLost, "renew an expired lease")
	f.assertUnchanged(before, "a renewal of an expired lease")

	// Taking it afresh after expiry is a new epoch, even for the same owner.
	l4 := f.lease(r.RunID, "w1", longTTL)
	if l4.Epoch != l3.Epoch+1 {
		t.Fatalf("acquire after expiry: epoch %d, want %d", l4.Epoch, l3.Epoch+1)
	}
	f.commit(r, l4, "ok", `{"n":1}`, "")
}

// testCommitCheckOrder pins the order in which a failed commit is diagnosed:
// not found, transition, lease, revision.
func testCommitCheckOrder(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r0 := f.create("refund", `{"n":0}`)
	l := f.lease(r0.RunID, "w", longTTL)
	r1 := f.commit(r0, l, "s1", `{"n":1}`, "")
	before := f.snap(r1.RunID)

	// Stale revision and wrong owner: the lease is reported.
	req := f.commitReq(r0, run.Lease{Owner: "intruder", Epoch: l.Epoch}, "x", `{}`, "")
	_, _, err := f.svc.Commit(ctx, f.tenant, r1.RunID, req)
	wantErr(t, err, run.ErrLeaseLost, "stale revision and wrong owner")
	f.assertUnchanged(before, "a commit with a stale revision and a wrong owner")
	// Suspended -> completed is not allowed, with a bad lease and a stale revision too.
	req = f.commitReq(r0, run.Lease{Owner: "intruder", Epoch: 99}, "x", `{}`, "")
	r2 := f.commit(r1, l, "pause", `{"n":2}`, run.StatusSuspended)
	before = f.snap(r2.RunID)
	req.Status = run.StatusCompleted
	_, _, err = f.svc.Commit(ctx, f.tenant, r1.RunID, req)
	wantErr(t, err, run.ErrInvalidTransition, "bad transition, bad lease, stale revision")
	_, _, err = f.svc.Commit(ctx, f.tenant, "no-such-run", req)
	wantErr(t, err, run.ErrNotFound, "unknown run")
	f.assertUnchanged(before, "refused commits")

	// The store itself enforces FromStatuses.
	_, _, err = s.Commit(ctx, f.tenant, r2.RunID, run.StoreCommit{
		ExpectedRevision: r2.StateRevision, Owner: l.Owner, Epoch: l.Epoch,
		Event: run.EventInput{EventType: "x", Payload: json.RawMessage(`{}`)}, State: json.RawMessage(`{}`),
		Status: run.StatusRunning, FromStatuses: []run.Status{run.StatusRunning},
	})
	wantErr(t, err, run.ErrInvalidTransition, "store commit from a status not in FromStatuses")
	f.assertUnchanged(before, "a store commit from a status not allowed")
}

func testConcurrentCommitters(t *testing.T, s run.Store) {
	const workers, rounds = 16, 30
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("race", `{"count":0}`)
	l := f.lease(r.RunID, "shared-owner", longTTL)
	winners := make([]int, rounds)
	for round := range rounds {
		cur := f.get(r.RunID)
		if cur.StateRevision != int64(round+1) {
			t.Fatalf("round %d: revision %d, want %d", round, cur.StateRevision, round+1)
		}
		errs := make([]error, workers)
		evs := make([]run.Event, workers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				<-start
				_, ev, err := f.svc.Commit(ctx, f.tenant, r.RunID, run.CommitRequest{
					ExpectedRevision: cur.StateRevision,
					Lease:            l,
					Event:            run.EventInput{EventType: "step.completed", StepID: fmt.Sprintf("round-%d", round), Payload: json.RawMessage(fmt.Sprintf(`{"worker":%d}`, w))},
					State:            json.RawMessage(fmt.Sprintf(`{"count":%d,"worker":%d}`, round+1, w)),
					NextStep:         fmt.Sprintf("round-%d", round+1),
				})
				errs[w], evs[w] = err, ev
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: workers %d and %d both committed revision %d", round, winner, w, cur.StateRevision)
				}
				winner = w
				if evs[w].Seq != cur.StateRevision+1 {
					t.Fatalf("round %d: winner's event seq %d, want %d", round, evs[w].Seq, cur.StateRevision+1)
				}
			case errors.Is(err, run.ErrRevisionConflict):
			default:
				t.Fatalf("round %d worker %d: %v, want success or %v", round, w, err, run.ErrRevisionConflict)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no worker committed", round)
		}
		winners[round] = winner
	}
	final := f.get(r.RunID)
	if final.StateRevision != rounds+1 {
		t.Fatalf("final revision %d, want %d", final.StateRevision, rounds+1)
	}
	want := fmt.Sprintf(`{"count":%d,"worker":%d}`, rounds, winners[rounds-1])
	if !jsonEqual(final.State, []byte(want)) {
		t.Fatalf("final state %s, want %s", final.State, want)
	}
	evs := f.events(r.RunID)
	if len(evs) != rounds+1 {
		t.Fatalf("%d events, want %d", len(evs), rounds+1)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		if i == 0 {
			continue
		}
		wantPayload := fmt.Sprintf(`{"worker":%d}`, winners[i-1])
		if !jsonEqual(ev.Payload, []byte(wantPayload)) {
			t.Fatalf("event %d payload %s, want the round's winner %s", ev.Seq, ev.Payload, wantPayload)
		}
	}
}

func testConcurrentLeaseAcquire(t *testing.T, s run.Store) {
	const owners, rounds = 16, 10
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("race", `{}`)
	for round := range rounds {
		leases := make([]run.Lease, owners)
		errs := make([]error, owners)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for o := range owners {
			wg.Go(func() {
				<-start
				leases[o], errs[o] = s.AcquireLease(ctx, f.tenant, r.RunID, fmt.Sprintf("owner-%d", o), 0, longTTL)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for o, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: owners %d and %d both hold the lease", round, winner, o)
				}
				winner = o
			case errors.Is(err, run.ErrLeaseHeld):
			default:
				t.Fatalf("round %d owner %d: %v, want success or %v", round, o, err, run.ErrLeaseHeld)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody got the lease", round)
		}
		l := leases[winner]
		if l.Epoch != int64(round+1) || l.Owner != fmt.Sprintf("owner-%d", winner) {
			t.Fatalf("round %d: lease %+v, want epoch %d for owner-%d", round, l, round+1, winner)
		}
		got := f.get(r.RunID)
		if got.LeaseOwner != l.Owner || got.LeaseEpoch != l.Epoch {
			t.Fatalf("round %d: run shows lease %s/%d, winner has %s/%d", round, got.LeaseOwner, got.LeaseEpoch, l.Owner, l.Epoch)
		}
		if err := s.ReleaseLease(ctx, f.tenant, r.RunID, l.Owner, l.Epoch); err != nil {
			t.Fatalf("round %d: release: %v", round, err)
		}
	}
}

func testLeaseTakeover(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("refund", `{"n":0}`)
	la := f.lease(r.RunID, "worker-a", shortTTL)
	if la.Epoch != 1 || la.Owner != "worker-a" {
		t.Fatalf("first lease %+v, want worker-a epoch 1", la)
	}
	if until := time.Until(la.ExpiresAt); until <= 0 || until > shortTTL+time.Second {
		t.Fatalf("lease expires in %v for a ttl of %v", until, shortTTL)
	}
	got := f.get(r.RunID)
	if got.LeaseOwner != "worker-a" || got.LeaseEpoch != 1 || got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(la.ExpiresAt) {
		t.Fatalf("run lease %s/%d/%v, want %+v", got.LeaseOwner, got.LeaseEpoch, got.LeaseExpiresAt, la)
	}
	_, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, "worker-b", 0, shortTTL)
	wantErr(t, err, run.ErrLeaseHeld, "acquire a lease another owner holds")

	// The holder re-acquiring (epoch 0) or renewing extends with the same epoch.
	la2, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, "worker-a", 0, shortTTL)
	if err != nil || la2.Epoch != la.Epoch || la2.ExpiresAt.Before(la.ExpiresAt) {
		t.Fatalf("holder re-acquires: %+v %v, want epoch %d expiring no earlier than %v", la2, err, la.Epoch, la.ExpiresAt)
	}
	la3, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, "worker-a", la.Epoch, shortTTL)
	if err != nil || la3.Epoch != la.Epoch || la3.ExpiresAt.Before(la2.ExpiresAt) {
		t.Fatalf("holder renews: %+v %v", la3, err)
	}

	time.Sleep(afterShortTTL)
	lb := f.lease(r.RunID, "worker-b", longTTL)
	if lb.Epoch != la.Epoch+1 || lb.Owner != "worker-b" {
		t.Fatalf("takeover after expiry: %+v, want worker-b epoch %d", lb, la.Epoch+1)
	}
	before := f.snap(r.RunID)
	_, err = f.svc.AcquireLease(ctx, f.tenant, r.RunID, "worker-a", la.Epoch, shortTTL)
	wantErr(t, err, run.ErrLeaseLost, "old owner renews after takeover")
	_, err = f.svc.AcquireLease(ctx, f.tenant, r.RunID, "worker-a", 0, shortTTL)
	wantErr(t, err, run.ErrLeaseHeld, "old owner acquires after takeover")
	_, _, err = f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, la3, "a2", `{"n":"stale owner"}`, ""))
	wantErr(t, err, run.ErrLeaseLost, "old owner commits after takeover")
	err = f.svc.ReleaseLease(ctx, f.tenant, r.RunID, la3)
	wantErr(t, err, run.ErrLeaseLost, "old owner releases after takeover")
	f.assertUnchanged(before, "the fenced-off old owner")

	r = f.commit(r, lb, "b1", `{"n":2}`, "")
	if r.StateRevision != 2 {
		t.Fatalf("new owner's commit: revision %d, want 2", r.StateRevision)
	}
	if err := f.svc.ReleaseLease(ctx, f.tenant, r.RunID, lb); err != nil {
		t.Fatalf("new owner releases: %v", err)
	}
	got = f.get(r.RunID)
	if got.LeaseOwner != "" || got.LeaseExpiresAt != nil || got.LeaseEpoch != lb.Epoch {
		t.Fatalf("released lease shows %q/%d/%v, want no owner, no expiry, epoch kept at %d", got.LeaseOwner, got.LeaseEpoch, got.LeaseExpiresAt, lb.Epoch)
	}
	err = f.svc.ReleaseLease(ctx, f.tenant, r.RunID, lb)
	wantErr(t, err, run.ErrLeaseLost, "release twice")
	lc := f.lease(r.RunID, "worker-c", longTTL)
	if lc.Epoch != lb.Epoch+1 {
		t.Fatalf("acquire after release: epoch %d, want %d", lc.Epoch, lb.Epoch+1)
	}
}

func testEventSeqContinuity(t *testing.T, s run.Store) {
	const commits = 25
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("seq", `{"i":0}`)
	l := f.lease(r.RunID, "w", longTTL)
	for i := 1; i <= commits; i++ {
		r = f.commit(r, l, fmt.Sprintf("s%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	last := int64(commits + 1)
	var all []run.Event
	after := int64(0)
	for {
		page, err := s.ListEvents(ctx, f.tenant, r.RunID, after, 7)
		if err != nil {
			t.Fatalf("list events after %d: %v", after, err)
		}
		if len(page) > 7 {
			t.Fatalf("page of %d events for limit 7", len(page))
		}
		checkAfter(t, page, after)
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
	if int64(len(all)) != last {
		t.Fatalf("%d events, want %d", len(all), last)
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: gap or reorder", i, ev.Seq)
		}
		snap := f.event(r.RunID, ev.Seq)
		if !jsonEqual(snap.State, []byte(fmt.Sprintf(`{"i":%d}`, i))) {
			t.Fatalf("snapshot at seq %d: %s", ev.Seq, snap.State)
		}
	}
	page, err := s.ListEvents(ctx, f.tenant, r.RunID, 10, 3)
	if err != nil || len(page) != 3 || page[0].Seq != 11 || page[2].Seq != 13 {
		t.Fatalf("events after 10, limit 3: %+v %v", page, err)
	}
	page, err = s.ListEvents(ctx, f.tenant, r.RunID, last, 10)
	if err != nil || len(page) != 0 {
		t.Fatalf("events after the last: %+v %v", page, err)
	}
	for _, seq := range []int64{0, last + 1} {
		_, err := s.GetEvent(ctx, f.tenant, r.RunID, seq)
		wantErr(t, err, run.ErrRevisionNotFound, fmt.Sprintf("get event %d", seq))
	}
	if r.StateRevision != last {
		t.Fatalf("revision %d, want the last seq %d", r.StateRevision, last)
	}
}

func testCheckpoints(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("cp", `{"i":0}`)
	l := f.lease(r.RunID, "w", longTTL)
	for i := 1; i <= 3; i++ {
		r = f.commit(r, l, fmt.Sprintf("s%d", i), fmt.Sprintf(`{"i":%d}`, i), "")
	}
	for _, c := range []struct {
		label string
		rev   int64
	}{{"b-second", 2}, {"z-last", 4}, {"a-second", 2}, {"first", 1}} {
		cp, err := s.CreateCheckpoint(ctx, f.tenant, r.RunID, c.label, c.rev)
		if err != nil {
			t.Fatalf("checkpoint %s at %d: %v", c.label, c.rev, err)
		}
		if cp.Label != c.label || cp.Revision != c.rev || cp.CreatedAt.IsZero() {
			t.Fatalf("checkpoint %+v, want %s at %d", cp, c.label, c.rev)
		}
	}
	want := []string{"first@1", "a-second@2", "b-second@2", "z-last@4"}
	cps, err := s.ListCheckpoints(ctx, f.tenant, r.RunID, 0, "", 0)
	if err != nil || !reflect.DeepEqual(cpKeys(cps), want) {
		t.Fatalf("checkpoints %v (err %v), want %v", cpKeys(cps), err, want)
	}
	// Keyset pages: strictly after (revision, label), at most limit.
	var paged []run.Checkpoint
	afterRev, afterLabel := int64(0), ""
	for range 10 {
		page, err := s.ListCheckpoints(ctx, f.tenant, r.RunID, afterRev, afterLabel, 3)
		if err != nil || len(page) > 3 {
			t.Fatalf("checkpoint page after %d/%q: %d items, err %v", afterRev, afterLabel, len(page), err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		afterRev, afterLabel = page[len(page)-1].Revision, page[len(page)-1].Label
	}
	if !reflect.DeepEqual(cpKeys(paged), want) {
		t.Fatalf("checkpoints by pages of 3: %v, want %v", cpKeys(paged), want)
	}
	if page, err := s.ListCheckpoints(ctx, f.tenant, r.RunID, 2, "a-second", 0); err != nil || !reflect.DeepEqual(cpKeys(page), want[2:]) {
		t.Fatalf("checkpoints after a-second@2: %v (err %v), want %v", cpKeys(page), err, want[2:])
	}
	_, err = s.CreateCheckpoint(ctx, f.tenant, r.RunID, "a-second", 3)
	wantErr(t, err, run.ErrCheckpointExists, "reuse a label")
	_, err = f.svc.Checkpoint(ctx, f.tenant, r.RunID, "z-last", 0)
	wantErr(t, err, run.ErrCheckpointExists, "reuse a label through the service")
	for _, rev := range []int64{0, 5, 99} {
		_, err = s.CreateCheckpoint(ctx, f.tenant, r.RunID, fmt.Sprintf("rev-%d", rev), rev)
		wantErr(t, err, run.ErrRevisionNotFound, fmt.Sprintf("checkpoint revision %d of a run at 4", rev))
	}
	cps, err = s.ListCheckpoints(ctx, f.tenant, r.RunID, 0, "", 0)
	if err != nil || !reflect.DeepEqual(cpKeys(cps), want) {
		t.Fatalf("refused checkpoints changed the list: %v (err %v)", cpKeys(cps), err)
	}
	cp, err := s.GetCheckpoint(ctx, f.tenant, r.RunID, "z-last")
	if err != nil || cp.Revision != 4 {
		t.Fatalf("get checkpoint: %+v %v", cp, err)
	}
	_, err = s.GetCheckpoint(ctx, f.tenant, r.RunID, "nope")
	wantErr(t, err, run.ErrCheckpointNotFound, "get an unknown label")
	_, err = s.CreateCheckpoint(ctx, f.tenant, "no-such-run", "x", 1)
	wantErr(t, err, run.ErrNotFound, "checkpoint an unknown run")
	_, err = s.GetCheckpoint(ctx, f.tenant, "no-such-run", "x")
	wantErr(t, err, run.ErrNotFound, "get a checkpoint of an unknown run")

	// Revision 0 through the service means the current one.
	cp, err = f.svc.Checkpoint(ctx, f.tenant, r.RunID, "now", 0)
	if err != nil || cp.Revision != 4 {
		t.Fatalf("checkpoint the current revision: %+v %v", cp, err)
	}
	// Labels are per run.
	r2 := f.create("cp", `{}`)
	if _, err := s.CreateCheckpoint(ctx, f.tenant, r2.RunID, "first", 1); err != nil {
		t.Fatalf("same label on another run: %v", err)
	}
	cps, err = s.ListCheckpoints(ctx, f.tenant, r2.RunID, 0, "", 0)
	if err != nil || !reflect.DeepEqual(cpKeys(cps), []string{"first@1"}) {
		t.Fatalf("other run's checkpoints %v (err %v)", cpKeys(cps), err)
	}
}

// testForkIdempotencyKey: a fork's Idempotency-Key is kept with it, so the
// same request again answers the fork, and the key sent with another
// request (another run_id, point or parent) is a mismatch that makes nothing.
func testForkIdempotencyKey(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	mk := func() run.Run {
		r, _, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: newID("src"), WorkflowName: "wf", State: json.RawMessage(`{"n":1}`)}, "")
		if err != nil {
			t.Fatal(err)
		}
		l := f.lease(r.RunID, "w", longTTL)
		f.commit(r, l, "a", `{"n":2}`, "")
		return r
	}
	src, other := mk(), mk()
	a, b := newID("fa"), newID("fb")
	first, created, err := f.svc.ForkKeyed(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 1, RunID: a}, "fk-1")
	if err != nil || !created || first.RunID != a {
		t.Fatalf("fork: %+v %v %v", first, created, err)
	}
	again, created, err := f.svc.ForkKeyed(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 1, RunID: a}, "fk-1")
	if err != nil || created || again.RunID != a {
		t.Fatalf("the same fork again: %+v %v %v", again, created, err)
	}
	for name, c := range map[string]struct {
		parent string
		req    run.ForkRequest
	}{
		"another run_id":  {src.RunID, run.ForkRequest{FromRevision: 1, RunID: b}},
		"another point":   {src.RunID, run.ForkRequest{FromRevision: 2, RunID: a}},
		"another parent":  {other.RunID, run.ForkRequest{FromRevision: 1, RunID: b}},
		"no run_id given": {src.RunID, run.ForkRequest{FromRevision: 1}},
	} {
		_, _, err := f.svc.ForkKeyed(ctx, f.tenant, c.parent, c.req, "fk-1")
		wantErr(t, err, run.ErrIdempotencyMismatch, "the key with "+name)
	}
	if _, err := f.svc.Get(ctx, f.tenant, b); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("a mismatched key made run %s: %v", b, err)
	}
	// Racing under one key with different run ids: one fork, every other
	// caller a mismatch (none a conflict naming a run that does not exist).
	var wg sync.WaitGroup
	errs := make([]error, 16)
	made := make([]bool, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, made[i], errs[i] = f.svc.ForkKeyed(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 1, RunID: fmt.Sprintf("%s-race-%d", a, i)}, "fk-race")
		}()
	}
	wg.Wait()
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil && made[i]:
			winners++
		case !errors.Is(err, run.ErrIdempotencyMismatch):
			t.Fatalf("racing fork %d: %v, want ErrIdempotencyMismatch", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d racing forks under one key were made, want 1", winners)
	}
	// Without a run_id, the key names the fork; a retry is the same fork.
	k1, created1, err1 := f.svc.ForkKeyed(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 2}, "fk-2")
	k2, created2, err2 := f.svc.ForkKeyed(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 2}, "fk-2")
	if err1 != nil || err2 != nil || !created1 || created2 || k1.RunID != k2.RunID {
		t.Fatalf("keyed forks without run_id: %+v %v %v / %+v %v %v", k1, created1, err1, k2, created2, err2)
	}
}

func testForkFidelity(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	src, _, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{
		RunID: newID("src"), WorkflowName: "fork-wf", WorkflowVersion: "3.2.1",
		StateSchemaVersion: 1, State: json.RawMessage(`{"step":1}`), NextStep: "a",
	}, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	l := f.lease(src.RunID, "w", longTTL)
	r := f.commit(src, l, "a", richState, "")
	req := f.commitReq(r, l, "b", `{"step":3,"rich":`+richState+`}`, run.StatusSuspended)
	req.StateSchemaVersion = 2
	req.NextStep = "c"
	r, _, err = f.svc.Commit(ctx, f.tenant, src.RunID, req)
	if err != nil {
		t.Fatalf("commit rev 3: %v", err)
	}
	if _, err := f.svc.Checkpoint(ctx, f.tenant, src.RunID, "suspended", 3); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	r = f.commit(r, l, "c", `{"step":4}`, run.StatusRunning)
	r = f.commit(r, l, "d", `{"step":5,"done":true}`, run.StatusCompleted)
	srcBefore := f.snap(src.RunID)

	check := func(fork run.Run, rev int64, wantStatus run.Status) {
		t.Helper()
		snapEv := f.event(src.RunID, rev)
		if fork.TenantID != f.tenant || fork.WorkflowName != "fork-wf" || fork.WorkflowVersion != "3.2.1" {
			t.Fatalf("fork %s: tenant %s workflow %s %s", fork.RunID, fork.TenantID, fork.WorkflowName, fork.WorkflowVersion)
		}
		if fork.ParentRunID != src.RunID || fork.ParentRevision != rev {
			t.Fatalf("fork %s: parent %s@%d, want %s@%d", fork.RunID, fork.ParentRunID, fork.ParentRevision, src.RunID, rev)
		}
		if fork.StateRevision != rev || fork.Status != wantStatus || fork.NextStep != snapEv.NextStep || fork.StateSchemaVersion != snapEv.StateSchemaVersion {
			t.Fatalf("fork %s: revision %d status %q next %q v%d, want %d %q %q v%d", fork.RunID, fork.StateRevision, fork.Status, fork.NextStep, fork.StateSchemaVersion, rev, wantStatus, snapEv.NextStep, snapEv.StateSchemaVersion)
		}
		if !jsonEqual(fork.State, snapEv.State) || run.Digest(fork.State) != run.Digest(snapEv.State) {
			t.Fatalf("fork %s: state %s, want %s", fork.RunID, fork.State, snapEv.State)
		}
		if fork.LeaseOwner != "" || fork.LeaseEpoch != 0 || fork.LeaseExpiresAt != nil {
			t.Fatalf("fork %s: lease %q/%d/%v, want cleared", fork.RunID, fork.LeaseOwner, fork.LeaseEpoch, fork.LeaseExpiresAt)
		}
		if d := diffRun(fork, f.get(fork.RunID)); d != "" {
			t.Fatalf("GetRun differs from what Fork returned: %s", d)
		}
		forkEvs := f.events(fork.RunID)
		if int64(len(forkEvs)) != rev {
			t.Fatalf("fork %s has %d events, want %d", fork.RunID, len(forkEvs), rev)
		}
		for i, ev := range forkEvs {
			orig := srcBefore.events[i]
			if d := diffEvent(orig, f.event(fork.RunID, ev.Seq), true); d != "" {
				t.Fatalf("fork %s event %d differs from the source's: %s", fork.RunID, ev.Seq, d)
			}
		}
	}

	fork3, err := f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 3, RunID: newID("fork")})
	if err != nil {
		t.Fatalf("fork from revision 3: %v", err)
	}
	check(fork3, 3, run.StatusSuspended)
	forkCP, err := f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{Checkpoint: "suspended"})
	if err != nil {
		t.Fatalf("fork from checkpoint: %v", err)
	}
	if forkCP.RunID == "" || forkCP.RunID == fork3.RunID {
		t.Fatalf("fork from checkpoint got run id %q", forkCP.RunID)
	}
	check(forkCP, 3, run.StatusSuspended)
	fork2, err := f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 2, RunID: newID("fork")})
	if err != nil {
		t.Fatalf("fork from revision 2: %v", err)
	}
	check(fork2, 2, run.StatusRunning)
	fork1, err := f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 1, RunID: newID("fork")})
	if err != nil {
		t.Fatalf("fork from revision 1: %v", err)
	}
	check(fork1, 1, run.StatusRunning)
	// The completed end state forks into a suspended run that can go on.
	fork5, err := f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 5, RunID: newID("fork")})
	if err != nil {
		t.Fatalf("fork from the completed revision: %v", err)
	}
	check(fork5, 5, run.StatusSuspended)

	// A fork lives on its own: lease from epoch 1, commit at revision+1.
	lf := f.lease(fork3.RunID, "forker", longTTL)
	if lf.Epoch != 1 {
		t.Fatalf("fork's first lease epoch %d, want 1", lf.Epoch)
	}
	nf := f.commit(fork3, lf, "alt", `{"alt":true}`, run.StatusRunning)
	if nf.StateRevision != 4 || f.event(fork3.RunID, 4).StepID != "alt" {
		t.Fatalf("commit on the fork: revision %d", nf.StateRevision)
	}
	cps, err := s.ListCheckpoints(ctx, f.tenant, fork3.RunID, 0, "", 0)
	if err != nil || len(cps) != 0 {
		t.Fatalf("fork's checkpoints %v (err %v), want none copied", cpKeys(cps), err)
	}
	f.assertUnchanged(srcBefore, "forking and committing to forks")

	for _, rev := range []int64{6, 99} {
		_, err = f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: rev, RunID: newID("bad")})
		wantErr(t, err, run.ErrRevisionNotFound, fmt.Sprintf("fork from revision %d of a run at 5", rev))
	}
	_, err = s.Fork(ctx, f.tenant, src.RunID, 0, run.NewRun{Run: run.Run{TenantID: f.tenant, RunID: "bad-0", ParentRunID: src.RunID}})
	wantErr(t, err, run.ErrRevisionNotFound, "store fork from revision 0")
	_, err = f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{Checkpoint: "nope"})
	wantErr(t, err, run.ErrCheckpointNotFound, "fork from an unknown checkpoint")
	_, err = f.svc.Fork(ctx, f.tenant, "no-such-run", run.ForkRequest{FromRevision: 1, RunID: newID("bad")})
	wantErr(t, err, run.ErrNotFound, "fork an unknown run")
	before2 := f.snap(fork2.RunID)
	_, err = f.svc.Fork(ctx, f.tenant, src.RunID, run.ForkRequest{FromRevision: 4, RunID: fork2.RunID})
	wantErr(t, err, run.ErrAlreadyExists, "fork into a taken run id")
	f.assertUnchanged(before2, "a fork into a taken id")
	runs, err := s.ListRuns(ctx, f.tenant, run.ListFilter{Limit: 100})
	if err != nil || len(runs) != 6 {
		t.Fatalf("%d runs after 5 forks and refused ones (err %v), want 6", len(runs), err)
	}
}

const (
	schemaV1 = `{"type":"object","required":["name"],"properties":{"name":{"type":"string"}},"additionalProperties":false}`
	schemaV2 = `{"type":"object","required":["first","last"],"properties":{"first":{"type":"string"},"last":{"type":"string"}},"additionalProperties":false}`
	schemaV3 = `{"type":"object","required":["person"],"properties":{"person":{"type":"object","required":["first","last"],` +
		`"properties":{"first":{"type":"string"},"last":{"type":"string"}}},"tags":{"type":"array"}},"additionalProperties":false}`
)

func splitName(state json.RawMessage) (json.RawMessage, error) {
	var v struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(state, &v); err != nil {
		return nil, err
	}
	first, last, _ := strings.Cut(v.Name, " ")
	return json.Marshal(map[string]string{"first": first, "last": last})
}

func wrapPerson(state json.RawMessage) (json.RawMessage, error) {
	var p map[string]string
	if err := json.Unmarshal(state, &p); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"person": p, "tags": []string{}})
}

func badWrap(json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"person":"not an object"}`), nil
}

// halfName yields a v2 state missing "last"; fixPerson turns anything into a
// valid v3 state. Chained, only validation after each step catches the gap.
func halfName(json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"first":"Ada"}`), nil
}

func fixPerson(json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"person":{"first":"Ada","last":"?"}}`), nil
}

func registry(t *testing.T, wf string, current int, migrations map[int]run.MigrateFunc) *run.Registry {
	t.Helper()
	reg := run.NewRegistry()
	reg.SetCurrent(wf, current)
	for v, sch := range map[int]string{1: schemaV1, 2: schemaV2, 3: schemaV3} {
		if err := reg.RegisterSchema(wf, v, []byte(sch)); err != nil {
			t.Fatalf("schema v%d: %v", v, err)
		}
	}
	for from, fn := range migrations {
		reg.RegisterMigration(wf, from, fn)
	}
	return reg
}

func testMigrations(t *testing.T, s run.Store) {
	ctx := t.Context()
	tenant := newTenant()
	wf := newID("people")
	full := run.NewService(s, run.Options{Registry: registry(t, wf, 3, map[int]run.MigrateFunc{1: splitName, 2: wrapPerson})})
	f := &fx{t: t, s: s, svc: full, tenant: tenant}

	v1State := json.RawMessage(`{"name":"Ada Lovelace"}`)
	newV1 := func() run.Run {
		t.Helper()
		r, _, err := full.Create(ctx, tenant, run.CreateRequest{RunID: newID("mig"), WorkflowName: wf, StateSchemaVersion: 1, State: v1State, NextStep: "greet"}, "")
		if err != nil {
			t.Fatalf("create at v1: %v", err)
		}
		return r
	}

	// Create validates against the version's schema and defaults to the current version.
	_, _, err := full.Create(ctx, tenant, run.CreateRequest{RunID: "invalid-v1", WorkflowName: wf, StateSchemaVersion: 1, State: json.RawMessage(`{"first":"Ada"}`)}, "")
	wantErr(t, err, run.ErrSchemaValidation, "create with a state invalid for v1")
	_, err = s.GetRun(ctx, tenant, "invalid-v1")
	wantErr(t, err, run.ErrNotFound, "a refused create left a run")
	cur, _, err := full.Create(ctx, tenant, run.CreateRequest{WorkflowName: wf, State: json.RawMessage(`{"person":{"first":"A","last":"B"}}`)}, "")
	if err != nil || cur.StateSchemaVersion != 3 {
		t.Fatalf("create without a version: v%d %v, want the current v3", cur.StateSchemaVersion, err)
	}

	// The chain v1 -> v2 -> v3.
	r := newV1()
	l := f.lease(r.RunID, "migrator", longTTL)
	m, err := full.Migrate(ctx, tenant, r.RunID, l)
	if err != nil {
		t.Fatalf("migrate v1 -> v3: %v", err)
	}
	wantV3 := `{"person":{"first":"Ada","last":"Lovelace"},"tags":[]}`
	if m.StateSchemaVersion != 3 || m.StateRevision != 2 || !jsonEqual(m.State, []byte(wantV3)) || m.NextStep != "greet" || m.Status != run.StatusRunning {
		t.Fatalf("migrated run: v%d revision %d next %q status %q state %s", m.StateSchemaVersion, m.StateRevision, m.NextStep, m.Status, m.State)
	}
	if d := diffRun(m, f.get(r.RunID)); d != "" {
		t.Fatalf("GetRun differs from the migrated run: %s", d)
	}
	ev := f.event(r.RunID, 2)
	if ev.EventType != run.EventStateMigrated || ev.StateSchemaVersion != 3 || !jsonEqual(ev.State, []byte(wantV3)) {
		t.Fatalf("migration event: type %s v%d state %s", ev.EventType, ev.StateSchemaVersion, ev.State)
	}
	var payload struct {
		From         int                 `json:"from"`
		To           int                 `json:"to"`
		DigestBefore string              `json:"digest_before"`
		DigestAfter  string              `json:"digest_after"`
		Steps        []run.MigrationStep `json:"steps"`
	}
	if err := json.Unmarshal(ev.Payload, &payload); err != nil {
		t.Fatalf("migration payload %s: %v", ev.Payload, err)
	}
	v2State, _ := splitName(v1State)
	if payload.From != 1 || payload.To != 3 || payload.DigestBefore != run.Digest(v1State) || payload.DigestAfter != run.Digest(json.RawMessage(wantV3)) {
		t.Fatalf("migration payload %s: want from 1 to 3, digests %s -> %s", ev.Payload, run.Digest(v1State), run.Digest(json.RawMessage(wantV3)))
	}
	if len(payload.Steps) != 2 || payload.Steps[0].From != 1 || payload.Steps[0].To != 2 || payload.Steps[1].From != 2 || payload.Steps[1].To != 3 ||
		payload.Steps[0].DigestBefore != run.Digest(v1State) || payload.Steps[0].DigestAfter != run.Digest(v2State) ||
		payload.Steps[1].DigestBefore != run.Digest(v2State) || payload.Steps[1].DigestAfter != payload.DigestAfter {
		t.Fatalf("migration steps %+v", payload.Steps)
	}
	if err := full.CheckSchema(m); err != nil {
		t.Fatalf("check schema of the migrated run: %v", err)
	}
	again, err := full.Migrate(ctx, tenant, r.RunID, l)
	if err != nil || again.StateRevision != 2 {
		t.Fatalf("migrate a current run: revision %d %v, want unchanged at 2", again.StateRevision, err)
	}

	// Without the lease nothing is committed.
	r2 := newV1()
	before := f.snap(r2.RunID)
	_, err = full.Migrate(ctx, tenant, r2.RunID, run.Lease{Owner: "nobody", Epoch: 1})
	wantErr(t, err, run.ErrLeaseLost, "migrate without the lease")
	f.assertUnchanged(before, "a migration without the lease")

	// A missing link is refused.
	gap := run.NewService(s, run.Options{Registry: registry(t, wf, 3, map[int]run.MigrateFunc{1: splitName})})
	l2 := f.lease(r2.RunID, "migrator", longTTL)
	before = f.snap(r2.RunID)
	_, err = gap.Migrate(ctx, tenant, r2.RunID, l2)
	wantErr(t, err, run.ErrNoMigrationPath, "migrate with no v2 -> v3 migration")
	wantErr(t, gap.CheckSchema(before.run), run.ErrNoMigrationPath, "check schema with a missing link")
	f.assertUnchanged(before, "a migration with a missing link")

	// A version newer than the code is refused, at load and at create.
	old := run.NewService(s, run.Options{Registry: registry(t, wf, 2, map[int]run.MigrateFunc{1: splitName})})
	migrated := f.snap(r.RunID)
	_, err = old.Migrate(ctx, tenant, r.RunID, l)
	wantErr(t, err, run.ErrNoMigrationPath, "migrate a v3 run with v2 code")
	wantErr(t, old.CheckSchema(migrated.run), run.ErrNoMigrationPath, "check schema of a v3 run with v2 code")
	f.assertUnchanged(migrated, "a refused downgrade")
	_, _, err = old.Create(ctx, tenant, run.CreateRequest{RunID: "too-new", WorkflowName: wf, StateSchemaVersion: 3, State: json.RawMessage(wantV3)}, "")
	wantErr(t, err, run.ErrNoMigrationPath, "create at a version newer than the code")

	// A migration that produces an invalid state is refused and commits nothing.
	broken := run.NewService(s, run.Options{Registry: registry(t, wf, 3, map[int]run.MigrateFunc{1: splitName, 2: badWrap})})
	before = f.snap(r2.RunID)
	_, err = broken.Migrate(ctx, tenant, r2.RunID, l2)
	wantErr(t, err, run.ErrSchemaValidation, "a migration producing an invalid state")
	f.assertUnchanged(before, "a migration producing an invalid state")
	midway := run.NewService(s, run.Options{Registry: registry(t, wf, 3, map[int]run.MigrateFunc{1: halfName, 2: fixPerson})})
	_, err = midway.Migrate(ctx, tenant, r2.RunID, l2)
	wantErr(t, err, run.ErrSchemaValidation, "a chain whose intermediate v2 state is invalid")
	f.assertUnchanged(before, "a chain with an invalid intermediate state")

	// The same run still migrates with the right code.
	m2, err := full.Migrate(ctx, tenant, r2.RunID, l2)
	if err != nil || m2.StateSchemaVersion != 3 || !jsonEqual(m2.State, []byte(wantV3)) {
		t.Fatalf("migrate after refusals: v%d %s %v", m2.StateSchemaVersion, m2.State, err)
	}
}

func testStatusTransitions(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	r := f.create("tr", `{}`)
	l := f.lease(r.RunID, "w", longTTL)
	r = f.commit(r, l, "finish", `{"done":true}`, run.StatusCompleted)
	if r.Status != run.StatusCompleted {
		t.Fatalf("status %q, want completed", r.Status)
	}
	before := f.snap(r.RunID)
	for _, st := range []run.Status{"", run.StatusRunning, run.StatusCompleted, run.StatusFailed} {
		_, _, err := f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, l, "again", `{}`, st))
		wantErr(t, err, run.ErrInvalidTransition, fmt.Sprintf("commit status %q to a completed run", st))
	}
	_, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, "other", 0, longTTL)
	wantErr(t, err, run.ErrRunNotActive, "acquire the lease of a completed run")
	_, err = f.svc.AcquireLease(ctx, f.tenant, r.RunID, l.Owner, l.Epoch, longTTL)
	wantErr(t, err, run.ErrRunNotActive, "renew the lease of a completed run")
	f.assertUnchanged(before, "commits and leases on a completed run")

	// suspended -> completed is not a transition; suspended -> running, running -> failed are.
	r2 := f.create("tr", `{}`)
	l2 := f.lease(r2.RunID, "w", longTTL)
	r2 = f.commit(r2, l2, "pause", `{}`, run.StatusSuspended)
	before = f.snap(r2.RunID)
	_, _, err = f.svc.Commit(ctx, f.tenant, r2.RunID, f.commitReq(r2, l2, "skip", `{}`, run.StatusCompleted))
	wantErr(t, err, run.ErrInvalidTransition, "suspended -> completed")
	f.assertUnchanged(before, "a refused transition")
	r2 = f.commit(r2, l2, "resume", `{}`, run.StatusRunning)
	req := f.commitReq(r2, l2, "boom", `{}`, run.StatusFailed)
	req.StatusReason = "card declined"
	r2, _, err = f.svc.Commit(ctx, f.tenant, r2.RunID, req)
	if err != nil || r2.Status != run.StatusFailed || r2.StatusReason != "card declined" {
		t.Fatalf("running -> failed: %q %q %v", r2.Status, r2.StatusReason, err)
	}
	_, _, err = f.svc.Commit(ctx, f.tenant, r2.RunID, f.commitReq(r2, l2, "retry", `{}`, run.StatusRunning))
	wantErr(t, err, run.ErrInvalidTransition, "failed -> running")
	_, err = f.svc.AcquireLease(ctx, f.tenant, r2.RunID, "w", 0, longTTL)
	wantErr(t, err, run.ErrRunNotActive, "acquire the lease of a failed run")

	r3 := f.create("tr", `{}`)
	l3 := f.lease(r3.RunID, "w", longTTL)
	r3 = f.commit(r3, l3, "pause", `{}`, run.StatusSuspended)
	r3 = f.commit(r3, l3, "cancel", `{}`, run.StatusCancelled)
	if r3.Status != run.StatusCancelled {
		t.Fatalf("suspended -> cancelled: %q", r3.Status)
	}
	_, _, err = f.svc.Commit(ctx, f.tenant, r3.RunID, f.commitReq(r3, l3, "x", `{}`, ""))
	wantErr(t, err, run.ErrInvalidTransition, "commit to a cancelled run")
}

// waitClockPast returns once the wall clock is past t by at least d. It
// separates timestamps, it does not synchronize anything.
func waitClockPast(t time.Time, d time.Duration) {
	for time.Now().Before(t.Add(d)) {
		time.Sleep(time.Millisecond)
	}
}

func testRetention(t *testing.T, s run.Store) {
	ctx := t.Context()
	a := newFx(t, s)
	b := a.withTenant(newTenant())

	oldDone := a.create("ret", `{"n":0}`)
	la := a.lease(oldDone.RunID, "w", longTTL)
	oldDone = a.commit(oldDone, la, "s1", `{"n":1}`, "")
	if _, err := s.CreateCheckpoint(ctx, a.tenant, oldDone.RunID, "cp", 2); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	oldDone = a.commit(oldDone, la, "end", `{"n":2}`, run.StatusCompleted)
	oldFailed := a.runIn("ret", run.StatusFailed)
	oldCancelled := b.runIn("ret", run.StatusCancelled)
	oldRunning := a.runIn("ret", run.StatusRunning)
	oldSuspended := b.runIn("ret", run.StatusSuspended)
	deleted := []struct {
		f *fx
		r run.Run
	}{{a, oldDone}, {a, oldFailed}, {b, oldCancelled}}
	latest := oldSuspended.UpdatedAt
	for _, d := range deleted {
		if d.r.UpdatedAt.After(latest) {
			latest = d.r.UpdatedAt
		}
	}
	waitClockPast(latest, 2*time.Millisecond)
	cutoff := time.Now()
	waitClockPast(cutoff, 2*time.Millisecond)
	recentDone := a.runIn("ret", run.StatusCompleted)
	if !recentDone.UpdatedAt.After(cutoff) {
		t.Fatalf("setup: recent run updated at %v, not after the cutoff %v", recentDone.UpdatedAt, cutoff)
	}
	kept := []struct {
		f *fx
		r run.Run
	}{{a, oldRunning}, {b, oldSuspended}, {a, recentDone}}
	keptBefore := map[string]snapshot{}
	for _, k := range kept {
		keptBefore[k.r.RunID] = k.f.snap(k.r.RunID)
	}

	n, err := s.DeleteTerminalBefore(ctx, cutoff, 2)
	if err != nil || n != 2 {
		t.Fatalf("delete with limit 2: %d %v, want 2", n, err)
	}
	svc := run.NewService(s, run.Options{})
	n, err = svc.Retain(ctx, time.Hour, cutoff.Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("retain: %d %v, want the 1 left", n, err)
	}
	n, err = svc.Retain(ctx, time.Hour, cutoff.Add(time.Hour))
	if err != nil || n != 0 {
		t.Fatalf("retain again: %d %v, want 0", n, err)
	}

	for _, d := range deleted {
		_, err := s.GetRun(ctx, d.f.tenant, d.r.RunID)
		wantErr(t, err, run.ErrNotFound, "get a retained-away run")
		_, err = s.ListEvents(ctx, d.f.tenant, d.r.RunID, 0, 10)
		wantErr(t, err, run.ErrNotFound, "list events of a retained-away run")
		// Re-creating the id shows no leftover events or checkpoints.
		if _, _, err := d.f.svc.Create(ctx, d.f.tenant, run.CreateRequest{RunID: d.r.RunID, WorkflowName: "ret"}, ""); err != nil {
			t.Fatalf("re-create %s after retention: %v", d.r.RunID, err)
		}
		if evs := d.f.events(d.r.RunID); len(evs) != 1 {
			t.Fatalf("re-created %s has %d events, want 1: old events survived retention", d.r.RunID, len(evs))
		}
		cps, err := s.ListCheckpoints(ctx, d.f.tenant, d.r.RunID, 0, "", 0)
		if err != nil || len(cps) != 0 {
			t.Fatalf("re-created %s has checkpoints %v (err %v): old ones survived retention", d.r.RunID, cpKeys(cps), err)
		}
	}
	for _, k := range kept {
		k.f.assertUnchanged(keptBefore[k.r.RunID], "retention of other runs")
	}
}

func testStateSizeLimit(t *testing.T, s run.Store) {
	const limit = 512
	ctx := t.Context()
	f := newFx(t, s)
	f.svc = run.NewService(s, run.Options{MaxStateBytes: limit})
	sized := func(n int) json.RawMessage {
		pad := n - len(`{"pad":""}`)
		return json.RawMessage(`{"pad":"` + strings.Repeat("x", pad) + `"}`)
	}
	_, _, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: "big", WorkflowName: "sz", State: sized(limit + 1)}, "")
	wantErr(t, err, run.ErrStateTooLarge, "create with a state over the limit")
	_, err = s.GetRun(ctx, f.tenant, "big")
	wantErr(t, err, run.ErrNotFound, "a refused create left a run")

	r, _, err := f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: "at-limit", WorkflowName: "sz", State: sized(limit)}, "")
	if err != nil {
		t.Fatalf("create with a state at the limit: %v", err)
	}
	l := f.lease(r.RunID, "w", longTTL)
	before := f.snap(r.RunID)
	_, _, err = f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, l, "grow", string(sized(limit+1)), ""))
	wantErr(t, err, run.ErrStateTooLarge, "commit a state over the limit")
	req := f.commitReq(r, l, "payload", `{}`, "")
	req.Event.Payload = json.RawMessage(`{"blob":"` + strings.Repeat("y", limit) + `"}`)
	_, _, err = f.svc.Commit(ctx, f.tenant, r.RunID, req)
	wantErr(t, err, run.ErrStateTooLarge, "commit an event payload over the limit")
	f.assertUnchanged(before, "commits over the size limit")
	r = f.commit(r, l, "fits", string(sized(limit)), "")
	if r.StateRevision != 2 {
		t.Fatalf("commit at the limit: revision %d", r.StateRevision)
	}
}

// testCreateLeased checks a run created with its lease held: the lease is
// the one AcquireLease right after would have given (epoch 1, expiring
// after the ttl), it fences others and it commits; an idempotent retry
// takes no lease.
func testCreateLeased(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	before := time.Now().Add(-time.Second)
	req := run.CreateRequest{RunID: newID("leased"), WorkflowName: "wf", State: json.RawMessage(`{"n":0}`), NextStep: "a"}
	key := "idem-" + randHex(4)
	r, l, created, err := f.svc.CreateLeased(ctx, f.tenant, req, key, "w1", longTTL)
	if err != nil || !created {
		t.Fatalf("create leased: created=%v %v", created, err)
	}
	if l.Owner != "w1" || l.Epoch != 1 || l.Revision != 1 || l.ExpiresAt.Before(before.Add(longTTL)) || l.ExpiresAt.After(time.Now().Add(longTTL+time.Second)) {
		t.Fatalf("lease of a leased create: %+v", l)
	}
	got := f.get(r.RunID)
	if got.LeaseOwner != "w1" || got.LeaseEpoch != 1 || !sameTime(got.LeaseExpiresAt, &l.ExpiresAt) || !sameTime(r.LeaseExpiresAt, &l.ExpiresAt) {
		t.Fatalf("stored lease %s/%d/%v, created %v, want %+v", got.LeaseOwner, got.LeaseEpoch, got.LeaseExpiresAt, r.LeaseExpiresAt, l)
	}
	_, err = f.svc.AcquireLease(ctx, f.tenant, r.RunID, "w2", 0, longTTL)
	wantErr(t, err, run.ErrLeaseHeld, "another owner takes the lease of a leased create")
	_, _, err = f.svc.Commit(ctx, f.tenant, r.RunID, f.commitReq(r, run.Lease{Owner: "w1", Epoch: 2}, "x", `{"n":1}`, ""))
	wantErr(t, err, run.ErrLeaseLost, "commit with another epoch")
	r = f.commit(r, l, "a", `{"n":1}`, "")
	if r.StateRevision != 2 {
		t.Fatalf("commit under the created lease: revision %d", r.StateRevision)
	}
	renewed, err := f.svc.AcquireLease(ctx, f.tenant, r.RunID, "w1", 1, longTTL)
	if err != nil || renewed.Epoch != 1 {
		t.Fatalf("renew the created lease: %+v %v", renewed, err)
	}
	again, l2, created, err := f.svc.CreateLeased(ctx, f.tenant, req, key, "w1", longTTL)
	if err != nil || created || l2 != (run.Lease{}) || again.RunID != r.RunID {
		t.Fatalf("idempotent retry of a leased create: %s created=%v lease %+v %v", again.RunID, created, l2, err)
	}
	_, _, _, err = f.svc.CreateLeased(ctx, f.tenant, req, "", "w1", longTTL)
	wantErr(t, err, run.ErrAlreadyExists, "a leased create of a taken id")

	// A plain create takes no lease, and the first AcquireLease gets epoch 1.
	p := f.create("wf", `{}`)
	if p.LeaseOwner != "" || p.LeaseEpoch != 0 || p.LeaseExpiresAt != nil {
		t.Fatalf("plain create has a lease: %s/%d/%v", p.LeaseOwner, p.LeaseEpoch, p.LeaseExpiresAt)
	}
}
