package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envMCPClients names the install of scripts/mcp-conformance (the directory
// its install.sh prints): Node 22, the MCP conformance suite and the MCP
// Inspector at pinned versions. scripts/test.sh installs them and sets it.
const envMCPClients = "MEMENTO_TEST_MCP_CLIENTS"

// expectedFailuresFile is the conformance runner's baseline, from this package.
const expectedFailuresFile = "../../scripts/mcp-conformance/expected-failures.yml"

// mcpToolNames are tools every Memento MCP server lists (mcp/ registers them).
var mcpToolNames = []string{
	"session_get", "session_put", "session_patch", "session_delete", "message_append", "messages_list",
	"memory_search", "memory_get", "memory_add", "memory_forget",
	"context_build", "run_start", "run_get", "run_checkpoint", "run_restore", "documents_retrieve",
}

// TestMCPClients runs MCP clients nobody here wrote against the real binary:
// the MCP conformance suite against `memento serve`'s /mcp, and the MCP
// Inspector's CLI over streamable HTTP (/mcp) and over stdio (`memento mcp`).
func TestMCPClients(t *testing.T) {
	dir := os.Getenv(envMCPClients)
	if dir == "" {
		// scripts/test.sh installs them and sets the variable; run alone, the
		// test installs them the same way (cached per lock), or fails saying why.
		out, err := exec.Command("../../scripts/mcp-conformance/install.sh").Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s is not set and scripts/mcp-conformance/install.sh failed (it needs npm and the npm registry for Node 22, the MCP conformance suite and the MCP Inspector): %v\n%s", envMCPClients, err, stderr)
		}
		dir = strings.TrimSpace(string(out))
	}
	nodes := mcpClients{dir: dir, home: t.TempDir()}
	for _, p := range []string{nodes.node(), nodes.conformance(), nodes.inspector()} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s is not an install of scripts/mcp-conformance: %v", envMCPClients, dir, err)
		}
	}
	bin := buildMemento(t)
	srv := startServeProcess(t, bin, "--data", t.TempDir())
	url := "http://" + srv.addr + "/mcp"

	t.Run("conformance", func(t *testing.T) { testConformance(t, nodes, url) })
	t.Run("inspector-http", func(t *testing.T) {
		user := "inspector-http-user"
		overHTTP := func(args ...string) []string {
			return append([]string{url, "--transport", "http", "--header", "X-Memento-User: " + user}, args...)
		}
		testInspector(t, nodes, overHTTP, user)
		// The same session id through another user's connection: not found,
		// whatever the arguments say.
		res, code := nodes.inspect(t, url, "--transport", "http", "--header", "X-Memento-User: someone-else",
			"--method", "tools/call", "--tool-name", "session_get", "--tool-args-json", `{"session_id":"inspector-session"}`)
		if code == 0 || !res.Result.IsError || len(res.Result.Content) == 0 || !strings.Contains(res.Result.Content[0].Text, "session-not-found") {
			t.Errorf("session_get of %s's session as someone-else: exit %d, %+v; want a session-not-found tool error", user, code, res)
		}
	})
	t.Run("inspector-stdio", func(t *testing.T) {
		// Each Inspector run starts its own `memento mcp` on the same data
		// directory: what one process wrote, the next one reads.
		data := t.TempDir()
		user := "inspector-stdio-user"
		stdio := func(args ...string) []string {
			return append(args, "--", bin, "mcp", "--data", data, "--user", user, "--log-level", "warn")
		}
		testInspector(t, nodes, stdio, user)
	})

	srv.stop(t)
}

