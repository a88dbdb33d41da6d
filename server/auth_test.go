package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
)

const (
	keyA      = "key-tenant-a-0123456789"
	keyB      = "key-tenant-b-0123456789"
	keyReader = "key-tenant-a-reader-0123"
)

// TestAuth: /v1 needs a key; a key sees only its tenant's runs; a reader
// cannot write; operational endpoints stay open.
func TestAuth(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{
			keys:   keyA + "=tenant-a," + keyB + "=tenant-b:writer," + keyReader + "=tenant-a:reader",
			apiKey: keyA,
		})
		ctx := context.Background()
		ra, _, err := e.c.CreateRun(ctx, run.CreateRequest{RunID: "shared-id", WorkflowName: "w", State: []byte(`{"secret":"a"}`)})
		if err != nil {
			t.Fatalf("tenant A create: %v", err)
		}
		if ra.TenantID != "tenant-a" {
			t.Fatalf("tenant of the run: %q", ra.TenantID)
		}

		// No key, a malformed header, an unknown key: 401 with a challenge.
		for name, h := range map[string]map[string]string{
			"no key":      nil,
			"basic auth":  {"Authorization": "Basic dXNlcjpwYXNz"},
			"empty token": {"Authorization": "Bearer "},
			"unknown key": {"Authorization": "Bearer not-a-configured-key-000"},
		} {
			res := e.do(t, "GET", "/v1/runs/shared-id", nil, h)
			expectProblem(t, res, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s: no WWW-Authenticate challenge", name)
			}
			if strings.Contains(string(res.body), "secret") {
				t.Fatalf("%s: body leaks the run", name)
			}
		}
		// Two keys in one request: neither acts (the first one did).
		req, _ := http.NewRequest("GET", e.http.URL+"/v1/runs/shared-id", nil)
		req.Header.Add("Authorization", "Bearer "+keyB)
		req.Header.Add("Authorization", "Bearer "+keyA)
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("two Authorization headers: %d, want 401", resp.StatusCode)
		}

		// Tenant B cannot see, list, lease, commit to or fork tenant A's run.
		cb, _ := client.New(e.http.URL, client.WithAPIKey(keyB))
		if _, err := cb.GetRun(ctx, "shared-id"); !errors.Is(err, run.ErrNotFound) || client.StatusOf(err) != 404 {
			t.Fatalf("tenant B reads A's run: %v", err)
		}
		if _, err := cb.AcquireLease(ctx, "shared-id", "intruder", time.Minute); client.StatusOf(err) != 404 {
			t.Fatalf("tenant B leases A's run: %v", err)
		}
		if _, err := cb.Fork(ctx, "shared-id", run.ForkRequest{FromRevision: 1}); client.StatusOf(err) != 404 {
			t.Fatalf("tenant B forks A's run: %v", err)
		}
		if page, err := cb.ListRuns(ctx, client.ListRunsOptions{}); err != nil || len(page.Items) != 0 {
			t.Fatalf("tenant B lists: %+v %v", page, err)
		}
		// The same run id in tenant B is a different run.
		rb, _, err := cb.CreateRun(ctx, run.CreateRequest{RunID: "shared-id", WorkflowName: "w", State: []byte(`{"secret":"b"}`)})
		if err != nil || rb.TenantID != "tenant-b" {
			t.Fatalf("tenant B creates the same id: %+v %v", rb, err)
		}
		if got, err := e.c.GetRun(ctx, "shared-id"); err != nil || !jsonEqual(got.State, []byte(`{"secret":"a"}`)) {
			t.Fatalf("tenant A's run after B's create: %+v %v", got, err)
		}

		// A reader reads but cannot write.
		cr, _ := client.New(e.http.URL, client.WithAPIKey(keyReader))
		if _, err := cr.GetRun(ctx, "shared-id"); err != nil {
			t.Fatalf("reader get: %v", err)
		}
		if _, _, err := cr.CreateRun(ctx, run.CreateRequest{WorkflowName: "w"}); client.KindOf(err) != problem.Forbidden || client.StatusOf(err) != 403 {
			t.Fatalf("reader create: %v", err)
		}

		// Operational endpoints are open.
		for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
			if res := e.do(t, "GET", p, nil, nil); res.status != 200 {
				t.Fatalf("%s without a key: %d %s", p, res.status, res.body)
			}
		}
		// Keys never reach the log.
		if logs := e.logs.String(); strings.Contains(logs, keyA) || strings.Contains(logs, keyB) {
			t.Fatal("an API key appears in the server log")
		}
		if !strings.Contains(e.logs.String(), `"tenant":"tenant-b"`) {
			t.Fatalf("request log lines carry no tenant:\n%s", e.logs.String())
		}
	})
}

