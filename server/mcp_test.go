package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/server"
)

// mcpServer serves eng's API with the MCP endpoint and the given keys.
func mcpServer(t *testing.T, eng *memento.Engine, keys string) *httptest.Server {
	t.Helper()
	return mcpServerWith(t, eng, keys, false)
}

// mcpServerWith is mcpServer, with /mcp stateless or not.
func mcpServerWith(t *testing.T, eng *memento.Engine, keys string, stateless bool) *httptest.Server {
	t.Helper()
	ks := server.NewKeySet()
	if err := server.ParseAPIKeys(ks, keys); err != nil {
		t.Fatal(err)
	}
	m := mcp.New(mcp.Services{Runs: eng.Runs, Sessions: eng.Sessions, Memory: eng.Memory, Context: eng.Context, Retrieval: eng.Retrieval},
		mcp.Options{Classify: server.ClassifyError})
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory,
		Context: eng.Context, Retrieval: eng.Retrieval, Keys: ks, MCP: m, MCPStateless: stateless, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

// headerRT sets headers on every request; swapping them mid-session is how
// a test presents other credentials on an established MCP session.
type headerRT struct {
	h atomic.Pointer[http.Header]
}

func (rt *headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range *rt.h.Load() {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func mcpConnect(t *testing.T, url string, h http.Header) (*gomcp.ClientSession, *headerRT, error) {
	t.Helper()
	rt := &headerRT{}
	rt.h.Store(&h)
	tr := &gomcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1, DisableStandaloneSSE: true}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, rt, err
}

// mcpCall calls a tool and returns its JSON text and whether it is a tool error.
func mcpCall(t *testing.T, cs *gomcp.ClientSession, name string, args any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*gomcp.TextContent).Text), &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out, res.IsError
}

func bearer(key string, user ...string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + key}}
	if len(user) > 0 {
		h.Set(server.HeaderUser, user[0])
	}
	return h
}

// TestMCPBindingFromCredentials: over streamable HTTP, tenant and user come
// from the key (or the header a tenant-wide key's holder sets), for every
// call: credentials swapped on a live session act as the new ones.
func TestMCPBindingFromCredentials(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	const (
		appKey   = "app-key-0123456789abcdef"
		bobKey   = "bob-key-0123456789abcdef"
		readKey  = "read-key-0123456789abcdef"
		otherKey = "other-tenant-key-0123456789"
	)
	hs := mcpServer(t, eng, appKey+"=acme,"+bobKey+"=acme:writer:bob,"+readKey+"=acme:reader,"+otherKey+"=globex")

	for name, h := range map[string]http.Header{"no key": {}, "wrong key": bearer("nope-nope-nope-nope-nope"), "reader key": bearer(readKey),
		"bob's key naming alice": bearer(bobKey, "alice")} {
		if _, _, err := mcpConnect(t, hs.URL, h); err == nil {
			t.Errorf("%s: connected, want refusal", name)
		}
	}
	alice, rt, err := mcpConnect(t, hs.URL, bearer(appKey, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, alice, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{"who": "alice"}}); isErr || out["user_id"] != "alice" {
		t.Fatalf("alice put: %v", out)
	}
	bob, _, err := mcpConnect(t, hs.URL, bearer(bobKey))
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, bob, "session_get", map[string]any{"session_id": "s1"}); !isErr {
		t.Fatalf("bob read alice's session: %v", out)
	}
	globex, _, err := mcpConnect(t, hs.URL, bearer(otherKey, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, globex, "session_get", map[string]any{"session_id": "s1"}); !isErr {
		t.Fatalf("another tenant's alice read acme's alice: %v", out)
	}
	unbound, _, err := mcpConnect(t, hs.URL, bearer(appKey))
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, unbound, "session_get", map[string]any{"session_id": "s1"}); !isErr {
		t.Fatalf("a tenant key naming no user read a session: %v", out)
	}
	// Bob's credentials on alice's established session act as bob.
	h := bearer(bobKey)
	rt.h.Store(&h)
	if out, isErr := mcpCall(t, alice, "session_get", map[string]any{"session_id": "s1"}); !isErr {
		t.Fatalf("bob's key on alice's MCP session read her session: %v", out)
	}
	// A user-bound key serves /mcp only.
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/sessions/s1?user_id=alice", nil)
	req.Header.Set("Authorization", "Bearer "+bobKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a user-bound key on /v1: status %d, want 403", resp.StatusCode)
	}
}

