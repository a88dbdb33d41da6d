package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/server"
)

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

// TestOpenAPIRouteCoverage: every registered route is in /openapi.json and
// every documented operation is registered; public routes need no key.
func TestOpenAPIRouteCoverage(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	res := e.do(t, "GET", "/openapi.json", nil, nil)
	if res.status != 200 || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi: %d %s", res.status, res.header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(res.body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	registered := map[string]server.Route{}
	for _, rt := range e.srv.Routes() {
		key := strings.ToLower(rt.Method) + " " + rt.Path
		registered[key] = rt
		op, ok := doc.Paths[rt.Path][strings.ToLower(rt.Method)]
		if !ok {
			t.Errorf("route %s is not documented in /openapi.json", rt.Pattern())
			continue
		}
		var o struct {
			OperationID string            `json:"operationId"`
			Security    *[]map[string]any `json:"security"`
			Responses   map[string]any    `json:"responses"`
		}
		if err := json.Unmarshal(op, &o); err != nil {
			t.Fatal(err)
		}
		if o.OperationID == "" || len(o.Responses) == 0 {
			t.Errorf("%s: operationId and responses are required", rt.Pattern())
		}
		if rt.Public != (o.Security != nil && len(*o.Security) == 0) {
			t.Errorf("%s: public=%v but the document's security says otherwise", rt.Pattern(), rt.Public)
		}
	}
	var documented []string
	for p, ops := range doc.Paths {
		if p == mcpPath {
			continue // not a Route: TestOpenAPIMCPMethods checks its methods
		}
		for m := range ops {
			if !httpMethods[m] {
				continue
			}
			documented = append(documented, m+" "+p)
			if _, ok := registered[m+" "+p]; !ok {
				t.Errorf("documented operation %s %s is not a registered route", strings.ToUpper(m), p)
			}
		}
	}
	sort.Strings(documented)
	if len(documented) != len(registered) {
		t.Errorf("%d documented operations, %d routes: %v", len(documented), len(registered), documented)
	}

	// Every $ref points at something that exists.
	var whole any
	if err := json.Unmarshal(res.body, &whole); err != nil {
		t.Fatal(err)
	}
	walkRefs(whole, func(ref string) {
		if !strings.HasPrefix(ref, "#/") {
			t.Errorf("non-local $ref %q", ref)
			return
		}
		var cur any = whole
		for _, part := range strings.Split(ref[2:], "/") {
			m, ok := cur.(map[string]any)
			if !ok {
				t.Errorf("dangling $ref %q", ref)
				return
			}
			if cur, ok = m[part]; !ok {
				t.Errorf("dangling $ref %q", ref)
				return
			}
		}
	})

	// Every problem kind is listed with its status.
	var cat struct {
		Types []struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		} `json:"x-problem-types"`
	}
	_ = json.Unmarshal(res.body, &cat)
	kinds := server.Kinds()
	if len(cat.Types) != len(kinds) {
		t.Fatalf("x-problem-types lists %d kinds, the server has %d", len(cat.Types), len(kinds))
	}
	for _, pt := range cat.Types {
		k := strings.TrimPrefix(pt.Type, problem.TypeBase)
		if kinds[k] != pt.Status {
			t.Errorf("problem %s: status %d in the document, %d in the server", k, pt.Status, kinds[k])
		}
	}
}

func walkRefs(v any, fn func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && k == "$ref" {
				fn(s)
				continue
			}
			walkRefs(val, fn)
		}
	case []any:
		for _, val := range x {
			walkRefs(val, fn)
		}
	}
}

// openAPISchemas validates response bodies against the document's own
// component schemas, so the document cannot drift from what is served.
type openAPISchemas struct {
	compiled map[string]*jsonschema.Schema
	c        *jsonschema.Compiler // for schemas elsewhere in the document (validateAt)
}

// openAPIBase is the URI the served document is compiled under.
const openAPIBase = "memento:///openapi.json"

func compileOpenAPI(t testing.TB, e *testEnv) *openAPISchemas {
	t.Helper()
	res := e.do(t, "GET", "/openapi.json", nil, nil)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(res.body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(openAPIBase, doc); err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	_ = json.Unmarshal(res.body, &parsed)
	out := &openAPISchemas{compiled: map[string]*jsonschema.Schema{}, c: c}
	for name := range parsed.Components.Schemas {
		s, err := c.Compile(openAPIBase + "#/components/schemas/" + name)
		if err != nil {
			t.Fatalf("compile schema %s: %v", name, err)
		}
		out.compiled[name] = s
	}
	return out
}

// validateAt fails t unless body validates against the schema at pointer
// (a JSON pointer into the document, such as an operation's answer).
func (o *openAPISchemas) validateAt(t testing.TB, pointer, what string, body []byte) {
	t.Helper()
	s, err := o.c.Compile(openAPIBase + "#" + pointer)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s is not JSON: %v", what, err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s does not match the operation's schema: %v\n%s", what, err, body)
	}
}

func (o *openAPISchemas) validate(t testing.TB, name string, body []byte) {
	t.Helper()
	s := o.compiled[name]
	if s == nil {
		t.Fatalf("no schema %s in the document", name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s body is not JSON: %v", name, err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%s body does not match its OpenAPI schema: %v\n%s", name, err, body)
	}
}

// TestProblemsMatchSchema: an error body matches the Problem schema.
func TestProblemsMatchSchema(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	schemas := compileOpenAPI(t, e)
	res := e.do(t, "GET", "/v1/runs/nope", nil, nil)
	expectProblem(t, res, http.StatusNotFound, "run-not-found")
	schemas.validate(t, "Problem", res.body)
	// The schemas really constrain: a wrong body fails.
	for name, bad := range map[string]string{"Problem": `{"type":"x","title":"t"}`, "Run": `{"run_id":1}`, "Lease": `{"owner":"o","epoch":"1","expires_at":"x"}`} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if schemas.compiled[name].Validate(v) == nil {
			t.Errorf("schema %s accepts %s", name, bad)
		}
	}
}
