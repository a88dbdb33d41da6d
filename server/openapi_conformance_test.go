package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/server"
)

// The API document, read as much as the conformance tests need.
type apiDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses  map[string]apiResponse  `json:"responses"`
		Parameters map[string]apiParameter `json:"parameters"`
	} `json:"components"`
}

type apiParameter struct {
	Ref      string `json:"$ref"`
	Name     string `json:"name"`
	In       string `json:"in"`
	Required bool   `json:"required"`
	Schema   struct {
		Type string `json:"type"`
	} `json:"schema"`
}

type apiResponse struct {
	Ref     string                     `json:"$ref"`
	Content map[string]json.RawMessage `json:"content"`
}

type apiOperation struct {
	Parameters  []apiParameter         `json:"parameters"`
	Responses   map[string]apiResponse `json:"responses"`
	RequestBody *struct {
		Content map[string]json.RawMessage `json:"content"`
	} `json:"requestBody"`
}

// docOperation is one operation with what the probes need of it.
type docOperation struct {
	method, path string
	pathParams   []string
	// valid holds a well-formed value of each path parameter, and query
	// the required query parameters, so that a body probe reaches the body.
	valid    map[string]string
	query    string
	jsonBody bool
	// answers maps each declared status to the media types its answer may have.
	answers map[int][]string
}

// mcpPath is the one path that is not a REST route: it speaks JSON-RPC (the
// MCP streamable-HTTP transport) and refuses a malformed message with a
// JSON-RPC error, not a problem, so that the client can match its id.
const mcpPath = "/mcp"

func readAPIDoc(t *testing.T, raw []byte) []docOperation {
	t.Helper()
	var d apiDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	param := func(p apiParameter) apiParameter {
		if p.Ref != "" {
			return d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		return p
	}
	var ops []docOperation
	for path, item := range d.Paths {
		var shared []apiParameter
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				t.Fatalf("parameters of %s: %v", path, err)
			}
		}
		for method, raw := range item {
			if !httpMethods[method] {
				continue
			}
			var o apiOperation
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			op := docOperation{method: strings.ToUpper(method), path: path, valid: map[string]string{}, answers: map[int][]string{}}
			query := url.Values{}
			for _, p := range append(slices.Clone(shared), o.Parameters...) {
				value := "probe-1"
				if p = param(p); p.Schema.Type == "integer" {
					value = "1"
				}
				switch {
				case p.In == "path":
					op.pathParams = append(op.pathParams, p.Name)
					op.valid[p.Name] = value
				case p.In == "query" && p.Required:
					query.Set(p.Name, value)
				}
			}
			op.query = query.Encode()
			if o.RequestBody != nil {
				_, op.jsonBody = o.RequestBody.Content["application/json"]
			}
			for code, r := range o.Responses {
				status, err := strconv.Atoi(code)
				if err != nil {
					t.Fatalf("%s %s: response %q is not a status; the probes need exact statuses", op.method, path, code)
				}
				if r.Ref != "" {
					r = d.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
				}
				op.answers[status] = slices.Sorted(maps.Keys(r.Content))
			}
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	return ops
}

// serveWithMCP serves the sqlite engine's API and the MCP endpoint, as
// memento serve does, so that every documented operation is answered.
func serveWithMCP(t *testing.T) *testEnv {
	t.Helper()
	eng := openEngine(t, "sqlite", memento.Config{})
	m := mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
		mcp.Options{Classify: server.ClassifyError})
	return serveEngineWith(t, eng, "", "", func(o *server.Options) {
		o.MCP = m
		o.MaxBodyBytes = probeBodyLimit
	})
}

// probe is one request that the document must describe the answer to.
type probe struct {
	name        string
	path        string
	contentType string
	body        string
	// want, when set, is the one status an operation with a documented
	// JSON body must answer: the body is refused before anything else.
	want int
}

// probeBodyLimit is the body limit of the server the probes are sent to,
// small so that a body over it is cheap to send.
const probeBodyLimit = 16 << 10

// routeBodyLimit is the body limit of a route that has its own
// (Route.MaxBody), 0 for the others.
func routeBodyLimit(op docOperation) int {
	if op.method == http.MethodPut && op.path == "/v1/documents/{document_id}" {
		return 6*retrieval.MaxContentBytes + 64<<10
	}
	return 0
}

// probesOf are the requests sent to op: its path ids over-long or not
// text; and, on a write, a body under the wrong Content-Type, malformed
// JSON and a body over the limit. A write that documents no body gets
// them too: whether it reads or refuses one, the answer must be declared.
func probesOf(op docOperation) []probe {
	// fill puts v in every path id, or a valid value when v is "".
	fill := func(v string) string {
		p := op.path
		for _, name := range op.pathParams {
			pv := v
			if pv == "" {
				pv = op.valid[name]
			}
			p = strings.Replace(p, "{"+name+"}", pv, 1)
		}
		if op.query != "" {
			p += "?" + op.query
		}
		return p
	}
	write := op.method != http.MethodGet
	body, ct := "", ""
	if write {
		body, ct = "{}", "application/json"
	}
	var ps []probe
	if len(op.pathParams) > 0 {
		ps = append(ps,
			probe{"over-long path id", fill(strings.Repeat("a", server.MaxIDBytes+1)), ct, body, 0},
			probe{"path id with NUL", fill("a%00b"), ct, body, 0},
			probe{"path id not UTF-8", fill("a%FFb"), ct, body, 0},
			probe{"path id an encoded surrogate", fill("a%ED%A0%80b"), ct, body, 0})
	}
	if write {
		ps = append(ps,
			probe{"text/plain body", fill(""), "text/plain", "{}", http.StatusUnsupportedMediaType},
			probe{"malformed JSON body", fill(""), "application/json", `{"a":`, http.StatusBadRequest},
			probe{"body over the limit", fill(""), "application/json", `{"a":"` + strings.Repeat("x", 2*max(probeBodyLimit, routeBodyLimit(op))) + `"}`, http.StatusRequestEntityTooLarge})
	}
	return ps
}

