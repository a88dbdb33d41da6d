package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mementohq/memento/problem"
)

// TestPanicBecomesProblem: a panicking handler answers a 500 problem and is
// logged with its stack; the process goes on serving.
func TestPanicBecomesProblem(t *testing.T) {
	var logs strings.Builder
	s := &Server{
		keys:    NewKeySet(),
		log:     slog.New(slog.NewTextHandler(&logs, nil)),
		metrics: newMetrics(),
		mux:     http.NewServeMux(),
	}
	s.mux.HandleFunc("GET /boom", s.wrap(Route{Method: "GET", Path: "/boom", Public: true, Handler: func(http.ResponseWriter, *http.Request) error {
		panic("secret-value")
	}}))
	for range 2 {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
		var p Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 500 || p.Kind() != problem.Internal || p.RequestID == "" {
			t.Fatalf("panic answer: %d %s", rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), "secret-value") {
			t.Fatal("the panic value leaks into the response")
		}
	}
	if !strings.Contains(logs.String(), "panic") || !strings.Contains(logs.String(), "secret-value") || !strings.Contains(logs.String(), "goroutine") {
		t.Fatalf("panic not logged with its stack:\n%s", logs.String())
	}
}

func TestIfMatchRevision(t *testing.T) {
	cases := []struct {
		header   string
		expected int64
		want     int64
		kind     string
	}{
		{`"3"`, 3, 3, ""},
		{`"3"`, 0, 3, ""},
		{`*`, 4, 4, ""},
		{` "2", "3" `, 3, 3, ""},
		{`"2", "3"`, 0, 0, problem.InvalidRequest},
		{`"3"`, 4, 0, problem.PreconditionFailed},
		{`W/"3"`, 3, 0, problem.PreconditionFailed},
		{`3`, 3, 0, problem.PreconditionFailed},
		{`"0"`, 0, 0, problem.PreconditionFailed},
		{`"-1"`, 0, 0, problem.PreconditionFailed},
		{`""`, 0, 0, problem.PreconditionFailed},
	}
	for _, c := range cases {
		got, err := ifMatchRevision(c.header, c.expected)
		kind := ""
		if ae, ok := err.(*apiError); ok {
			kind = ae.kind
		} else if err != nil {
			t.Fatalf("%q: unexpected error type %T", c.header, err)
		}
		if got != c.want || kind != c.kind {
			t.Errorf("ifMatchRevision(%q, %d) = %d, %q; want %d, %q", c.header, c.expected, got, kind, c.want, c.kind)
		}
	}
}

// TestDecodeErrorsAreClear: the detail of a decoding problem names the field.
func TestDecodeErrorsAreClear(t *testing.T) {
	s := &Server{maxBody: 1 << 20}
	var dst struct {
		Lease struct {
			Epoch int64 `json:"epoch"`
		} `json:"lease"`
	}
	for body, want := range map[string]string{
		`{"lease":{"epoch":"x"}}`: `field "lease.epoch" must be an integer, not a JSON string`,
		`{"lease":{"owner":"x"}}`: `unknown field "owner"`,
		`{"a.b":1}`:               `unknown field "a.b"`,
		`{"lease":{"x/y~z":1}}`:   `unknown field "x/y~z"`,
		`{"lease":`:               "malformed JSON",
		`{"lease":{}} x`:          "unexpected data after the JSON object",
		"  ":                      "empty",
	} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		err := s.decodeJSON(httptest.NewRecorder(), req, &dst)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decode %q: %v, want it to mention %q", body, err, want)
		}
	}
}

// TestOpenAPIComposition: fragments merge; a domain cannot redefine another's
// operation or component, and shared path-level fields must agree.
func TestOpenAPIComposition(t *testing.T) {
	base := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{},"components":{"schemas":{"Problem":{}}}}`
	cases := []struct {
		name  string
		files map[string]string
		err   string
	}{
		{"merge", map[string]string{
			"openapi/a.json": `{"paths":{"/x/{id}":{"parameters":[{"name":"id","in":"path"}],"get":{}}},"components":{"schemas":{"A":{}}}}`,
			"openapi/b.json": `{"paths":{"/x/{id}":{"parameters":[{"name":"id", "in":"path"}],"post":{}}}}`,
		}, ""},
		{"duplicate operation", map[string]string{
			"openapi/a.json": `{"paths":{"/x":{"get":{}}}}`,
			"openapi/b.json": `{"paths":{"/x":{"get":{"summary":"mine"}}}}`,
		}, "get /x defined twice"},
		{"disagreeing parameters", map[string]string{
			"openapi/a.json": `{"paths":{"/x/{id}":{"parameters":[{"name":"id"}],"get":{}}}}`,
			"openapi/b.json": `{"paths":{"/x/{id}":{"parameters":[{"name":"other"}],"post":{}}}}`,
		}, "parameters /x/{id} defined twice"},
		{"duplicate component", map[string]string{
			"openapi/a.json": `{"components":{"schemas":{"Problem":{"type":"object"}}}}`,
		}, "components.schemas.Problem defined twice"},
		{"unknown top-level field", map[string]string{
			"openapi/a.json": `{"info":{}}`,
		}, "only paths and components allowed"},
	}
	for _, c := range cases {
		fsys := fstest.MapFS{"openapi/base.json": {Data: []byte(base)}}
		for name, data := range c.files {
			fsys[name] = &fstest.MapFile{Data: []byte(data)}
		}
		doc, err := buildOpenAPI(fsys)
		if c.err == "" {
			var d struct {
				Paths map[string]map[string]any `json:"paths"`
			}
			if err != nil || json.Unmarshal(doc, &d) != nil || len(d.Paths["/x/{id}"]) != 3 {
				t.Errorf("%s: %v %s", c.name, err, doc)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.err)
		}
	}
}

// Request ids are unique, and of the form a caller may send back (short,
// printable), so a proxy that forwards one keeps it.
func TestNewRequestIDUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		id := newRequestID()
		if seen[id] {
			t.Fatalf("request id %s made twice", id)
		}
		seen[id] = true
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		r.Header.Set("X-Request-Id", id)
		if got := requestID(r); got != id {
			t.Fatalf("request id %q sent back is replaced by %q", id, got)
		}
	}
}
