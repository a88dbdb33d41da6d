package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
)

// TestBadInputs: malformed, mistyped, oversized and forbidden requests are
// answered with problem+json 4xx and the right kind, never 5xx, and a
// refused commit leaves the run untouched.
func TestBadInputs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const maxState = 4096
		e := newEnv(t, backend, envOptions{cfg: memento.Config{MaxStateBytes: maxState}})
		ctx := context.Background()
		_, l := e.leasedRun(t, "bad")
		leaseJSON, _ := json.Marshal(l)
		done, dl := e.leasedRun(t, "done")
		final := commitReq(1, dl, "finish", `{"done":true}`)
		final.Status = run.StatusCompleted
		if _, err := e.c.Commit(ctx, done.RunID, final); err != nil {
			t.Fatal(err)
		}
		commit := func(extra string) string {
			return `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":{"event_type":"x"},"state":{}` + extra + `}`
		}
		hugeState := `{"blob":"` + strings.Repeat("a", maxState) + `"}`
		hugeBody := `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":{"event_type":"x"},"state":{"blob":"` + strings.Repeat("a", 3*maxState+(64<<10)) + `"}}`
		before := e.snapshot(t, "bad")

		cases := []struct {
			name         string
			method, path string
			body         string
			header       map[string]string
			status       int
			kind         string
		}{
			{"malformed json", "POST", "/v1/runs/bad/commit", `{"expected_revision":1,`, nil, 400, "invalid-request"},
			{"garbage", "POST", "/v1/runs/bad/commit", `not json`, nil, 400, "invalid-request"},
			{"empty body", "POST", "/v1/runs/bad/commit", ``, nil, 400, "invalid-request"},
			{"array body", "POST", "/v1/runs/bad/commit", `[1,2]`, nil, 400, "invalid-request"},
			{"null body", "POST", "/v1/runs/bad/commit", `null`, nil, 400, "invalid-request"},
			{"trailing data", "POST", "/v1/runs/bad/commit", commit("") + `{}`, nil, 400, "invalid-request"},
			{"wrong type revision", "POST", "/v1/runs/bad/commit", `{"expected_revision":"1"}`, nil, 400, "invalid-request"},
			{"fractional revision", "POST", "/v1/runs/bad/commit", `{"expected_revision":1.5}`, nil, 400, "invalid-request"},
			{"wrong type lease", "POST", "/v1/runs/bad/commit", `{"lease":"w1"}`, nil, 400, "invalid-request"},
			{"wrong type epoch", "POST", "/v1/runs/bad/commit", `{"lease":{"owner":"w","epoch":true}}`, nil, 400, "invalid-request"},
			{"unknown field", "POST", "/v1/runs/bad/commit", commit(`,"expected_rev":1`), nil, 400, "invalid-request"},
			{"not json content type", "POST", "/v1/runs/bad/commit", commit(""), map[string]string{"Content-Type": "text/plain"}, 415, "unsupported-media-type"},
			{"state not an object", "POST", "/v1/runs/bad/commit", `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":{"event_type":"x"},"state":[1]}`, nil, 422, "invalid-request"},
			{"missing state", "POST", "/v1/runs/bad/commit", `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":{"event_type":"x"}}`, nil, 422, "invalid-request"},
			{"unknown status", "POST", "/v1/runs/bad/commit", commit(`,"status":"sleeping"`), nil, 422, "invalid-request"},
			{"reserved event type", "POST", "/v1/runs/bad/commit", `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":{"event_type":"run.created"},"state":{}}`, nil, 422, "invalid-request"},
			{"zero revision", "POST", "/v1/runs/bad/commit", `{"lease":` + string(leaseJSON) + `,"event":{"event_type":"x"},"state":{}}`, nil, 422, "invalid-request"},
			{"state too large", "POST", "/v1/runs/bad/commit", `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":{"event_type":"x"},"state":` + hugeState + `}`, nil, 413, "state-too-large"},
			{"body too large", "POST", "/v1/runs/bad/commit", hugeBody, nil, 413, "request-too-large"},
			{"if-match disagrees", "POST", "/v1/runs/bad/commit", commit(""), map[string]string{"If-Match": `"7"`}, 412, "precondition-failed"},
			{"if-match weak", "POST", "/v1/runs/bad/commit", commit(""), map[string]string{"If-Match": `W/"1"`}, 412, "precondition-failed"},
			{"terminal run commit", "POST", "/v1/runs/done/commit", `{"expected_revision":2,"lease":` + mustJSON(dl) + `,"event":{"event_type":"x"},"state":{}}`, nil, 422, "invalid-transition"},
			{"terminal run lease", "POST", "/v1/runs/done/lease", `{"owner":"w9"}`, nil, 409, "run-not-active"},
			{"unknown run commit", "POST", "/v1/runs/ghost/commit", commit(""), nil, 404, "run-not-found"},
			{"unknown run get", "GET", "/v1/runs/ghost", "", nil, 404, "run-not-found"},
			{"unknown run events", "GET", "/v1/runs/ghost/events", "", nil, 404, "run-not-found"},
			{"unknown run checkpoints", "GET", "/v1/runs/ghost/checkpoints", "", nil, 404, "run-not-found"},
			{"bad run id", "POST", "/v1/runs", `{"run_id":"has space","workflow_name":"w"}`, nil, 422, "invalid-request"},
			{"missing workflow", "POST", "/v1/runs", `{"run_id":"r"}`, nil, 422, "invalid-request"},
			{"create state string", "POST", "/v1/runs", `{"workflow_name":"w","state":"x"}`, nil, 422, "invalid-request"},
			{"negative schema version", "POST", "/v1/runs", `{"workflow_name":"w","state_schema_version":-1}`, nil, 422, "invalid-request"},
			{"long idempotency key", "POST", "/v1/runs", `{"workflow_name":"w"}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}, 422, "invalid-request"},
			{"list unknown status", "GET", "/v1/runs?status=sleeping", "", nil, 422, "invalid-request"},
			{"list bad limit", "GET", "/v1/runs?limit=abc", "", nil, 400, "invalid-request"},
			{"list negative limit", "GET", "/v1/runs?limit=-1", "", nil, 400, "invalid-request"},
			{"list huge limit", "GET", "/v1/runs?limit=99999999999999999999", "", nil, 400, "invalid-request"},
			{"list limit over max", "GET", "/v1/runs?limit=5000", "", nil, 422, "invalid-request"},
			{"operations limit over max", "GET", "/v1/runs/bad/operations?limit=100000", "", nil, 422, "invalid-request"},
			{"approvals limit over max", "GET", "/v1/runs/bad/approvals?limit=1001", "", nil, 422, "invalid-request"},
			{"list bad cursor", "GET", "/v1/runs?cursor=%%%", "", nil, 400, "invalid-request"},
			{"list garbage cursor", "GET", "/v1/runs?cursor=bm90IGpzb24", "", nil, 422, "invalid-request"},
			{"events bad after", "GET", "/v1/runs/bad/events?after=x", "", nil, 400, "invalid-request"},
			{"lease ttl huge", "POST", "/v1/runs/bad/lease", `{"owner":"w2","ttl_ms":9223372036854775807}`, nil, 422, "invalid-request"},
			{"lease ttl negative", "POST", "/v1/runs/bad/lease", `{"owner":"w2","ttl_ms":-5}`, nil, 422, "invalid-request"},
			{"lease no owner", "POST", "/v1/runs/bad/lease", `{}`, nil, 422, "invalid-request"},
			{"lease held", "POST", "/v1/runs/bad/lease", `{"owner":"w2"}`, nil, 409, "lease-held"},
			{"release wrong epoch", "DELETE", "/v1/runs/bad/lease", `{"lease":{"owner":"worker-1","epoch":5,"expires_at":"2030-01-01T00:00:00Z"}}`, nil, 409, "lease-lost"},
			{"release bad time", "DELETE", "/v1/runs/bad/lease", `{"lease":{"owner":"worker-1","epoch":1,"expires_at":"soon"}}`, nil, 400, "invalid-request"},
			{"fork both", "POST", "/v1/runs/bad/fork", `{"from_revision":1,"checkpoint":"x"}`, nil, 422, "invalid-request"},
			{"fork neither", "POST", "/v1/runs/bad/fork", `{}`, nil, 422, "invalid-request"},
			{"fork missing revision", "POST", "/v1/runs/bad/fork", `{"from_revision":40}`, nil, 404, "revision-not-found"},
			{"checkpoint no label", "POST", "/v1/runs/bad/checkpoints", `{}`, nil, 422, "invalid-request"},
			{"unknown route", "GET", "/v1/nothing-here", "", nil, 404, "not-found"},
			{"wrong method", "PUT", "/v1/runs/bad", "", nil, 405, "method-not-allowed"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var body any
				if tc.body != "" || tc.method == "POST" {
					body = tc.body
				}
				res := e.do(t, tc.method, tc.path, body, tc.header)
				if res.status >= 500 {
					t.Fatalf("5xx: %d %s", res.status, res.body)
				}
				p := expectProblem(t, res, tc.status, tc.kind)
				if p.Detail == "" {
					t.Fatalf("problem without detail: %s", res.body)
				}
				if tc.status == http.StatusMethodNotAllowed && !strings.Contains(res.header.Get("Allow"), "GET") {
					t.Fatalf("405 without Allow: %v", res.header)
				}
			})
		}
		before.assertSame(t, e.snapshot(t, "bad"))
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestEmptyPathSegmentIsNotFound: a path with an id left out is a 404
// problem, not a redirect to another resource.
func TestEmptyPathSegmentIsNotFound(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/subjects//profile"}, {"DELETE", "/v1/subjects//memories"}, {"POST", "/v1//memories"},
		{"GET", "/v1/runs/./events"}, {"GET", "/v1/runs/x/../y"}, {"GET", "//v1/runs"},
	} {
		r := e.do(t, c.method, c.path, nil, nil)
		p := expectProblem(t, r, http.StatusNotFound, problem.NotFound)
		if r.header.Get("Location") != "" || !strings.Contains(p.Detail, "segment") {
			t.Fatalf("%s %s: %+v, Location %q", c.method, c.path, p, r.header.Get("Location"))
		}
	}
}

// TestOutOfRangeValuesSayWhy: a value of the right JSON kind that does not
// fit its field is answered with what the field takes, not "a number, not
// a JSON number".
func TestOutOfRangeValuesSayWhy(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	prov := `"provenance":{"source_type":"message","source_id":"m","validated_by":"user_stated"}`
	// A number no double holds is refused before any field is read (422).
	p := expectProblem(t, e.do(t, "POST", "/v1/memories", `{"subject_id":"u","key":"k","value":1,"confidence":1e400,`+prov+`}`, nil), http.StatusUnprocessableEntity, problem.InvalidRequest)
	if !strings.Contains(p.Detail, "outside the range of a double") || !strings.Contains(p.Detail, "/confidence") {
		t.Errorf("1e400: detail %q", p.Detail)
	}
	for _, c := range []struct{ body, want string }{
		{`{"subject_id":"u","key":"k","value":1,"expires_at":"275760-01-01T00:00:00Z",` + prov + `}`, "years 0000 to 9999"},
		{`{"subject_id":"u","key":"k","value":1,"schema_version":9223372036854775808,` + prov + `}`, "whole number"},
		{`{"subject_id":"u","key":"k","value":1,"schema_version":1.5,` + prov + `}`, "whole number"},
		{`{"subject_id":"u","key":"k","value":1,"confidence":"high",` + prov + `}`, "not a JSON string"},
	} {
		p := expectProblem(t, e.do(t, "POST", "/v1/memories", c.body, nil), http.StatusBadRequest, problem.InvalidRequest)
		if !strings.Contains(p.Detail, c.want) || strings.Contains(p.Detail, "not a JSON number") {
			t.Errorf("%s: detail %q, want %q", c.body, p.Detail, c.want)
		}
	}
}

// TestPathOnlyRoutesRefuseGarbageBodies: a DELETE or a membership write
// with a body that is not JSON is refused and changes nothing.
func TestPathOnlyRoutesRefuseGarbageBodies(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	if r := e.do(t, "PUT", "/v1/documents/d1", `{"source_uri":"kb://d1","source_version":"1","content":"refunds take five days","acl":["tenant"]}`, nil); r.status >= 300 {
		t.Fatalf("put document: %d %s", r.status, r.body)
	}
	expectProblem(t, e.do(t, "DELETE", "/v1/documents/d1", "{{{", nil), http.StatusBadRequest, problem.InvalidRequest)
	if r := e.do(t, "GET", "/v1/documents/d1", nil, nil); r.status != http.StatusOK {
		t.Fatalf("a refused delete removed the document: %d", r.status)
	}
	expectProblem(t, e.do(t, "PUT", "/v1/groups/g/members/user:a", "{{{", nil), http.StatusBadRequest, problem.InvalidRequest)
	if r := e.do(t, "PUT", "/v1/groups/g/members/user:a", "", nil); r.status >= 300 {
		t.Fatalf("membership without a body: %d %s", r.status, r.body)
	}
	if r := e.do(t, "DELETE", "/v1/documents/d1", "{}", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete with an empty JSON body: %d %s", r.status, r.body)
	}
}