// TestOpenAPIDeclaresAnswers: every operation in the document answers
// hostile requests (bad path ids, a JSON body sent as text/plain, malformed
// JSON, a body too large) with a status the document declares for it,
// never a 5xx, and an error in the media type declared (problem+json on
// every REST route), so a client generated from the document can read
// every answer.
func TestOpenAPIDeclaresAnswers(t *testing.T) {
	e := serveWithMCP(t)
	res := e.do(t, "GET", "/openapi.json", nil, nil)
	ops := readAPIDoc(t, res.body)
	if len(ops) == 0 {
		t.Fatal("no operations in the document")
	}
	probed := 0
	for _, op := range ops {
		if n := strings.Count(op.path, "{"); len(op.pathParams) != n {
			t.Errorf("%s %s: %d path parameters found for %d in the path; the probes would miss ids", op.method, op.path, len(op.pathParams), n)
		}
		for _, p := range probesOf(op) {
			probed++
			h := map[string]string{}
			if p.contentType != "" {
				h["Content-Type"] = p.contentType
			}
			if op.path == mcpPath {
				h["Accept"] = "application/json, text/event-stream"
			}
			if _, ok := op.answers[http.StatusPreconditionRequired]; ok {
				h["If-Match"] = `"1"` // else 428 comes before the body is read
			}
			var body any
			if p.body != "" {
				body = p.body
			}
			res := e.do(t, op.method, p.path, body, h)
			what := fmt.Sprintf("%s %s, %s: %d", op.method, op.path, p.name, res.status)
			if res.status >= 500 {
				t.Errorf("%s: a server error for a client's mistake; body %s", what, res.body)
				continue
			}
			types, declared := op.answers[res.status]
			if !declared {
				t.Errorf("%s is not a status the document declares (it declares %v); body %s", what, slices.Sorted(maps.Keys(op.answers)), res.body)
				continue
			}
			if op.jsonBody && p.want != 0 && res.status != p.want {
				t.Errorf("%s, want %d; body %s", what, p.want, res.body)
			}
			if res.status < 400 {
				continue
			}
			ct, _, _ := mime.ParseMediaType(res.header.Get("Content-Type"))
			if op.path != mcpPath && ct != "application/problem+json" {
				t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
			}
			if len(types) > 0 && !slices.Contains(types, ct) {
				t.Errorf("%s: Content-Type %q, the document declares %v", what, ct, types)
			}
		}
	}
	if probed == 0 {
		t.Fatal("no probes sent")
	}
}

// TestOpenAPIMCPMethods: the document lists exactly the methods the MCP
// endpoint answers (it is no server.Route, so route coverage misses it).
func TestOpenAPIMCPMethods(t *testing.T) {
	e := serveWithMCP(t)
	res := e.do(t, "GET", "/openapi.json", nil, nil)
	documented := map[string]bool{}
	for _, op := range readAPIDoc(t, res.body) {
		if op.path == mcpPath {
			documented[op.method] = true
		}
	}
	if len(documented) == 0 {
		t.Fatal("/mcp is not in the document")
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		res := e.do(t, m, mcpPath, nil, map[string]string{"Accept": "application/json, text/event-stream"})
		if served := res.status != http.StatusMethodNotAllowed; served != documented[m] {
			t.Errorf("%s /mcp: answered %d, documented %v", m, res.status, documented[m])
		}
	}
}

// TestCommitAnswersMatchOperationSchema: both commit answers, the full run
// and the minimal one, validate against the operation's own 200 schema
// (not just a component), which a oneOf of overlapping shapes would refuse.
func TestCommitAnswersMatchOperationSchema(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	schemas := compileOpenAPI(t, e)
	const answer = "/paths/~1v1~1runs~1%7Brun_id%7D~1commit/post/responses/200/content/application~1json/schema"
	_, l := e.leasedRun(t, "c1")
	for i, prefer := range []string{"", "return=minimal"} {
		res := e.do(t, "POST", "/v1/runs/c1/commit", commitReq(int64(i+1), l, "s", `{"a":1}`), map[string]string{"Prefer": prefer})
		if res.status != http.StatusOK {
			t.Fatalf("commit (Prefer %q): %d %s", prefer, res.status, res.body)
		}
		schemas.validateAt(t, answer, fmt.Sprintf("commit answer (Prefer %q)", prefer), res.body)
	}
}

// An extraction that invalidates a claim ("I don't live in Oslo anymore")
// answers an outcome the document lists.
func TestExtractAnswersMatchOperationSchema(t *testing.T) {
	e := newMemEnv(t, "sqlite", memory.Options{})
	schemas := compileOpenAPI(t, e.testEnv)
	const answer = "/paths/~1v1~1memories~1extract/post/responses/200/content/application~1json/schema"
	for _, say := range []string{"I live in Oslo", "I don't live in Oslo anymore"} {
		res := e.do(t, "POST", "/v1/memories/extract", map[string]any{"subject_id": "d3", "apply": true,
			"messages": []map[string]any{{"role": "user", "content": say}}}, e.a)
		if res.status != http.StatusOK {
			t.Fatalf("extract %q: %d %s", say, res.status, res.body)
		}
		schemas.validateAt(t, answer, fmt.Sprintf("extract answer to %q", say), res.body)
	}
}
