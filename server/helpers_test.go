package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/enginetest"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
)

var backends = []string{"sqlite", "postgres"}

// forEachBackend runs fn as a subtest on every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { fn(t, b) })
	}
}

// openEngine opens an engine on a fresh database of the backend; closed at cleanup.
func openEngine(t testing.TB, backend string, cfg memento.Config) *memento.Engine {
	t.Helper()
	return enginetest.Open(t, backend, cfg)
}

// syncBuffer collects server logs; they are printed only when a test fails.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testEnv struct {
	eng  *memento.Engine
	srv  *server.Server
	http *httptest.Server
	c    *client.Client
	logs *syncBuffer
}

type envOptions struct {
	cfg    memento.Config
	keys   string // MEMENTO_API_KEYS syntax
	apiKey string // key the env's client sends
}

func newEnv(t testing.TB, backend string, o envOptions) *testEnv {
	t.Helper()
	return serveEngine(t, openEngine(t, backend, o.cfg), o.keys, o.apiKey)
}

// serveEngine serves eng over HTTP with keys (MEMENTO_API_KEYS syntax); the
// env's client sends apiKey. The server log is printed if the test fails.
func serveEngine(t testing.TB, eng *memento.Engine, apiKeys, apiKey string) *testEnv {
	t.Helper()
	return serveEngineWith(t, eng, apiKeys, apiKey, nil)
}

// serveEngineWith is serveEngine with server options changed by mod.
func serveEngineWith(t testing.TB, eng *memento.Engine, apiKeys, apiKey string, mod func(*server.Options)) *testEnv {
	t.Helper()
	logs := &syncBuffer{}
	keys := server.NewKeySet()
	if err := server.ParseAPIKeys(keys, apiKeys); err != nil {
		t.Fatalf("keys: %v", err)
	}
	o := engineOptions(eng)
	o.Keys = keys
	o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if mod != nil {
		mod(&o)
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	var opts []client.Option
	if apiKey != "" {
		opts = append(opts, client.WithAPIKey(apiKey))
	}
	c, err := client.New(hs.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{eng: eng, srv: srv, http: hs, c: c, logs: logs}
}

// rawResponse is a response read in full.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes the body as a problem; it fails the test if it is not one.
func (r rawResponse) problem(t testing.TB) server.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d: Content-Type %q, want application/problem+json; body %s", r.status, ct, r.body)
	}
	var p server.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.body)
	}
	if p.Status != r.status {
		t.Fatalf("problem status %d != response status %d", p.Status, r.status)
	}
	if !strings.HasPrefix(p.Type, problem.TypeBase) || p.Title == "" {
		t.Fatalf("problem without a proper type/title: %s", r.body)
	}
	return p
}

// do sends a raw request; body may be a string, []byte or a value to encode.
func (e *testEnv) do(t testing.TB, method, path string, body any, header map[string]string) rawResponse {
	t.Helper()
	res, err := e.send(method, path, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// send is do for goroutines other than the test's: it returns the error.
func (e *testEnv) send(method, path string, body any, header map[string]string) (rawResponse, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return rawResponse{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		return rawResponse{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		return rawResponse{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawResponse{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// expectProblem checks a response is the problem of kind with status.
func expectProblem(t testing.TB, r rawResponse, status int, kind string) server.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (%s); body %s", r.status, status, kind, r.body)
	}
	p := r.problem(t)
	if p.Kind() != kind {
		t.Fatalf("problem kind %q, want %q; body %s", p.Kind(), kind, r.body)
	}
	return p
}

// leasedRun creates a run and takes its lease.
func (e *testEnv) leasedRun(t testing.TB, id string) (run.Run, run.Lease) {
	t.Helper()
	ctx := context.Background()
	r, _, err := e.c.CreateRun(ctx, run.CreateRequest{RunID: id, WorkflowName: "refund", WorkflowVersion: "1.0.0",
		State: json.RawMessage(`{"order":"o-1","amount":100}`), NextStep: "check"})
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	l, err := e.c.AcquireLease(ctx, r.RunID, "worker-1", time.Minute)
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	return r, l
}

// preparedOp creates leased run runID and prepares operation opID of it.
func (e *testEnv) preparedOp(t testing.TB, runID, opID string) {
	t.Helper()
	e.leasedRun(t, runID)
	prep := map[string]any{"operation_id": opID, "step_id": "s", "tool_name": "t", "request_digest": "sha256:aa"}
	if res := e.do(t, "POST", "/v1/runs/"+runID+"/operations", prep, nil); res.status != http.StatusCreated {
		t.Fatalf("prepare: %d %s", res.status, res.body)
	}
}

// snapshot is what must not change when a commit is refused.
type snapshot struct {
	run    run.Run
	events []run.Event
}

func (e *testEnv) snapshot(t testing.TB, id string) snapshot {
	t.Helper()
	ctx := context.Background()
	r, err := e.c.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.c.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{run: r, events: p.Items}
}

func (s snapshot) assertSame(t testing.TB, other snapshot) {
	t.Helper()
	a, _ := json.Marshal(s.run.State)
	b, _ := json.Marshal(other.run.State)
	if !jsonEqual(a, b) || s.run.StateRevision != other.run.StateRevision || s.run.NextStep != other.run.NextStep ||
		s.run.Status != other.run.Status || !s.run.UpdatedAt.Equal(other.run.UpdatedAt) {
		t.Fatalf("run changed:\nbefore %+v\nafter  %+v", s.run, other.run)
	}
	if len(s.events) != len(other.events) {
		t.Fatalf("events changed: %d before, %d after", len(s.events), len(other.events))
	}
	for i := range s.events {
		if s.events[i].Seq != other.events[i].Seq || s.events[i].EventType != other.events[i].EventType {
			t.Fatalf("event %d changed: %+v vs %+v", i, s.events[i], other.events[i])
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func commitReq(rev int64, l run.Lease, typ string, state string) run.CommitRequest {
	return run.CommitRequest{
		ExpectedRevision: rev,
		Lease:            l,
		Event:            run.EventInput{EventType: typ, StepID: typ, Attempt: 1, Payload: json.RawMessage(`{"ok":true}`)},
		State:            json.RawMessage(state),
		NextStep:         "next-" + typ,
	}
}

// engineOptions are server options serving eng's services, as serve does.
func engineOptions(eng *memento.Engine) server.Options {
	return server.Options{
		Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory, Retrieval: eng.Retrieval, Context: eng.Context, Summaries: eng.Summaries, Ready: eng.Ready,
		Backend: string(eng.Backend()), MaxStateBytes: eng.Config().MaxStateBytes,
	}
}