// TestMCPWithoutKeys: a loopback server without keys is one tenant; the
// user is the header's, or the default user.
func TestMCPWithoutKeys(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	hs := mcpServer(t, eng, "")
	def, _, err := mcpConnect(t, hs.URL, http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, def, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{}}); isErr || out["user_id"] != server.DefaultUser {
		t.Fatalf("put: %v", out)
	}
	carol, _, err := mcpConnect(t, hs.URL, http.Header{server.HeaderUser: {"carol"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := mcpCall(t, carol, "session_get", map[string]any{"session_id": "s1"}); !isErr {
		t.Fatalf("carol read the default user's session: %v", out)
	}
	res, err := carol.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) < 10 {
		t.Fatalf("list tools over HTTP: %v, %v", res, err)
	}
}

// TestMCPHostCheck: without keys a loopback server refuses a request whose
// Host is not local (a web page's DNS-rebinding trick); with keys the
// bearer key is the guard, and a reverse proxy's public Host passes.
func TestMCPHostCheck(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	const key = "app-key-0123456789abcdef"
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		keys   string
		auth   string
		status int
	}{{"", "", http.StatusForbidden}, {key + "=acme:writer:alice", "Bearer " + key, http.StatusOK}} {
		hs := mcpServer(t, eng, c.keys)
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(body))
		req.Host = "memento.example.com"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("keys %q, foreign Host: status %d, want %d", c.keys, resp.StatusCode, c.status)
		}
	}
}

// TestMCPRefusesUnfaithfulText: over streamable HTTP a message with invalid
// UTF-8, a lone surrogate or nesting past the bound is refused before any
// tool runs (the SDK would store U+FFFD in its place), and known
// credentials without the right are 403, unknown ones 401.
func TestMCPRefusesUnfaithfulText(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	const (
		appKey  = "app-key-0123456789abcdef"
		readKey = "read-key-0123456789abcdef"
	)
	hs := mcpServer(t, eng, appKey+"=acme,"+readKey+"=acme:reader")
	post := func(auth, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set(server.HeaderUser, "ann")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if st, m := post(readKey, initialize); st != http.StatusForbidden || m["type"] != problem.Type(problem.Forbidden) || m["detail"] == "" {
		t.Fatalf("reader key: status %d %v, want a 403 problem", st, m)
	}
	if st, m := post("nope-nope-nope-nope-nope", initialize); st != http.StatusUnauthorized || m["type"] != problem.Type(problem.Unauthorized) {
		t.Fatalf("unknown key: status %d %v, want a 401 problem", st, m)
	}
	deep := strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100)
	for _, args := range []string{"{\"session_id\":\"bad\xff\",\"state\":{}}", `{"session_id":"s2","state":{"k":"\ud800"}}`, `{"session_id":"s3","state":{"d":` + deep + `}}`} {
		st, m := post(appKey, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"session_put","arguments":`+args+`}}`)
		e, _ := m["error"].(map[string]any)
		if st != http.StatusBadRequest || e == nil || m["id"] != float64(7) || e["message"] == "" {
			t.Fatalf("%q: status %d body %v, want 400 with a JSON-RPC error for id 7", args, st, m)
		}
	}
	for _, id := range []string{"bad\ufffd", "s2", "s3"} {
		if _, err := eng.Sessions.Get(context.Background(), "acme", id, "ann"); err == nil {
			t.Fatalf("a refused call made session %q", id)
		}
	}
}

// TestMCPSessionEndedOnlyByItsOpener: another tenant's (or user's) key that
// knows an MCP session's id cannot end it; its opener can.
func TestMCPSessionEndedOnlyByItsOpener(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	const (
		appKey   = "app-key-0123456789abcdef"
		otherKey = "other-tenant-key-0123456789"
	)
	hs := mcpServer(t, eng, appKey+"=acme,"+otherKey+"=globex")
	alice, _, err := mcpConnect(t, hs.URL, bearer(appKey, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	end := func(h http.Header) int {
		req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/mcp", nil)
		req.Header = h.Clone()
		req.Header.Set("Mcp-Session-Id", alice.ID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, h := range []http.Header{bearer(otherKey, "alice"), bearer(appKey, "mallory")} {
		if st := end(h); st != http.StatusForbidden {
			t.Fatalf("ending alice's session with %v: status %d, want 403", h, st)
		}
	}
	if out, isErr := mcpCall(t, alice, "session_put", map[string]any{"session_id": "s1", "state": map[string]any{}}); isErr {
		t.Fatalf("alice's session was ended: %v", out)
	}
	if st := end(bearer(appKey, "alice")); st >= 300 {
		t.Fatalf("alice ending her own session: status %d", st)
	}
}

// TestMCPErrorsAreProblems: what /mcp refuses before a JSON-RPC exchange
// (credentials, a malformed user header, the transport's own refusals:
// no or an unknown session, a wrong Content-Type) is problem+json with a
// stable type and the request id, as every other route answers.
func TestMCPErrorsAreProblems(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	const key, reader = "app-key-0123456789abcdef", "read-key-0123456789abcdef"
	hs := mcpServer(t, eng, key+"=acme:writer,"+reader+"=acme:reader")
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, c := range []struct {
		name, method, auth, user, session, ctype, body string
		status                                         int
		kind                                           string
	}{
		{"no key", "POST", "", "", "", "application/json", list, 401, "unauthorized"},
		{"reader key", "POST", reader, "ann", "", "application/json", list, 403, "forbidden"},
		{"malformed user", "POST", key, "a b", "", "application/json", list, 400, "invalid-request"},
		{"GET without a session", "GET", key, "ann", "", "", "", 400, "invalid-request"},
		{"unknown session", "POST", key, "ann", "nosuch-session", "application/json", list, 404, "not-found"},
		{"text body", "POST", key, "ann", "", "text/plain", list, 415, "unsupported-media-type"},
	} {
		req, _ := http.NewRequest(c.method, hs.URL+"/mcp", strings.NewReader(c.body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		for h, v := range map[string]string{"Content-Type": c.ctype, "X-Memento-User": c.user, "Mcp-Session-Id": c.session} {
			if v != "" {
				req.Header.Set(h, v)
			}
		}
		if c.auth != "" {
			req.Header.Set("Authorization", "Bearer "+c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Type, Title, Detail, Instance string
			Status                        int
			RequestID                     string `json:"request_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.HasSuffix(p.Type, "/"+c.kind) || p.Status != c.status || p.RequestID == "" || p.Instance != "/mcp" ||
			strings.HasPrefix(strings.ToLower(p.Detail), strings.ToLower(p.Title)+":") {
			t.Errorf("%s: %d %s %+v %v", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), p, err)
		}
	}
}