// testConformance runs every server scenario of the conformance suite and
// checks each against expected-failures.yml: a failure must be listed there
// with its reason, and a listed scenario must fail. The runner checks the
// same with the same file (its exit code); the test prints each scenario's
// result, and a failure's checks.
func testConformance(t *testing.T, nodes mcpClients, url string) {
	expected := readExpectedFailures(t, expectedFailuresFile)
	baseline, err := filepath.Abs(expectedFailuresFile)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	started := time.Now()
	stdout, stderr, code := nodes.run(t, nodes.conformance(), "server", "--url", url, "--suite", "all",
		"--expected-failures", baseline, "-o", out)
	t.Logf("conformance suite: %s, runner exit %d", time.Since(started).Round(time.Millisecond), code)
	results := readConformanceResults(t, out)
	if len(results) == 0 {
		t.Fatalf("the runner saved no results\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	names := make([]string, 0, len(results))
	for name := range results {
		names = append(names, name)
	}
	slices.Sort(names)
	var passed, expectedFailed []string
	for _, name := range names {
		checks := results[name]
		reason, isExpected := expected[name]
		t.Run(name, func(t *testing.T) {
			var failed []conformanceCheck
			succeeded := 0
			for _, c := range checks {
				switch c.Status {
				case "FAILURE", "WARNING": // the runner counts a warning as a failure too
					failed = append(failed, c)
				case "SUCCESS":
					succeeded++
				}
			}
			switch {
			case len(failed) > 0 && isExpected:
				expectedFailed = append(expectedFailed, name)
				t.Logf("expected failure: %s (%s: %s)", reason, failed[0].ID, failed[0].ErrorMessage)
			case len(failed) > 0:
				for _, c := range failed {
					t.Errorf("%s %s: %s %s", c.Status, c.ID, c.Description, c.ErrorMessage)
				}
				t.Errorf("unexpected failure: fix Memento's MCP server, or, only if the scenario needs the spec's fixture tools, list it in %s with its reason", expectedFailuresFile)
			case isExpected:
				t.Errorf("passes (%d checks) but %s lists it as an expected failure (%s): remove the entry", succeeded, expectedFailuresFile, reason)
			case succeeded == 0:
				t.Errorf("no check of the scenario passed or failed: it tested nothing")
			default:
				passed = append(passed, name)
				t.Logf("pass: %d checks", succeeded)
			}
		})
	}
	for name := range expected {
		if _, ran := results[name]; !ran {
			t.Errorf("%s lists %s, which did not run: is it still a scenario of the suite?", expectedFailuresFile, name)
		}
	}
	t.Logf("%d scenarios: %d passed, %d expected failures", len(results), len(passed), len(expectedFailed))
	if code != 0 {
		t.Errorf("the conformance runner exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	} else if i := strings.Index(stdout, "=== SUMMARY ==="); i >= 0 {
		t.Logf("the runner's summary:\n%s", stripANSI(stdout[i:]))
	}
}

// testInspector lists Memento's tools with the Inspector's CLI and calls
// some: session_put, then session_get in another Inspector run (another
// connection; over stdio, another process), and a call with a wrong type.
// target turns method arguments into a whole command line for one transport.
func testInspector(t *testing.T, nodes mcpClients, target func(...string) []string, user string) {
	res, code := nodes.inspect(t, target("--method", "tools/list")...)
	if code != 0 {
		t.Fatalf("tools/list: exit %d", code)
	}
	var listed []string
	for _, tool := range res.Result.Tools {
		listed = append(listed, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		if tool.InputSchema["type"] != "object" {
			t.Errorf("tool %s: input schema type %v, want object", tool.Name, tool.InputSchema["type"])
		}
	}
	t.Logf("%d tools: %s", len(listed), strings.Join(listed, " "))
	for _, name := range mcpToolNames {
		if !slices.Contains(listed, name) {
			t.Errorf("tools/list through the Inspector lacks %s; it has %v", name, listed)
		}
	}
	// The Inspector's own check that the schemas work across clients.
	if _, code := nodes.inspect(t, target("--method", "tools/list", "--strict")...); code != 0 {
		t.Errorf("tools/list --strict: exit %d (the schema problems are on its stderr above)", code)
	}

	call := func(tool, args string) (mcpSession, inspectorResult, int) {
		res, code := nodes.inspect(t, target("--method", "tools/call", "--tool-name", tool, "--tool-args-json", args)...)
		var s mcpSession
		if len(res.Result.StructuredContent) > 0 {
			if err := json.Unmarshal(res.Result.StructuredContent, &s); err != nil {
				t.Errorf("%s: structured content %s: %v", tool, res.Result.StructuredContent, err)
			}
		}
		return s, res, code
	}
	put, res, code := call("session_put", `{"session_id":"inspector-session","state":{"step":"profile","locale":"de-DE"}}`)
	if code != 0 || res.Result.IsError || put.SessionID != "inspector-session" || put.State["step"] != "profile" {
		t.Fatalf("session_put: exit %d, %+v", code, res)
	}
	got, res, code := call("session_get", `{"session_id":"inspector-session"}`)
	if code != 0 || res.Result.IsError {
		t.Fatalf("session_get: exit %d, %+v", code, res)
	}
	if got.SessionID != "inspector-session" || got.UserID != user || got.State["step"] != "profile" ||
		got.State["locale"] != "de-DE" || got.Revision != put.Revision {
		t.Errorf("session_get = %+v, want what session_put stored for %s: %+v", got, user, put)
	}
	// Text content carries the same JSON, for clients that read only text.
	if len(res.Result.Content) == 0 || !strings.Contains(res.Result.Content[0].Text, `"inspector-session"`) {
		t.Errorf("session_get text content = %+v, want the result's JSON", res.Result.Content)
	}
	// A wrong type: a tool error the model can read, and nothing written.
	_, res, code = call("session_put", `{"session_id":"inspector-session","state":"not an object"}`)
	if code == 0 || !res.Result.IsError || len(res.Result.Content) == 0 || !strings.Contains(res.Result.Content[0].Text, "state") {
		t.Errorf("session_put with a string state: exit %d, %+v; want a tool error that names the state", code, res)
	}
	if again, _, _ := call("session_get", `{"session_id":"inspector-session"}`); again.Revision != put.Revision || again.State["step"] != "profile" {
		t.Errorf("after the refused session_put: %+v, want it unchanged: %+v", again, put)
	}
}

// mcpSession is the part of a session tool's result the test reads.
type mcpSession struct {
	SessionID string         `json:"session_id"`
	UserID    string         `json:"user_id"`
	State     map[string]any `json:"state"`
	Revision  json.Number    `json:"revision"`
}

// inspectorResult is the Inspector CLI's --format json output.
type inspectorResult struct {
	Result struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

// mcpClients is an install of scripts/mcp-conformance.
type mcpClients struct {
	dir  string
	home string // HOME of the clients, so they keep nothing in the real one
}

func (c mcpClients) node() string { return filepath.Join(c.dir, "bin", "node") }
func (c mcpClients) conformance() string {
	return filepath.Join(c.dir, "node_modules", ".bin", "conformance")
}
func (c mcpClients) inspector() string {
	return filepath.Join(c.dir, "node_modules", ".bin", "mcp-inspector")
}

// run runs a script of the install with Node 22 and returns its output and
// exit code; it fails t when the script cannot run or takes over 5 minutes.
func (c mcpClients) run(t *testing.T, script string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.node(), append([]string{script}, args...)...)
	cmd.Dir = c.home
	cmd.Env = append(os.Environ(), "HOME="+c.home, "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(script), args, ctx.Err(), out.String(), errb.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", filepath.Base(script), args, err)
	}
	return out.String(), errb.String(), code
}

// inspect runs the Inspector's CLI with args and its JSON output, and
// returns the parsed result and the exit code (5 for a tool error).
func (c mcpClients) inspect(t *testing.T, args ...string) (inspectorResult, int) {
	t.Helper()
	// Output options go before a "--" that starts a stdio server's command.
	opts := []string{"--cli", "--format", "json"}
	stdout, stderr, code := c.run(t, c.inspector(), append(opts, args...)...)
	shown := strings.TrimSpace(stdout)
	if len(shown) > 600 {
		shown = shown[:600] + " ..."
	}
	t.Logf("mcp-inspector %s: exit %d\n%s", strings.Join(args, " "), code, shown)
	var res inspectorResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil && code == 0 {
		t.Fatalf("mcp-inspector %s: output is not JSON: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	if code != 0 && strings.TrimSpace(stderr) != "" {
		t.Logf("stderr: %s", strings.TrimSpace(stderr))
	}
	return res, code
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Description  string `json:"description"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	ErrorMessage string `json:"errorMessage"`
}

// resultDir is how the runner names a scenario's directory under -o.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// readConformanceResults reads the checks of every scenario the runner saved in dir.
func readConformanceResults(t *testing.T, dir string) map[string][]conformanceCheck {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			t.Fatalf("unexpected entry %s in the runner's output directory", e.Name())
		}
		if _, dup := results[m[1]]; dup {
			t.Fatalf("scenario %s saved twice", m[1])
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s/checks.json: %v", e.Name(), err)
		}
		results[m[1]] = checks
	}
	return results
}

// readExpectedFailures reads the server entries of the runner's baseline
// file and the comment just above each, its reason; an entry without one
// fails t.
func readExpectedFailures(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var section string
	var reason []string
	for i, line := range strings.Split(string(b), "\n") {
		s := strings.TrimSpace(line)
		switch {
		case s == "":
			reason = nil
		case strings.HasPrefix(s, "#"):
			reason = append(reason, strings.TrimSpace(strings.TrimPrefix(s, "#")))
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(s, ":"):
			section, reason = strings.TrimSuffix(s, ":"), nil
		case strings.HasPrefix(s, "- ") && section == "server":
			name := strings.TrimSpace(strings.TrimPrefix(s, "- "))
			if len(reason) == 0 {
				t.Errorf("%s:%d: %s has no reason (a comment just above it)", path, i+1, name)
			}
			if _, dup := out[name]; dup {
				t.Errorf("%s:%d: %s is listed twice", path, i+1, name)
			}
			out[name] = strings.Join(reason, " ")
			reason = nil
		case strings.HasPrefix(s, "- "):
			reason = nil
		default:
			t.Fatalf("%s:%d: want a section, a comment or a \"- scenario\" entry: %q", path, i+1, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no server scenarios", path)
	}
	return out
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }

// buildMemento builds this command into a temporary directory, with the race
// detector when the test has it, so races in the server show up here too.
func buildMemento(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memento")
	args := []string{"build", "-o", bin}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// serveProcess is a `memento serve` child of the test.
type serveProcess struct {
	cmd  *exec.Cmd
	addr string
	logs *syncBuffer
	done chan error
}

// startServeProcess starts bin serve on a free loopback port with JSON logs
// and waits until it listens. Cleanup kills it if the test did not stop it.
func startServeProcess(t *testing.T, bin string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, logs: &syncBuffer{}, done: make(chan error, 1)}
	listening := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.logs.WriteLine(sc.Text())
			var line serveLog
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				select {
				case listening <- line.Addr:
				default:
				}
			}
		}
	}()
	go func() {
		<-scanned // Wait must not close the pipe before the last line is read
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case p.addr = <-listening:
	case err := <-p.done:
		t.Fatalf("memento serve exited before listening: %v\n%s", err, p.logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("memento serve did not listen within 60s\n%s", p.logs)
	}
	t.Logf("memento serve (pid %d) listens on %s", cmd.Process.Pid, p.addr)
	return p
}

// stop sends SIGTERM to the server by its pid and fails t unless it drains
// and exits cleanly within 30s, with no data race reported.
func (p *serveProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal memento serve: %v", err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("memento serve after SIGTERM: %v\n%s", err, p.logs)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("memento serve did not stop within 30s of SIGTERM\n%s", p.logs)
	}
	if logs := p.logs.String(); strings.Contains(logs, "DATA RACE") {
		t.Errorf("memento serve reported a data race:\n%s", logs)
	}
}

// syncBuffer collects a child's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
	b.buf.WriteByte('\n')
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
