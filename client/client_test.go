package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/session"
)

// newServer serves a real engine on embedded SQLite under a path prefix,
// the way a reverse proxy might mount it.
func newServer(t *testing.T, prefix string) *httptest.Server {
	t.Helper()
	eng, err := memento.Open(context.Background(), memento.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory, Ready: eng.Ready,
		Backend: string(eng.Backend()), MaxStateBytes: eng.Config().MaxStateBytes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(prefix+"/", http.StripPrefix(prefix, srv))
		h = mux
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

func TestClientAgainstServer(t *testing.T) {
	hs := newServer(t, "/memento")
	c, err := client.New(hs.URL + "/memento/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("ready under a prefix: %v", err)
	}
	// An id that needs escaping in a path still round-trips.
	id := "order:42@eu"
	r, created, err := c.CreateRun(ctx, run.CreateRequest{RunID: id, WorkflowName: "w", State: json.RawMessage(`{"a":1}`)}, client.IdempotencyKey("idem-1"))
	if err != nil || !created || r.RunID != id {
		t.Fatalf("create: %+v %v %v", r, created, err)
	}
	r2, created, err := c.CreateRun(ctx, run.CreateRequest{RunID: id, WorkflowName: "w", State: json.RawMessage(`{"a":1}`)}, client.IdempotencyKey("idem-1"))
	if err != nil || created || r2.RunID != id {
		t.Fatalf("idempotent replay: %+v created=%v %v", r2, created, err)
	}
	// A refused create matches the library's sentinel, under a prefix too.
	if _, _, err := c.CreateRun(ctx, run.CreateRequest{WorkflowName: ""}); !errors.Is(err, run.ErrInvalidInput) || client.StatusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("create without a workflow: %v, want run.ErrInvalidInput", err)
	}
	if got, err := c.GetRun(ctx, id); err != nil || got.RunID != id {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, changed, err := c.GetRunIfChanged(ctx, id, 1); err != nil || changed {
		t.Fatalf("unchanged run: changed=%v %v", changed, err)
	}

	l, err := c.AcquireLease(ctx, id, "w1", time.Minute)
	if err != nil || l.Epoch != 1 {
		t.Fatalf("lease: %+v %v", l, err)
	}
	if l2, err := c.RenewLease(ctx, id, l, 2*time.Minute); err != nil || l2.Epoch != 1 || !l2.ExpiresAt.After(l.ExpiresAt) {
		t.Fatalf("renew: %+v %v", l2, err)
	}
	req := run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "a"}, State: json.RawMessage(`{"a":2}`)}
	res, err := c.Commit(ctx, id, req)
	if err != nil || res.Run.StateRevision != 2 || res.Event.Seq != 2 {
		t.Fatalf("commit: %+v %v", res, err)
	}
	if _, changed, err := c.GetRunIfChanged(ctx, id, 1); err != nil || !changed {
		t.Fatalf("changed run: changed=%v %v", changed, err)
	}

	// Typed errors: As, Is with the domain sentinel and with an *Error of the same kind.
	_, err = c.Commit(ctx, id, req)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Kind() != problem.RevisionConflict || ce.RequestID == "" {
		t.Fatalf("stale commit: %#v", err)
	}
	if !errors.Is(err, run.ErrRevisionConflict) || errors.Is(err, run.ErrLeaseLost) || !errors.Is(err, &client.Error{Type: problem.TypeBase + problem.RevisionConflict}) {
		t.Fatalf("errors.Is on %v", err)
	}
	if !strings.Contains(err.Error(), "409 revision-conflict") {
		t.Fatalf("error text: %v", err)
	}
	// If-Match the client sends must agree with the body; a caller override that disagrees is 412.
	req.ExpectedRevision = 2
	_, err = c.Commit(ctx, id, req, client.Header("If-Match", `"1"`))
	if client.KindOf(err) != problem.PreconditionFailed || client.StatusOf(err) != http.StatusPreconditionFailed {
		t.Fatalf("disagreeing If-Match: %v", err)
	}
	if _, err := c.GetRun(ctx, "missing"); !errors.Is(err, run.ErrNotFound) || client.KindOf(err) != problem.RunNotFound {
		t.Fatalf("missing run: %v", err)
	}
	if client.KindOf(errors.New("plain")) != "" || client.StatusOf(nil) != 0 {
		t.Fatal("KindOf/StatusOf of a non-server error")
	}

	// The iterator pages and stops when asked.
	for i := range 5 {
		if _, _, err := c.CreateRun(ctx, run.CreateRequest{RunID: "it-" + string(rune('a'+i)), WorkflowName: "it"}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for r, err := range c.Runs(ctx, client.ListRunsOptions{Workflow: "it", Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.RunID)
	}
	if strings.Join(ids, ",") != "it-a,it-b,it-c,it-d,it-e" {
		t.Fatalf("iterated %v", ids)
	}
	n := 0
	for range c.Runs(ctx, client.ListRunsOptions{Workflow: "it", Limit: 2}) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("early stop: %d", n)
	}
	for _, err := range c.Runs(ctx, client.ListRunsOptions{Status: "bogus"}) {
		if client.KindOf(err) != problem.InvalidRequest {
			t.Fatalf("iterator error: %v", err)
		}
	}
	if err := c.ReleaseLease(ctx, id, l); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:7700", "ftp://x", "http://", "::"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

// TestNonProblemError: a proxy's plain-text error still becomes an *Error.
func TestNonProblemError(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway from the proxy", http.StatusBadGateway)
	}))
	defer hs.Close()
	c, _ := client.New(hs.URL)
	_, err := c.GetRun(context.Background(), "x")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadGateway || ce.Kind() != "" || !strings.Contains(ce.Detail, "proxy") {
		t.Fatalf("plain error: %#v", err)
	}
}