// roundRobinRT sends each request to the next of several servers, as a
// load balancer without session affinity does.
type roundRobinRT struct {
	hosts []string
	n     atomic.Int64
}

func (rt *roundRobinRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = rt.hosts[int(rt.n.Add(1)-1)%len(rt.hosts)]
	r.Host = r.URL.Host
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPStatelessAcrossInstances: with MCPStateless, an agent's requests
// spread over two instances (no affinity) all succeed; with sessions, the
// instance that did not open the session answers 404.
func TestMCPStatelessAcrossInstances(t *testing.T) {
	eng := openEngine(t, "sqlite", memento.Config{})
	serve := func(stateless bool) string {
		return strings.TrimPrefix(mcpServerWith(t, eng, "", stateless).URL, "http://")
	}
	connect := func(stateless bool) (*gomcp.ClientSession, error) {
		rt := &roundRobinRT{hosts: []string{serve(stateless), serve(stateless)}}
		tr := &gomcp.StreamableClientTransport{Endpoint: "http://" + rt.hosts[0] + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1, DisableStandaloneSSE: true}
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err == nil {
			t.Cleanup(func() { _ = cs.Close() })
		}
		return cs, err
	}
	cs, err := connect(true)
	if err != nil {
		t.Fatalf("connect through two stateless instances: %v", err)
	}
	for i := range 6 {
		args := map[string]any{"session_id": fmt.Sprintf("lb-%d", i), "state": map[string]any{"step": i}}
		if out, isErr := mcpCall(t, cs, "session_put", args); isErr {
			t.Fatalf("call %d through the balancer: %v", i, out)
		}
	}
	// With sessions, the second request reaches the instance that does not
	// know the session.
	if cs, err := connect(false); err == nil {
		if _, err := cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: "session_put", Arguments: map[string]any{"session_id": "lb-x", "state": map[string]any{}}}); err == nil {
			t.Fatal("a session-bound MCP endpoint served another instance's session")
		}
	}
}
