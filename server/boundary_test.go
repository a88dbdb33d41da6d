package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/session"
)

// TestBoundaryRefusesTextNoStoreKeeps: NUL, invalid UTF-8 and lone
// surrogates in a body (values and keys), a path id or a query parameter,
// over-deep documents, 32-bit overflows, oversized ids, case-folded field
// names and duplicate names are refused with a 4xx problem before any
// store, on every backend, and the run is untouched. Before, PostgreSQL
// answered 500 and SQLite stored invalid UTF-8.
func TestBoundaryRefusesTextNoStoreKeeps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{cfg: memento.Config{}})
		_, l := e.leasedRun(t, "b")
		leaseJSON, _ := json.Marshal(l)
		commit := func(event, state, extra string) string {
			return `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":` + event + `,"state":` + state + extra + `}`
		}
		ev := `{"event_type":"x","attempt":1}`
		deep := strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100)
		before := e.snapshot(t, "b")
		cases := []struct {
			name, method, path, body string
			header                   map[string]string
			status                   int
		}{
			{"nul escape in state", "POST", "/v1/runs/b/commit", commit(ev, `{"a":"x\u0000y"}`, ""), nil, 422},
			{"nul escape in key", "POST", "/v1/runs/b/commit", commit(ev, `{"a\u0000":1}`, ""), nil, 422},
			{"nul in event payload", "POST", "/v1/runs/b/commit", commit(`{"event_type":"x","payload":{"p":"\u0000"}}`, `{}`, ""), nil, 422},
			{"nul in event type", "POST", "/v1/runs/b/commit", commit(`{"event_type":"x\u0000"}`, `{}`, ""), nil, 422},
			{"invalid utf-8 in state", "POST", "/v1/runs/b/commit", commit(ev, "{\"a\":\"\xff\xfe\"}", ""), nil, 422},
			{"invalid utf-8 in key", "POST", "/v1/runs/b/commit", commit(ev, "{\"\xc3\":1}", ""), nil, 422},
			{"lone surrogate", "POST", "/v1/runs/b/commit", commit(ev, `{"a":"\ud800"}`, ""), nil, 422},
			{"lone low surrogate in key", "POST", "/v1/runs/b/commit", commit(ev, `{"\udc00x":1}`, ""), nil, 422},
			{"deep state", "POST", "/v1/runs/b/commit", commit(ev, deep, ""), nil, 422},
			{"attempt 2^31", "POST", "/v1/runs/b/commit", commit(`{"event_type":"x","attempt":2147483648}`, `{}`, ""), nil, 422},
			{"schema version 2^31", "POST", "/v1/runs/b/commit", commit(ev, `{}`, `,"state_schema_version":2147483648`), nil, 422},
			{"create schema version 2^31", "POST", "/v1/runs", `{"workflow_name":"w","workflow_version":"1","state_schema_version":2147483648}`, nil, 422},
			// A revision at the 64-bit edge: one past it overflowed PostgreSQL (500).
			{"expected revision 2^63-1", "POST", "/v1/runs/b/commit", strings.Replace(commit(ev, `{}`, ""), `"expected_revision":1`, `"expected_revision":9223372036854775807`, 1), nil, 422},
			{"If-Match 2^63-1", "POST", "/v1/runs/b/commit", strings.Replace(commit(ev, `{}`, ""), `"expected_revision":1,`, ``, 1), map[string]string{"If-Match": `"9223372036854775807"`}, 422},
			{"fork from revision 2^63-1", "POST", "/v1/runs/b/fork", `{"from_revision":9223372036854775807}`, nil, 422},
			{"checkpoint at revision 2^63-1", "POST", "/v1/runs/b/checkpoints", `{"label":"l","revision":9223372036854775807}`, nil, 422},
			{"case-folded field", "POST", "/v1/runs/b/commit", `{"expected_revision":1,"lease":` + string(leaseJSON) + `,"event":` + ev + `,"State":{"x":1}}`, nil, 400},
			{"case-folded nested field", "POST", "/v1/runs/b/commit", commit(`{"Event_Type":"x"}`, `{}`, ""), nil, 400},
			{"duplicate name", "POST", "/v1/runs/b/commit", commit(ev, `{}`, `,"state":{"x":1}`), nil, 400},
			{"trailing brace", "POST", "/v1/runs/b/commit", commit(ev, `{}`, "") + "}", nil, 400},
			{"nul in path id", "GET", "/v1/runs/b%00", "", nil, 422},
			{"invalid utf-8 in path id", "POST", "/v1/runs/b%ff/commit", commit(ev, `{}`, ""), nil, 422},
			{"long path id", "GET", "/v1/runs/" + strings.Repeat("r", 10<<10), "", nil, 422},
			{"nul in query", "GET", "/v1/runs?workflow=a%00", "", nil, 422},
			{"invalid utf-8 in cursor", "GET", "/v1/runs?cursor=%ff%fe", "", nil, 422},
			{"long cursor", "GET", "/v1/runs?cursor=" + strings.Repeat("c", 4096), "", nil, 422},
			{"long idempotency key", "POST", "/v1/runs", `{"workflow_name":"w","workflow_version":"1"}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 1<<20-64<<10)}, 422},
			{"nul in run id", "POST", "/v1/runs", `{"run_id":"a\u0000","workflow_name":"w","workflow_version":"1"}`, nil, 422},
			{"long run id", "POST", "/v1/runs", `{"run_id":"` + strings.Repeat("r", 1<<20) + `","workflow_name":"w","workflow_version":"1"}`, nil, 422},
			{"long lease owner", "POST", "/v1/runs/b/lease", `{"owner":"` + strings.Repeat("o", 1<<20) + `"}`, nil, 422},
			{"long checkpoint label", "POST", "/v1/runs/b/checkpoints", `{"label":"` + strings.Repeat("l", 1<<20) + `"}`, nil, 422},
			{"long operation id", "POST", "/v1/runs/b/operations", `{"operation_id":"` + strings.Repeat("o", 1<<20) + `","step_id":"s","tool_name":"t","request_digest":"d"}`, nil, 422},
			{"long business key", "POST", "/v1/runs/b/operations", `{"business_key":"` + strings.Repeat("k", 1<<20) + `","step_id":"s","tool_name":"t","request_digest":"d"}`, nil, 422},
			{"empty if-match", "POST", "/v1/runs/b/commit", commit(ev, `{}`, ""), map[string]string{"If-Match": ""}, 412},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var body any
				if c.body != "" {
					body = c.body
				}
				res := e.do(t, c.method, c.path, body, c.header)
				expectProblem(t, res, c.status, map[int]string{400: "invalid-request", 422: "invalid-request", 412: "precondition-failed"}[c.status])
			})
		}
		e.snapshot(t, "b").assertSame(t, before)
		// Nothing was created either.
		list := e.do(t, "GET", "/v1/runs", nil, nil)
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(list.body, &page); err != nil || len(page.Items) != 1 {
			t.Fatalf("runs after refused requests: %s", list.body)
		}
	})
}

// TestSessionDocumentsHaveADepthBound: a merge patch nested 10,000 levels
// (about 50 KB, under the size limit) used to be stored and then every read
// of the session answered 500; a summary nested 9,999 levels likewise. Both
// are refused now and the session still reads. Also: a trailing "}" after a
// patch, NUL in a message, an empty If-Match on PUT, a summary without the
// text its schema requires (it was stored).
func TestSessionDocumentsHaveADepthBound(t *testing.T) {
	for _, backend := range sessionBackends {
		t.Run(backend, func(t *testing.T) {
			e := newSessionEnv(t, backend, session.Options{})
			h := auth(writerKey)
			res := e.do(t, "PUT", "/v1/sessions/s1", `{"user_id":"u1","state":{"a":1}}`, h)
			if res.status != http.StatusCreated {
				t.Fatalf("put: %d %s", res.status, res.body)
			}
			deep := func(n int) string { return strings.Repeat(`{"a":`, n) + `1` + strings.Repeat(`}`, n) }
			ifMatch := auth(writerKey, "If-Match", `"1"`, "Content-Type", "application/merge-patch+json")
			cases := []struct {
				name, method, path, body string
				header                   map[string]string
				status                   int
				kind                     string
			}{
				{"deep patch", "PATCH", "/v1/sessions/s1?user_id=u1", deep(10000), ifMatch, 422, "invalid-request"},
				{"patch just over the bound", "PATCH", "/v1/sessions/s1?user_id=u1", deep(65), ifMatch, 422, "invalid-request"},
				{"patch with trailing brace", "PATCH", "/v1/sessions/s1?user_id=u1", `{"b":2}}`, ifMatch, 400, "invalid-request"},
				{"patch with nul", "PATCH", "/v1/sessions/s1?user_id=u1", `{"b":"\u0000"}`, ifMatch, 422, "invalid-request"},
				{"deep summary", "PUT", "/v1/sessions/s1/summary?user_id=u1", `{"text":"t","through_seq":0,"data":` + deep(9999) + `}`, h, 422, "invalid-request"},
				{"nul in summary text", "PUT", "/v1/sessions/s1/summary?user_id=u1", `{"text":"a\u0000","through_seq":0}`, h, 422, "invalid-request"},
				{"summary without text", "PUT", "/v1/sessions/s1/summary?user_id=u1", `{"data":{"a":1},"through_seq":0}`, h, 422, "invalid-request"},
				{"nul in message", "POST", "/v1/sessions/s1/messages?user_id=u1", `{"messages":[{"role":"user","content":"hi\u0000"}]}`, h, 422, "invalid-request"},
				{"invalid utf-8 in message", "POST", "/v1/sessions/s1/messages?user_id=u1", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", h, 422, "invalid-request"},
				{"deep message metadata", "POST", "/v1/sessions/s1/messages?user_id=u1", `{"messages":[{"role":"user","content":"x","metadata":` + deep(200) + `}]}`, h, 422, "invalid-request"},
				{"case-folded field", "PUT", "/v1/sessions/s1", `{"user_id":"u1","State":{"b":1}}`, h, 400, "invalid-request"},
				{"empty if-match on put", "PUT", "/v1/sessions/s1", `{"user_id":"u1","state":{"b":1}}`, auth(writerKey, "If-Match", ""), 412, "precondition-failed"},
				{"nul in user id", "GET", "/v1/sessions/s1?user_id=u%00", "", h, 422, "invalid-request"},
				{"invalid utf-8 in session id", "GET", "/v1/sessions/s%ff?user_id=u1", "", h, 422, "invalid-request"},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					var body any
					if c.body != "" {
						body = c.body
					}
					expectProblem(t, e.do(t, c.method, c.path, body, c.header), c.status, c.kind)
				})
			}
			got := e.do(t, "GET", "/v1/sessions/s1?user_id=u1", nil, h)
			if got.status != 200 || !strings.Contains(string(got.body), `"revision":1`) || !strings.Contains(string(got.body), `"state":{"a":1}`) {
				t.Fatalf("session after refused writes: %d %s", got.status, got.body)
			}
			if list := e.do(t, "GET", "/v1/sessions?user_id=u1", nil, h); list.status != 200 {
				t.Fatalf("list: %d %s", list.status, list.body)
			}
		})
	}
}