// TestCommitWire: the commit body the client writes is the one json.Marshal
// writes, with the usual headers, and answers decode the same whether they
// take the client's fast reader or, with a field it does not know,
// encoding/json.
func TestCommitWire(t *testing.T) {
	answers := []string{
		`{"run":{"tenant_id":"t","run_id":"r","workflow_name":"w","workflow_version":"1","state_schema_version":1,"status":"running","next_step":"b","state":{"a":1},"state_revision":2,"lease_epoch":1,"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06.5Z"},"event":{"seq":2,"event_type":"a","attempt":0,"payload":{},"created_at":"2025-01-02T03:04:06.5Z"}}` + "\n",
		`{"run":{"tenant_id":"t","run_id":"r","workflow_name":"w","workflow_version":"1","state_schema_version":1,"status":"running","next_step":"b","state":{"a":1},"state_revision":2,"lease_epoch":1,"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06.5Z","added_later":true},"event":{"seq":2,"event_type":"a","attempt":0,"payload":{},"created_at":"2025-01-02T03:04:06.5Z"}}`,
	}
	var (
		mu      sync.Mutex
		body    []byte
		header  http.Header
		current string
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body, header = b, r.Header.Clone()
		answer := current
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	defer hs.Close()
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	req := run.CommitRequest{
		ExpectedRevision: 1,
		Lease:            run.Lease{Owner: "w1", Epoch: 1, ExpiresAt: time.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC)},
		Event:            run.EventInput{EventType: "a", StepID: "s", Attempt: 1, Payload: json.RawMessage(`{ "n" : 1 }`)},
		State:            json.RawMessage("{\n  \"a\": 1\n}"),
		NextStep:         "b",
	}
	want, _ := json.Marshal(req)
	for _, answer := range answers {
		mu.Lock()
		current = answer
		mu.Unlock()
		res, err := c.Commit(context.Background(), "r", req)
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
		var expect client.CommitResult
		if err := json.Unmarshal([]byte(answer), &expect); err != nil {
			t.Fatal(err)
		}
		if res.Run.RunID != "r" || res.Run.StateRevision != 2 || string(res.Run.State) != `{"a":1}` || res.Event.Seq != 2 ||
			!res.Run.UpdatedAt.Equal(expect.Run.UpdatedAt) || res.Run.Status != run.StatusRunning || string(res.Event.Payload) != `{}` {
			t.Errorf("decoded %+v, want %+v", res, expect)
		}
		mu.Lock()
		if !bytes.Equal(body, want) {
			t.Errorf("body sent:\n got %s\nwant %s", body, want)
		}
		if header.Get("Content-Type") != "application/json" || header.Get("If-Match") != `"1"` ||
			header.Get("Accept") != "application/json, application/problem+json" || header.Get("User-Agent") != "memento-go-client/1" {
			t.Errorf("headers sent: %v", header)
		}
		mu.Unlock()
	}
}

// TestNonASCIIRunID: an id whose path form is percent-encoded reaches the
// server once-escaped, so every run path finds it.
func TestNonASCIIRunID(t *testing.T) {
	hs := newServer(t, "")
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := "café-ünïcode"
	if _, _, err := c.CreateRun(ctx, run.CreateRequest{RunID: id, WorkflowName: "w"}); err != nil {
		t.Fatalf("create %q: %v", id, err)
	}
	got, err := c.GetRun(ctx, id)
	if err != nil || got.RunID != id {
		t.Fatalf("get %q: %+v %v", id, got, err)
	}
	l, err := c.AcquireLease(ctx, id, "w1", time.Minute)
	if err != nil {
		t.Fatalf("lease %q: %v", id, err)
	}
	if _, err := c.Commit(ctx, id, run.CommitRequest{ExpectedRevision: 1, Lease: l, Event: run.EventInput{EventType: "step"}, State: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("commit %q: %v", id, err)
	}
}

// TestDomainErrorsWordedOnce: an error the client maps to a domain sentinel
// matches it (errors.Is) and reads as the server's problem alone, without
// the sentinel's words appended again ("... (invalid input)").
func TestDomainErrorsWordedOnce(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"type":"` + problem.TypeBase + problem.InvalidRequest + `","title":"Invalid request","status":422,"detail":"invalid input: ttl is out of range"}`))
	}))
	defer hs.Close()
	c, _ := client.New(hs.URL)
	_, err := c.GetSession(context.Background(), "s1", "u1")
	if !errors.Is(err, session.ErrInvalidInput) || strings.Count(err.Error(), "invalid input") != 1 {
		t.Fatalf("%v", err)
	}
}
