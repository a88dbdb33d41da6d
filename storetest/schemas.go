package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mementohq/memento/run"
)

const amountSchema = `{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer"}}}`

// testRegisteredSchemas checks schema registrations (immutable per tenant,
// workflow and version) and that every commit and create is validated
// against the registered schema of the version it lands at, even by a
// service whose cache knows nothing of a schema registered elsewhere.
func testRegisteredSchemas(t *testing.T, s run.Store) {
	f := newFx(t, s)
	ctx := t.Context()
	other := run.NewService(s, run.Options{}) // another server instance, its own cache

	// A run created before its workflow had any schema...
	early := f.create("pay", `{"amount":1}`)
	le := f.lease(early.RunID, "w", longTTL)
	early = f.commit(early, le, "warm", `{"amount":2}`, "") // this service has seen it: no schema

	// ...then a schema registered through another instance.
	sc, created, err := other.PutSchema(ctx, f.tenant, "pay", 1, json.RawMessage(amountSchema))
	if err != nil || !created || sc.Digest != run.Digest(json.RawMessage(amountSchema)) || sc.CreatedAt.IsZero() {
		t.Fatalf("register: %+v created=%v %v", sc, created, err)
	}
	again, created, err := f.svc.PutSchema(ctx, f.tenant, "pay", 1, json.RawMessage(amountSchema))
	if err != nil || created || again.Digest != sc.Digest || !again.CreatedAt.Equal(sc.CreatedAt) {
		t.Fatalf("register the same again: %+v created=%v %v", again, created, err)
	}
	_, _, err = f.svc.PutSchema(ctx, f.tenant, "pay", 1, json.RawMessage(`{"type":"object"}`))
	wantErr(t, err, run.ErrSchemaConflict, "register another schema for a registered version")
	if n := strings.Count(err.Error(), "pay v1"); n != 1 || strings.Count(err.Error(), "register schema") != 1 {
		t.Fatalf("the conflict names its schema %d times: %v", n, err)
	}
	_, _, err = f.svc.PutSchema(ctx, f.tenant, "pay", 2, json.RawMessage(`{"type":12}`))
	wantErr(t, err, run.ErrInvalidSchema, "register an invalid schema")
	_, err = f.svc.GetSchema(ctx, f.tenant, "pay", 2)
	wantErr(t, err, run.ErrSchemaNotFound, "a refused registration left a schema")
	got, err := s.GetSchema(ctx, f.tenant, "pay", 1)
	if err != nil || !jsonEqual(got.Schema, []byte(amountSchema)) || got.Digest != sc.Digest {
		t.Fatalf("get schema: %+v %v", got, err)
	}
	_, err = s.GetSchema(ctx, newTenant(), "pay", 1)
	wantErr(t, err, run.ErrSchemaNotFound, "another tenant's schema")

	// The first service's cache says "no schema": the store still refuses.
	before := f.snap(early.RunID)
	_, _, err = f.svc.Commit(ctx, f.tenant, early.RunID, f.commitReq(early, le, "bad", `{"amount":"not a number"}`, ""))
	wantErr(t, err, run.ErrSchemaValidation, "commit an invalid state after another instance registered the schema")
	req := f.commitReq(early, le, "bad99", `{"amount":"not a number"}`, "")
	req.StateSchemaVersion = 99
	_, _, err = f.svc.Commit(ctx, f.tenant, early.RunID, req)
	wantErr(t, err, run.ErrNoMigrationPath, "commit at a version with no schema")
	_, _, err = s.Commit(ctx, f.tenant, early.RunID, run.StoreCommit{ExpectedRevision: early.StateRevision, Owner: le.Owner, Epoch: le.Epoch,
		Event: run.EventInput{EventType: "raw", Payload: json.RawMessage(`{}`)}, State: json.RawMessage(`{"amount":"x"}`),
		FromStatuses: []run.Status{run.StatusRunning}})
	var need *run.SchemaRequiredError
	if !errors.As(err, &need) || need.WorkflowName != "pay" || need.Version != early.StateSchemaVersion || !need.Registered {
		t.Fatalf("store commit without a schema check: %v, want a SchemaRequiredError for pay v%d", err, early.StateSchemaVersion)
	}
	f.assertUnchanged(before, "commits refused by the schema")
	early = f.commit(early, le, "good", `{"amount":3}`, "")
	if early.StateRevision != before.run.StateRevision+1 {
		t.Fatalf("valid commit: revision %d", early.StateRevision)
	}

	// Creates: validated, and refused at an unregistered version.
	_, _, err = f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: newID("bad"), WorkflowName: "pay", StateSchemaVersion: 1, State: json.RawMessage(`{"amount":1.5}`)}, "")
	wantErr(t, err, run.ErrSchemaValidation, "create with an invalid state")
	_, _, err = f.svc.Create(ctx, f.tenant, run.CreateRequest{RunID: newID("bad"), WorkflowName: "pay", StateSchemaVersion: 7, State: json.RawMessage(`{"amount":1}`)}, "")
	wantErr(t, err, run.ErrNoMigrationPath, "create at an unregistered version")
	// The store enforces it on a create as on a commit: a create that names
	// no schema, or not the one of its version, changes nothing.
	for _, tc := range []struct {
		version    int
		digest     string
		registered bool
	}{{1, "", true}, {1, "not-the-digest", true}, {7, "", false}} {
		id := newID("raw")
		_, _, err = s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: f.tenant, RunID: id, WorkflowName: "pay",
			StateSchemaVersion: tc.version, Status: run.StatusRunning, State: json.RawMessage(`{"amount":"x"}`)},
			Schema: run.SchemaCheck{WorkflowName: "pay", Version: tc.version, Digest: tc.digest}})
		need = nil
		if !errors.As(err, &need) || need.WorkflowName != "pay" || need.Version != tc.version || need.Registered != tc.registered {
			t.Fatalf("store create at v%d with digest %q: %v, want a SchemaRequiredError (registered %v)", tc.version, tc.digest, err, tc.registered)
		}
		_, err = s.GetRun(ctx, f.tenant, id)
		wantErr(t, err, run.ErrNotFound, "a create refused by the schema left a run")
	}
	if _, created, err := s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: f.tenant, RunID: newID("raw"), WorkflowName: "pay",
		StateSchemaVersion: 1, Status: run.StatusRunning, State: json.RawMessage(`{"amount":4}`)},
		Schema: run.SchemaCheck{WorkflowName: "pay", Version: 1, Digest: sc.Digest}}); err != nil || !created {
		t.Fatalf("store create naming the registered schema: created=%v %v", created, err)
	}
	// A service that never saw the schema still validates a create.
	third := run.NewService(s, run.Options{})
	_, _, err = third.Create(ctx, f.tenant, run.CreateRequest{RunID: newID("bad"), WorkflowName: "pay", StateSchemaVersion: 1, State: json.RawMessage(`{"amount":"no"}`)}, "")
	wantErr(t, err, run.ErrSchemaValidation, "create with an invalid state through a service with an empty cache")
	if _, _, err := third.Create(ctx, f.tenant, run.CreateRequest{RunID: newID("ok"), WorkflowName: "pay", StateSchemaVersion: 1, State: json.RawMessage(`{"amount":5}`)}, ""); err != nil {
		t.Fatalf("valid create through a service with an empty cache: %v", err)
	}
	if _, _, err := f.withTenant(newTenant()).svc.Create(ctx, newTenant(), run.CreateRequest{RunID: newID("free"), WorkflowName: "pay", State: json.RawMessage(`{"amount":"free text"}`)}, ""); err != nil {
		t.Fatalf("another tenant is not bound by this tenant's schemas: %v", err)
	}

	// A migration to a newly registered version, declared by the commit.
	v2 := `{"type":"object","required":["cents"],"properties":{"cents":{"type":"integer"}}}`
	if _, _, err := other.PutSchema(ctx, f.tenant, "pay", 2, json.RawMessage(v2)); err != nil {
		t.Fatal(err)
	}
	req = f.commitReq(early, le, "to-v2", `{"amount":3}`, "")
	req.StateSchemaVersion = 2
	_, _, err = f.svc.Commit(ctx, f.tenant, early.RunID, req)
	wantErr(t, err, run.ErrSchemaValidation, "commit to v2 with a v1 state")
	req.State = json.RawMessage(`{"cents":300}`)
	if early, _, err = f.svc.Commit(ctx, f.tenant, early.RunID, req); err != nil || early.StateSchemaVersion != 2 {
		t.Fatalf("commit to v2: v%d %v", early.StateSchemaVersion, err)
	}
	// The other instance, which never saw this run, checks v2 from the store.
	_, _, err = other.Commit(ctx, f.tenant, early.RunID, f.commitReq(early, le, "bad-v2", `{"amount":3}`, ""))
	wantErr(t, err, run.ErrSchemaValidation, "commit a v1 state to a v2 run through another instance")

	list, next, err := f.svc.ListSchemas(ctx, f.tenant, "pay", "", 1)
	if err != nil || len(list) != 1 || list[0].Version != 1 || next == "" {
		t.Fatalf("list page 1: %+v %q %v", list, next, err)
	}
	list, next, err = f.svc.ListSchemas(ctx, f.tenant, "pay", next, 1)
	if err != nil || len(list) != 1 || list[0].Version != 2 {
		t.Fatalf("list page 2: %+v %q %v", list, next, err)
	}
	if list, _, err = f.svc.ListSchemas(ctx, f.tenant, "pay", next, 1); next != "" && (err != nil || len(list) != 0) {
		t.Fatalf("list page 3: %+v %v", list, err)
	}
	if list, _, err := f.svc.ListSchemas(ctx, f.tenant, "unknown-wf", "", 0); err != nil || len(list) != 0 {
		t.Fatalf("list an unknown workflow: %+v %v", list, err)
	}
}
