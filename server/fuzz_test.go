package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/server"
)

// checkAnswer asserts the invariants of every answer: never 5xx, and every
// error is a well-formed problem with the response's status.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, what string) {
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body.String())
	}
	if rec.Code < 400 {
		return
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: %d with Content-Type %q", what, rec.Code, ct)
	}
	var p server.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Type == "" {
		t.Fatalf("%s: bad problem %q (%v)", what, rec.Body.String(), err)
	}
}

// FuzzCommitBody feeds arbitrary bodies and If-Match headers to the commit
// decoding path of a real server on SQLite.
func FuzzCommitBody(f *testing.F) {
	e := newEnv(f, "sqlite", envOptions{cfg: memento.Config{MaxStateBytes: 2048}})
	_, l := e.leasedRun(f, "fuzz")
	lease, _ := json.Marshal(l)
	f.Add([]byte(`{"expected_revision":1,"lease":`+string(lease)+`,"event":{"event_type":"x"},"state":{}}`), "")
	f.Add([]byte(`{"expected_revision":1,"lease":`+string(lease)+`,"event":{"event_type":"x","payload":[1]},"state":{"a":1},"status":"completed"}`), `"1"`)
	f.Add([]byte(`{"expected_revision":"1"}`), `W/"1"`)
	f.Add([]byte(`{"lease":{"owner":"w","epoch":1e400}}`), "*")
	f.Add([]byte(`{"state":{"a":`), `"1", "2"`)
	f.Add([]byte(`[]`), "")
	f.Add([]byte("\xff\xfe"), "")
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/runs/fuzz/commit", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		checkAnswer(t, rec, "commit")
	})
}

// FuzzRunRequest feeds arbitrary bodies and query strings to every runs route.
func FuzzRunRequest(f *testing.F) {
	e := newEnv(f, "sqlite", envOptions{cfg: memento.Config{MaxStateBytes: 2048}})
	_, l := e.leasedRun(f, "fuzz")
	lease, _ := json.Marshal(l)
	f.Add(uint8(0), []byte(`{"run_id":"f2","workflow_name":"w","state":{"a":1}}`), "")
	f.Add(uint8(1), []byte(``), "status=running&limit=2")
	f.Add(uint8(2), []byte(``), "after=1&limit=1")
	f.Add(uint8(3), []byte(`{"owner":"w","ttl_ms":100,"epoch":1}`), "")
	f.Add(uint8(4), []byte(`{"lease":`+string(lease)+`}`), "")
	f.Add(uint8(5), []byte(`{"label":"c1","revision":1}`), "")
	f.Add(uint8(6), []byte(`{"from_revision":1,"run_id":"f3"}`), "")
	f.Add(uint8(7), []byte(`{"checkpoint":"c1"}`), "cursor=%zz")
	routes := []struct{ method, path string }{
		{"POST", "/v1/runs"},
		{"GET", "/v1/runs"},
		{"GET", "/v1/runs/fuzz/events"},
		{"POST", "/v1/runs/fuzz/lease"},
		{"DELETE", "/v1/runs/fuzz/lease"},
		{"POST", "/v1/runs/fuzz/checkpoints"},
		{"POST", "/v1/runs/fuzz/fork"},
		{"GET", "/v1/runs/fuzz"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte, rawQuery string) {
		rt := routes[int(which)%len(routes)]
		req := httptest.NewRequest(rt.method, "/", bytes.NewReader(body))
		req.URL.Path = rt.path
		req.URL.RawQuery = rawQuery
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		checkAnswer(t, rec, rt.method+" "+rt.path)
	})
}
