package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/mementohq/memento/session"
)

// pageThrough follows next_cursor from path (which has a query) and
// returns the id field of every item, page by page; it fails after 10 pages.
func pageThrough(t *testing.T, do func(path string) rawResponse, path, idField string, schemas *openAPISchemas, schema string) [][]string {
	t.Helper()
	var pages [][]string
	cursor := ""
	for len(pages) < 10 {
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		res := do(p)
		if res.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, res.status, res.body)
		}
		if schemas != nil {
			schemas.validate(t, schema, res.body)
		}
		var body struct {
			Items      []map[string]any `json:"items"`
			NextCursor *string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || body.NextCursor == nil {
			t.Fatalf("GET %s: not a list with next_cursor: %s", p, res.body)
		}
		var ids []string
		for _, it := range body.Items {
			ids = append(ids, fmt.Sprint(it[idField]))
		}
		pages = append(pages, ids)
		if *body.NextCursor == "" {
			return pages
		}
		cursor = *body.NextCursor
	}
	t.Fatalf("GET %s: paging does not end: %v", path, pages)
	return nil
}

// TestSessionListCursors pages through a user's sessions and a session's
// messages over HTTP on every session backend: every item once, in order,
// next_cursor "" on the last page, a malformed cursor a 422.
func TestSessionListCursors(t *testing.T) {
	forEachSessionBackend(t, func(t *testing.T, backend string) {
		e := newSessionEnv(t, backend, session.Options{})
		schemas := compileOpenAPI(t, e.testEnv)
		w := auth(writerKey)
		for i := range 5 {
			if r := e.do(t, "PUT", fmt.Sprintf("/v1/sessions/s%d", i), map[string]any{"user_id": "u", "state": map[string]any{"n": i}}, w); r.status != http.StatusCreated {
				t.Fatalf("put: %d %s", r.status, r.body)
			}
			time.Sleep(2 * time.Millisecond) // distinct activity times
		}
		do := func(p string) rawResponse { return e.do(t, "GET", p, nil, w) }
		got := pageThrough(t, do, "/v1/sessions?user_id=u&limit=2", "session_id", schemas, "SessionList")
		if fmt.Sprint(got) != "[[s4 s3] [s2 s1] [s0]]" {
			t.Fatalf("session pages %v, want [[s4 s3] [s2 s1] [s0]]", got)
		}
		msgs := make([]map[string]any, 7)
		for i := range msgs {
			msgs[i] = map[string]any{"role": "user", "content": fmt.Sprintf("m%d", i+1)}
		}
		if r := e.do(t, "POST", "/v1/sessions/s0/messages?user_id=u", map[string]any{"messages": msgs}, w); r.status != http.StatusOK {
			t.Fatalf("append: %d %s", r.status, r.body)
		}
		got = pageThrough(t, do, "/v1/sessions/s0/messages?user_id=u&limit=3", "seq", schemas, "MessageList")
		if fmt.Sprint(got) != "[[5 6 7] [2 3 4] [1]]" {
			t.Fatalf("message pages %v, want newest first: [[5 6 7] [2 3 4] [1]]", got)
		}
		// The Go client follows the same cursors (the append made s0 the most recent).
		p1, err := e.c.ListSessionsPage(t.Context(), "u", "", 3)
		if err != nil || len(p1.Items) != 3 || p1.NextCursor == "" {
			t.Fatalf("client page 1: %+v %v", p1, err)
		}
		p2, err := e.c.ListSessionsPage(t.Context(), "u", p1.NextCursor, 3)
		if err != nil || len(p2.Items) != 2 || p2.NextCursor != "" || p1.Items[0].SessionID != "s0" || p2.Items[1].SessionID != "s1" {
			t.Fatalf("client page 2: %+v %v", p2, err)
		}
		m1, err := e.c.ListMessagesPage(t.Context(), "s0", "u", session.MessageQuery{Limit: 4}, "")
		if err != nil || len(m1.Items) != 4 || m1.Items[0].Seq != 4 {
			t.Fatalf("client message page: %+v %v", m1, err)
		}
		if m2, err := e.c.ListMessagesPage(t.Context(), "s0", "u", session.MessageQuery{Limit: 4}, m1.NextCursor); err != nil || len(m2.Items) != 3 || m2.NextCursor != "" {
			t.Fatalf("client message page 2: %+v %v", m2, err)
		}
		expectProblem(t, e.do(t, "GET", "/v1/sessions?user_id=u&cursor=garbage", nil, w), http.StatusUnprocessableEntity, "invalid-request")
		expectProblem(t, e.do(t, "GET", "/v1/sessions/s0/messages?user_id=u&cursor=garbage", nil, w), http.StatusUnprocessableEntity, "invalid-request")
	})
}

// TestOperationListCursors pages through a run's operations and approvals.
func TestOperationListCursors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{})
		schemas := compileOpenAPI(t, e)
		e.leasedRun(t, "run-pages")
		for i := range 5 {
			prep := map[string]any{"business_key": fmt.Sprintf("k-%d", i), "step_id": "s", "tool_name": "t", "request_digest": "sha256:aa"}
			if r := e.do(t, "POST", "/v1/runs/run-pages/operations", prep, nil); r.status != http.StatusCreated {
				t.Fatalf("prepare: %d %s", r.status, r.body)
			}
			req := map[string]any{"approval_id": fmt.Sprintf("ap-%d", i), "step_id": "s", "request_digest": "sha256:r", "ttl_ms": 60000}
			if r := e.do(t, "POST", "/v1/runs/run-pages/approvals", req, nil); r.status != http.StatusCreated {
				t.Fatalf("approval: %d %s", r.status, r.body)
			}
		}
		do := func(p string) rawResponse { return e.do(t, "GET", p, nil, nil) }
		all := pageThrough(t, do, "/v1/runs/run-pages/operations?limit=100", "operation_id", schemas, "OperationList")
		if len(all) != 1 || len(all[0]) != 5 {
			t.Fatalf("one page of all operations: %v", all)
		}
		got := pageThrough(t, do, "/v1/runs/run-pages/operations?limit=2", "operation_id", schemas, "OperationList")
		if len(got) != 3 || fmt.Sprint(append(append(got[0], got[1]...), got[2]...)) != fmt.Sprint(all[0]) {
			t.Fatalf("operation pages %v, want the 5 of %v in pages of 2", got, all[0])
		}
		got = pageThrough(t, do, "/v1/runs/run-pages/approvals?limit=2", "approval_id", nil, "")
		if fmt.Sprint(got) != "[[ap-0 ap-1] [ap-2 ap-3] [ap-4]]" {
			t.Fatalf("approval pages %v", got)
		}
		expectProblem(t, e.do(t, "GET", "/v1/runs/run-pages/operations?cursor=garbage", nil, nil), http.StatusUnprocessableEntity, "invalid-request")
		// A well-formed cursor naming an id no run or label can have (a NUL,
		// a space) is refused before any store, on every backend.
		for _, forged := range []string{`{"c":1,"r":"\u0000"}`, `{"c":5,"r":"a b"}`} {
			c := base64.RawURLEncoding.EncodeToString([]byte(forged))
			expectProblem(t, e.do(t, "GET", "/v1/runs?cursor="+c, nil, nil), http.StatusUnprocessableEntity, "invalid-request")
			expectProblem(t, e.do(t, "GET", "/v1/runs/run-pages/checkpoints?cursor="+c, nil, nil), http.StatusUnprocessableEntity, "invalid-request")
		}
		expectProblem(t, e.do(t, "GET", "/v1/runs/run-pages/approvals?limit=x", nil, nil), http.StatusBadRequest, "invalid-request")
	})
}
