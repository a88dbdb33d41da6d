package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mementohq/memento/problem"
)

// TestInspector: /ui/ serves the page and its script under a strict content
// security policy, anything else under it is a 404 problem, and every API
// path the script reads is a documented GET of this server.
func TestInspector(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{keys: keyA + "=acme", apiKey: keyA})
	page := e.do(t, "GET", "/ui/", nil, nil) // no key: the page holds no data
	if page.status != http.StatusOK || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "default-src 'self'") || !strings.Contains(string(page.body), `<script src="app.js">`) {
		t.Fatalf("GET /ui/: %d %v\n%s", page.status, page.header, page.body)
	}
	js := e.do(t, "GET", "/ui/app.js", nil, nil)
	if js.status != http.StatusOK || !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("GET /ui/app.js: %d %v", js.status, js.header)
	}
	if strings.Contains(string(js.body), "innerHTML") {
		t.Fatal("the inspector must render stored data as text, never as markup")
	}
	for _, p := range []string{"/ui/nope.js", "/ui/../openapi.json", "/ui/ui/index.html"} {
		expectProblem(t, e.do(t, "GET", p, nil, nil), http.StatusNotFound, problem.NotFound)
	}

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(e.do(t, "GET", "/openapi.json", nil, nil).body, &doc); err != nil {
		t.Fatal(err)
	}
	calls := regexp.MustCompile(`api\(([^\n]*?)\)[,;]`).FindAllStringSubmatch(string(js.body), -1)
	if len(calls) < 8 {
		t.Fatalf("found %d API calls in app.js", len(calls))
	}
	param := regexp.MustCompile(`" \+ q\(\w+\)( \+ "|$)`)
	for _, c := range calls {
		p := param.ReplaceAllString(c[1], "{}")
		p = strings.TrimSuffix(strings.Trim(strings.TrimSuffix(p, ` + params`), `"`), "?")
		p, _, _ = strings.Cut(p, "?")
		found := false
		for tmpl, ops := range doc.Paths {
			if _, get := ops["get"]; get && matchesTemplate(tmpl, p) {
				found = true
			}
		}
		if !found {
			t.Errorf("app.js reads %s (%s): no documented GET matches", p, c[1])
		}
	}
}

// matchesTemplate tells whether path (with {} for each parameter) is an
// instance of the OpenAPI path template tmpl.
func matchesTemplate(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if (ps[i] == "{}") != strings.HasPrefix(ts[i], "{") || (ps[i] != "{}" && ps[i] != ts[i]) {
			return false
		}
	}
	return true
}
