package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
)

// TestStateSchemasOverHTTP registers a state schema over HTTP and shows the
// defect fixed: on a run whose registered schema requires an integer
// amount, a commit of {"amount":"not a number"} at state_schema_version 99
// (or at the run's version) is refused with 422 and changes nothing.
func TestStateSchemasOverHTTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		ctx := context.Background()
		schemas := compileOpenAPI(t, e)
		const amount = `{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer"}}}`

		res := e.do(t, "PUT", "/v1/workflows/refund/schemas/1", amount, nil)
		if res.status != http.StatusCreated || res.header.Get("Location") != "/v1/workflows/refund/schemas/1" {
			t.Fatalf("register: %d %s", res.status, res.body)
		}
		schemas.validate(t, "StateSchema", res.body)
		if res = e.do(t, "PUT", "/v1/workflows/refund/schemas/1", amount, nil); res.status != http.StatusOK {
			t.Fatalf("register the same again: %d %s", res.status, res.body)
		}
		expectProblem(t, e.do(t, "PUT", "/v1/workflows/refund/schemas/1", `{"type":"object"}`, nil), http.StatusConflict, problem.SchemaConflict)
		expectProblem(t, e.do(t, "PUT", "/v1/workflows/refund/schemas/2", `{"type":12}`, nil), http.StatusUnprocessableEntity, problem.InvalidSchema)
		expectProblem(t, e.do(t, "PUT", "/v1/workflows/refund/schemas/2", `{"type":`, nil), http.StatusBadRequest, problem.InvalidRequest)
		expectProblem(t, e.do(t, "PUT", "/v1/workflows/refund/schemas/0", amount, nil), http.StatusBadRequest, problem.InvalidRequest)
		expectProblem(t, e.do(t, "PUT", "/v1/workflows/refund/schemas/2147483648", amount, nil), http.StatusBadRequest, problem.InvalidRequest)
		for _, v := range []string{"01", "+1"} {
			expectProblem(t, e.do(t, "PUT", "/v1/workflows/refund/schemas/"+v, amount, nil), http.StatusBadRequest, problem.InvalidRequest)
			expectProblem(t, e.do(t, "GET", "/v1/workflows/refund/schemas/"+v, nil, nil), http.StatusBadRequest, problem.InvalidRequest)
		}
		// The service names the schema once, on every backend (SQLite's
		// store named the call again: "get schema refund v2: get schema: ...").
		if p := expectProblem(t, e.do(t, "GET", "/v1/workflows/refund/schemas/2", nil, nil), http.StatusNotFound, problem.SchemaNotFound); strings.Count(p.Detail, "get schema") != 1 {
			t.Fatalf("detail of a missing schema: %q", p.Detail)
		}
		res = e.do(t, "GET", "/v1/workflows/refund/schemas/1", nil, nil)
		schemas.validate(t, "StateSchema", res.body)
		got, err := e.c.GetSchema(ctx, "refund", 1)
		if err != nil || got.Version != 1 || !jsonEqual(got.Schema, []byte(amount)) {
			t.Fatalf("get: %+v %v", got, err)
		}
		if _, created, err := e.c.PutSchema(ctx, "refund", 2, json.RawMessage(`{"type":"object","required":["cents"]}`)); err != nil || !created {
			t.Fatalf("client put v2: %v %v", created, err)
		}
		res = e.do(t, "GET", "/v1/workflows/refund/schemas?limit=1", nil, nil)
		schemas.validate(t, "StateSchemaList", res.body)
		var page client.Page[run.Schema]
		_ = json.Unmarshal(res.body, &page)
		if len(page.Items) != 1 || page.Items[0].Version != 1 || page.NextCursor == "" {
			t.Fatalf("list page 1: %s", res.body)
		}
		p2, err := e.c.ListSchemas(ctx, "refund", page.NextCursor, 1)
		if err != nil || len(p2.Items) != 1 || p2.Items[0].Version != 2 {
			t.Fatalf("list page 2: %+v %v", p2, err)
		}
		expectProblem(t, e.do(t, "GET", "/v1/workflows/refund/schemas?cursor=x", nil, nil), http.StatusUnprocessableEntity, problem.InvalidRequest)

		// The defect: both commits are refused with 422, nothing changes.
		r, l := e.leasedRun(t, "amount-run")
		before := e.snapshot(t, "amount-run")
		for _, c := range []struct {
			version int
			kind    string
		}{{99, problem.NoMigrationPath}, {0, problem.SchemaValidation}, {2, problem.SchemaValidation}} {
			req := commitReq(r.StateRevision, l, "step.completed", `{"amount":"not a number"}`)
			req.StateSchemaVersion = c.version
			expectProblem(t, e.do(t, "POST", "/v1/runs/amount-run/commit", req, nil), http.StatusUnprocessableEntity, c.kind)
		}
		e.snapshot(t, "amount-run").assertSame(t, before)
		// A create at an unregistered version, or with a state its schema refuses.
		expectProblem(t, e.do(t, "POST", "/v1/runs", map[string]any{"run_id": "v7", "workflow_name": "refund", "state_schema_version": 7, "state": map[string]any{"amount": 1}}, nil),
			http.StatusUnprocessableEntity, problem.NoMigrationPath)
		expectProblem(t, e.do(t, "POST", "/v1/runs", map[string]any{"run_id": "bad", "workflow_name": "refund", "state": map[string]any{"amount": "x"}}, nil),
			http.StatusUnprocessableEntity, problem.SchemaValidation)
		expectProblem(t, e.do(t, "GET", "/v1/runs/v7", nil, nil), http.StatusNotFound, problem.RunNotFound)
		// A valid state commits.
		if _, err := e.c.Commit(ctx, "amount-run", commitReq(r.StateRevision, l, "step.completed", `{"amount":5}`)); err != nil {
			t.Fatalf("valid commit: %v", err)
		}
	})
}

// TestSchemaErrorsMatchTheirSentinels: through the client, schema errors
// match the run package's sentinels, as in-process.
func TestSchemaErrorsMatchTheirSentinels(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	ctx := context.Background()
	if _, err := e.c.GetSchema(ctx, "wf", 1); !errors.Is(err, run.ErrSchemaNotFound) {
		t.Fatalf("missing schema: %v", err)
	}
	if _, _, err := e.c.PutSchema(ctx, "wf", 1, json.RawMessage(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.PutSchema(ctx, "wf", 1, json.RawMessage(`{"type":"array"}`)); !errors.Is(err, run.ErrSchemaConflict) {
		t.Fatalf("another schema at a registered version: %v", err)
	}
	if _, _, err := e.c.PutSchema(ctx, "wf", 2, json.RawMessage(`{"type":"bogus"}`)); !errors.Is(err, run.ErrInvalidSchema) {
		t.Fatalf("an invalid schema: %v", err)
	}
}