func TestParseAPIKeys(t *testing.T) {
	ks := server.NewKeySet()
	if err := server.ParseAPIKeys(ks, "abcdefghijklmnop==tenant-x:admin, qrstuvwxyz0123456=tenant-y,"); err != nil {
		t.Fatal(err)
	}
	if p, ok := ks.Lookup("abcdefghijklmnop="); !ok || p.Tenant != "tenant-x" || p.Role != server.RoleAdmin {
		t.Fatalf("key with '=' padding: %+v %v", p, ok)
	}
	if p, ok := ks.Lookup("qrstuvwxyz0123456"); !ok || p.Tenant != "tenant-y" || p.Role != server.RoleWriter {
		t.Fatalf("default role: %+v %v", p, ok)
	}
	if _, ok := ks.Lookup("qrstuvwxyz012345"); ok {
		t.Fatal("a prefix of a key matched")
	}
	for _, bad := range []string{"short=t", "abcdefghijklmnopq", "abcdefghijklmnopq=", "abcdefghijklmnopq=t:root", "abcdefghijklmnopq=t,abcdefghijklmnopq=u", "abcdefghijklmnopq=a/b",
		// A user name with ':', an empty user, and a user-bound reader (it
		// could do nothing: such a key serves /mcp only, which needs writer).
		"abcdefghijklmnopq=t:writer:ann:admin", "abcdefghijklmnopq=t:writer:", "abcdefghijklmnopq=t:reader:ann"} {
		if err := server.ParseAPIKeys(server.NewKeySet(), bad); err == nil {
			t.Errorf("ParseAPIKeys(%q) accepted", bad)
		}
	}
}

// TestLoopbackRefusal: without keys the server refuses any address that is
// not loopback, before serving anything; with keys it may listen anywhere.
func TestLoopbackRefusal(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:7700": true, "localhost:7700": true, "[::1]:7700": true, "127.0.0.2:0": true,
		"0.0.0.0:7700": false, ":7700": false, "[::]:7700": false, "10.1.2.3:7700": false, "example.com:80": false,
		"no-port": false,
	} {
		err := server.CheckListenAddr(addr, false)
		if (err == nil) != ok {
			t.Errorf("CheckListenAddr(%q, no keys) = %v", addr, err)
		}
		if ok && server.CheckListenAddr(addr, true) != nil {
			t.Errorf("CheckListenAddr(%q, keys) refused", addr)
		}
	}
	if err := server.CheckListenAddr("0.0.0.0:7700", true); err != nil {
		t.Errorf("with keys, 0.0.0.0 refused: %v", err)
	}

	eng := openEngine(t, "sqlite", memento.Config{})
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Ready: eng.Ready,
		Backend: string(eng.Backend()), MaxStateBytes: eng.Config().MaxStateBytes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.ListenAndServe(ctx, "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("ListenAndServe on 0.0.0.0 without keys: %v", err)
	}
	// Serve re-checks the listener it is given.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ctx, ln); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Serve on a wildcard listener without keys: %v", err)
	}
}

// TestKeylessServerRefusesForeignHost: without keys, a request addressed to
// another name (a web page that rebound its DNS name to 127.0.0.1) or sent
// from another site's page is refused, and changes nothing; with keys the
// Host is the reverse proxy's business.
func TestKeylessServerRefusesForeignHost(t *testing.T) {
	e := newEnv(t, "sqlite", envOptions{})
	send := func(method, path, host, origin, body string) rawResponse {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, e.http.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return rawResponse{status: resp.StatusCode, header: resp.Header, body: raw}
	}
	create := `{"run_id":"rebound","workflow_name":"w","workflow_version":"1","state":{}}`
	for _, c := range []struct{ host, origin string }{
		{"attacker.example", ""},
		{"attacker.example:7700", ""},
		{"127.0.0.1.attacker.example", ""},
		{"", "http://attacker.example"},
		{"", "null"},
		{"localhost:7700", "http://attacker.example:7700"},
	} {
		for _, r := range []rawResponse{send("GET", "/v1/runs", c.host, c.origin, ""), send("POST", "/v1/runs", c.host, c.origin, create)} {
			p := expectProblem(t, r, http.StatusForbidden, problem.Forbidden)
			if !strings.Contains(p.Detail, "loopback") {
				t.Fatalf("host %q origin %q: detail %q does not say why", c.host, c.origin, p.Detail)
			}
		}
	}
	if _, err := e.c.GetRun(t.Context(), "rebound"); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("a refused create made the run: %v", err)
	}
	for _, c := range []struct{ host, origin string }{
		{"", ""}, {"localhost", ""}, {"localhost:1234", "http://localhost:1234"}, {"[::1]:7700", ""},
		{"app.localhost", "http://127.0.0.1:3000"}, {"127.0.0.2", "https://[::1]"},
	} {
		if r := send("GET", "/v1/runs", c.host, c.origin, ""); r.status != http.StatusOK {
			t.Fatalf("host %q origin %q: status %d, want 200: %s", c.host, c.origin, r.status, r.body)
		}
	}
	// With keys the server may sit behind a proxy that passes its public Host.
	k := newEnv(t, "sqlite", envOptions{keys: keyA + "=acme", apiKey: keyA})
	req, _ := http.NewRequest("GET", k.http.URL+"/v1/runs", nil)
	req.Host = "memento.example.com"
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := k.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("keyed server, public Host: status %d, want 200", resp.StatusCode)
	}
}
