package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
)

// execute runs the CLI with args and returns what it printed.
func execute(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// testServer serves a real engine on embedded SQLite and returns its URL.
func testServer(t *testing.T, keys string) string {
	t.Helper()
	ctx := context.Background()
	eng, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	ks := server.NewKeySet()
	if err := server.ParseAPIKeys(ks, keys); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory, Retrieval: eng.Retrieval, Context: eng.Context, Ready: eng.Ready,
		Backend: string(eng.Backend()), MaxStateBytes: eng.Config().MaxStateBytes,
		Keys: ks, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestRunsCommands(t *testing.T) {
	const key = "cli-test-key-0123456789"
	url := testServer(t, key+"=acme")
	ctx := context.Background()
	c, err := client.New(url, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		if _, _, err := c.CreateRun(ctx, run.CreateRequest{RunID: id, WorkflowName: "refund", NextStep: "check", State: json.RawMessage(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.AcquireLease(ctx, "r-1", "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req := run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "checked", StepID: "check", Payload: json.RawMessage(`{"ok":true}`)}, State: json.RawMessage(`{"n":2}`), NextStep: "pay"}
	if _, err := c.Commit(ctx, "r-1", req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCheckpoint(ctx, "r-1", "before-pay", 0); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--server", url, "--api-key", key}

	// list: a table with a header and one line per run; pages with a cursor.
	out, _, err := execute(t, ctx, append([]string{"runs", "list"}, conn...)...)
	if err != nil {
		t.Fatalf("runs list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^RUN ID\s+WORKFLOW\s+STATUS\s+NEXT STEP\s+REV\s+UPDATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^r-1\s+refund\s+running\s+pay\s+2\s`).MatchString(lines[1]) {
		t.Fatalf("runs list output:\n%s", out)
	}
	out, errOut, err := execute(t, ctx, append([]string{"runs", "list", "--limit", "2", "--json"}, conn...)...)
	if err != nil {
		t.Fatal(err)
	}
	var page client.Page[run.Run]
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("runs list --json: %v\n%s", err, out)
	}
	if errOut != "" {
		t.Fatalf("--json wrote to stderr: %q", errOut)
	}
	out, _, err = execute(t, ctx, append([]string{"runs", "list", "--cursor", page.NextCursor, "--json"}, conn...)...)
	if err != nil || !strings.Contains(out, `"r-3"`) || strings.Contains(out, `"r-1"`) {
		t.Fatalf("second page: %v\n%s", err, out)
	}
	if _, _, err := execute(t, ctx, append([]string{"runs", "list", "--limit", "-1"}, conn...)...); err == nil {
		t.Fatal("a negative --limit listed runs instead of failing, as the API refuses it")
	}
	out, _, err = execute(t, ctx, append([]string{"runs", "list", "--all", "--limit", "1", "--json"}, conn...)...)
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 3 {
		t.Fatalf("--all: %v\n%s", err, out)
	}

	// show: fields and the state.
	out, _, err = execute(t, ctx, append([]string{"runs", "show", "r-1"}, conn...)...)
	if err != nil || !regexp.MustCompile(`(?m)^state_revision\s+2$`).MatchString(out) || !strings.Contains(out, `"n": 2`) ||
		!regexp.MustCompile(`(?m)^lease\s+w epoch 1 until `).MatchString(out) || !regexp.MustCompile(`(?m)^tenant_id\s+acme$`).MatchString(out) {
		t.Fatalf("runs show: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"runs", "show", "r-1", "--json"}, conn...)...)
	var shown run.Run
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.StateRevision != 2 || shown.NextStep != "pay" {
		t.Fatalf("runs show --json: %v\n%s", err, out)
	}

	// events.
	out, _, err = execute(t, ctx, append([]string{"runs", "events", "r-1"}, conn...)...)
	if err != nil || !regexp.MustCompile(`(?m)^1\s+run\.created\s`).MatchString(out) || !regexp.MustCompile(`(?m)^2\s+checked\s+check\s+0\s+\S+\s+\{"ok":\s?true\}$`).MatchString(out) {
		t.Fatalf("runs events: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"runs", "events", "r-1", "--after", "1", "--json"}, conn...)...)
	var evs client.Page[run.Event]
	if err != nil || json.Unmarshal([]byte(out), &evs) != nil || len(evs.Items) != 1 || evs.Items[0].Seq != 2 {
		t.Fatalf("runs events --after 1 --json: %v\n%s", err, out)
	}

	// checkpoints and fork.
	out, _, err = execute(t, ctx, append([]string{"runs", "checkpoints", "r-1"}, conn...)...)
	if err != nil || !regexp.MustCompile(`(?m)^before-pay\s+2\s`).MatchString(out) {
		t.Fatalf("runs checkpoints: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"runs", "fork", "r-1", "--from-revision", "1", "--run-id", "r-1-fork", "--json"}, conn...)...)
	var forked run.Run
	if err != nil || json.Unmarshal([]byte(out), &forked) != nil || forked.RunID != "r-1-fork" || forked.ParentRunID != "r-1" || forked.StateRevision != 1 || !strings.Contains(string(forked.State), `"n": 1`) {
		t.Fatalf("runs fork: %v\n%s", err, out)
	}
	out, _, err = execute(t, ctx, append([]string{"runs", "fork", "r-1", "--checkpoint", "before-pay"}, conn...)...)
	if err != nil || !regexp.MustCompile(`(?m)^forked_from\s+r-1@2$`).MatchString(out) {
		t.Fatalf("runs fork --checkpoint: %v\n%s", err, out)
	}
	if _, _, err := execute(t, ctx, append([]string{"runs", "fork", "r-1"}, conn...)...); err == nil {
		t.Fatal("fork without --from-revision or --checkpoint accepted")
	}
	// With a key, running the command again (after a timeout) is the same fork.
	var keyed [2]run.Run
	for i := range keyed {
		out, _, err = execute(t, ctx, append([]string{"runs", "fork", "r-1", "--from-revision", "1", "--idempotency-key", "cli-fork-1", "--json"}, conn...)...)
		if err != nil || json.Unmarshal([]byte(out), &keyed[i]) != nil {
			t.Fatalf("runs fork --idempotency-key: %v\n%s", err, out)
		}
	}
	if keyed[0].RunID == "" || keyed[0].RunID != keyed[1].RunID {
		t.Fatalf("the same keyed fork twice made %s and %s", keyed[0].RunID, keyed[1].RunID)
	}

	// Errors carry the problem kind; the key comes from the environment too.
	_, _, err = execute(t, ctx, append([]string{"runs", "show", "nope"}, conn...)...)
	if err == nil || !strings.Contains(err.Error(), "run-not-found") || client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("show of a missing run: %v", err)
	}
	_, _, err = execute(t, ctx, "runs", "list", "--server", url)
	if client.KindOf(err) != "unauthorized" {
		t.Fatalf("without a key: %v", err)
	}
	t.Setenv(envAPIKey, key)
	t.Setenv(envURL, url)
	if out, _, err = execute(t, ctx, "runs", "list"); err != nil || !strings.Contains(out, "r-2") {
		t.Fatalf("key and URL from the environment: %v\n%s", err, out)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := execute(t, context.Background(), "version")
	if err != nil || !strings.HasPrefix(out, "memento ") {
		t.Fatalf("version: %v %q", err, out)
	}
}

// serveLog is the part of a `memento serve` JSON log line the tests read.
type serveLog struct {
	Msg     string `json:"msg"`
	Addr    string `json:"addr"`
	Backend string `json:"backend"`
}

// startServe runs `memento serve` in-process on a free loopback port with
// JSON logs and extra args, until it listens. It returns the address, the
// log lines up to then, and stop, which ends serve's context the way a
// signal would and fails t unless serve returns nil within 30s.
func startServe(t *testing.T, args ...string) (addr string, logs []serveLog, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(pw)
	root.SetArgs(append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...))
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	// Read log lines until the server says where it listens; keep draining
	// afterwards so logging never blocks on the pipe.
	type listening struct {
		addr string
		logs []serveLog
	}
	ready := make(chan listening, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		var seen []serveLog
		sent := false
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line serveLog
			if sent || json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			seen = append(seen, line)
			if line.Msg == "listening" {
				ready <- listening{line.Addr, seen}
				sent = true
			}
		}
	}()
	select {
	case l := <-ready:
		addr, logs = l.addr, l.logs
	case err := <-done:
		t.Fatalf("serve exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening within 30s")
	}
	stop = func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("serve after shutdown: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop within 30s of its context ending")
		}
		<-drained
	}
	return addr, logs, stop
}

// TestServe starts `memento serve` on a free loopback port, talks to it, and
// stops it the way a signal would (its context ends): it drains and returns.
func TestServe(t *testing.T) {
	addr, _, stop := startServe(t, "--data", t.TempDir())
	ctx := t.Context()
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	if _, _, err := c.CreateRun(ctx, run.CreateRequest{WorkflowName: "w"}); err != nil {
		t.Fatalf("create through serve: %v", err)
	}
	stop()
	if err := c.Health(context.Background()); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

// TestServeRefusesPublicAddressWithoutKeys: a clear error before anything opens.
func TestServeRefusesPublicAddressWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	_, _, err := execute(t, context.Background(), "serve", "--listen", "0.0.0.0:7799", "--data", dir)
	if err == nil || !strings.Contains(err.Error(), "loopback") || !strings.Contains(err.Error(), "MEMENTO_API_KEYS") {
		t.Fatalf("serve on 0.0.0.0 without keys: %v", err)
	}
	t.Setenv(envListen, "[::]:7799")
	if _, _, err := execute(t, context.Background(), "serve", "--data", dir); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("serve with MEMENTO_LISTEN=[::]:7799 without keys: %v", err)
	}
	if _, _, err := execute(t, context.Background(), "serve", "--data", dir, "--api-keys", "short=t"); err == nil || !strings.Contains(err.Error(), "api key") {
		t.Fatalf("serve with a bad key: %v", err)
	}
}

func TestUnknownSubcommandFails(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{{"runs", "get"}, {"sessions", "nope"}, {"bench", "nothing"}, {"models", "nope"}, {"nosuch"}} {
		_, _, err := execute(t, ctx, args...)
		if err == nil || !strings.Contains(err.Error(), "unknown command") {
			t.Errorf("memento %s: err = %v, want an unknown-command error", strings.Join(args, " "), err)
		}
	}
	// A group alone still prints its help and succeeds.
	out, _, err := execute(t, ctx, "runs")
	if err != nil || !strings.Contains(out, "Available Commands") {
		t.Errorf("memento runs: err = %v, out = %q", err, out)
	}
}

// A negative count, seq or size is refused before anything is sent (it
// was taken as the default: --after -1 listed from the start).
func TestNegativeCountsRefused(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"runs", "events", "r1", "--after", "-1", "--server", "http://127.0.0.1:1"},
		{"sessions", "show", "s1", "--user", "u", "--messages", "-1", "--server", "http://127.0.0.1:1"},
		{"runs", "list", "--limit", "-5", "--server", "http://127.0.0.1:1"},
		{"memory", "search", "--subject", "z1", "--half-life", "-1h", "x", "--server", "http://127.0.0.1:1"},
	} {
		_, _, err := execute(t, ctx, args...)
		if err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("memento %s: %v, want a negative-value error", strings.Join(args, " "), err)
		}
	}
}

// TestServeLimitFlags: --request-timeout and --max-in-flight are checked
// before anything is opened.
func TestServeLimitFlags(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"serve", "--data", t.TempDir(), "--request-timeout", "soon"},
		{"serve", "--data", t.TempDir(), "--request-timeout", "-1s"},
		{"serve", "--data", t.TempDir(), "--max-in-flight", "0"},
		{"serve", "--data", t.TempDir(), "--max-in-flight", "many"},
		{"serve", "--data", t.TempDir(), "--retrieval-ttl", "forever"},
		{"serve", "--data", t.TempDir(), "--snapshot-retention", "-1h"},
	} {
		_, _, err := execute(t, ctx, args...)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[3], "--")[:3]) {
			t.Errorf("%v: %v, want an error about %s", args, err, args[3])
		}
	}
}
