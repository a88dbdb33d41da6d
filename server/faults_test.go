package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/server"
)

// pgProxy is a loopback TCP proxy in front of the tests' PostgreSQL, so a
// test can cut the database off (close) or break one connection right
// after a chosen statement was forwarded (cutAfter).
type pgProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    []net.Conn
	cutAfter []byte // forward a chunk containing this, then break the connection
	cutDrop  bool   // break it before forwarding instead
	cut      chan struct{}
}

func startPGProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target, cut: make(chan struct{}, 1)}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// cutOn makes the proxy break the connection at the next chunk holding
// marker: after forwarding it (the answer is lost), or before (drop).
func (p *pgProxy) cutOn(marker []byte, drop bool) {
	p.mu.Lock()
	p.cutAfter, p.cutDrop = marker, drop
	p.mu.Unlock()
}

// expectCut waits until the proxy has cut on what the test sent.
func (p *pgProxy) expectCut(t *testing.T, what string) {
	t.Helper()
	select {
	case <-p.cut:
	case <-time.After(5 * time.Second):
		t.Fatalf("the proxy never saw %s", what)
	}
}

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		cutting := new(atomic.Bool)
		go p.backward(c, up, cutting)
		go p.forward(c, up, cutting)
	}
}

// backward copies server to client, dropping everything once cutting.
func (p *pgProxy) backward(c, up net.Conn, cutting *atomic.Bool) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 && !cutting.Load() {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forward copies client to server, watching for the cut marker.
func (p *pgProxy) forward(c, up net.Conn, cutting *atomic.Bool) {
	defer c.Close()
	defer up.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			marker, drop := p.cutAfter, p.cutDrop
			hit := marker != nil && bytes.Contains(buf[:n], marker)
			if hit {
				p.cutAfter = nil
			}
			p.mu.Unlock()
			if hit && drop {
				p.cut <- struct{}{}
				return
			}
			if hit {
				cutting.Store(true)
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
			if hit {
				// Let the rest of the statement (its Sync may come in a later
				// read) reach the server and run, answers going nowhere; then
				// break the connection.
				_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				for {
					m, err := c.Read(buf)
					if m > 0 {
						_, _ = up.Write(buf[:m])
					}
					if err != nil {
						break
					}
				}
				time.Sleep(200 * time.Millisecond)
				p.cut <- struct{}{}
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close cuts the database off: no new connection, every open one broken.
func (p *pgProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// proxiedEngine opens an engine on a fresh schema reached through a proxy.
func proxiedEngine(t *testing.T) (*memento.Engine, *pgProxy, string) {
	t.Helper()
	direct := testenv.PostgresURL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	p := startPGProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := memento.Open(ctx, memento.Config{PostgresURL: u.String(), DataDir: t.TempDir(), PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng, p, direct
}

// expectRetryable checks a 5xx fault answer: the kind, Retry-After, and the
// request id in both the body and the header, and in a log line with a cause.
func expectRetryable(t *testing.T, e *testEnv, res rawResponse, status int, kinds ...string) server.Problem {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d; body %s", res.status, status, res.body)
	}
	p := res.problem(t)
	ok := false
	for _, k := range kinds {
		ok = ok || p.Kind() == k
	}
	if !ok {
		t.Fatalf("problem %q, want one of %v: %s", p.Kind(), kinds, res.body)
	}
	if res.header.Get("Retry-After") == "" {
		t.Fatalf("%d without Retry-After", res.status)
	}
	if p.RequestID == "" || p.RequestID != res.header.Get("X-Request-Id") {
		t.Fatalf("request id %q in the body, %q in the header", p.RequestID, res.header.Get("X-Request-Id"))
	}
	deadline := time.Now().Add(2 * time.Second)
	for !logHasCause(e.logs.String(), p.RequestID) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with request id %s and a cause:\n%s", p.RequestID, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func logHasCause(logs, id string) bool {
	for line := range strings.SplitSeq(logs, "\n") {
		var l struct {
			RequestID string `json:"request_id"`
			Error     string `json:"error"`
			Msg       string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.RequestID == id && l.Error != "" && l.Msg == "request" {
			return true
		}
	}
	return false
}

// TestUnreachableDatabaseIs503: with the database cut off, reads and writes
// answer 503 with Retry-After (before: 500), and the answer and its log
// line carry the request id and the cause.
func TestUnreachableDatabaseIs503(t *testing.T) {
	eng, p, _ := proxiedEngine(t)
	e := serveEngine(t, eng, "", "")
	_, l := e.leasedRun(t, "u1")
	p.close()
	expectRetryable(t, e, e.do(t, "GET", "/v1/runs/u1", nil, nil), 503, "unavailable")
	expectRetryable(t, e, e.do(t, "GET", "/v1/runs", nil, nil), 503, "unavailable")
	ready := expectRetryable(t, e, e.do(t, "GET", "/readyz", nil, nil), 503, "not-ready")
	if strings.Contains(strings.ToLower(ready.Detail), "postgres") {
		t.Errorf("readyz names the backend: %s", ready.Detail)
	}
	_, err := e.c.GetRun(context.Background(), "u1")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Kind() != "unavailable" || ce.RetryAfter != time.Second || ce.RequestID == "" {
		t.Fatalf("client error %#v", err)
	}
	expectRetryable(t, e, e.do(t, "POST", "/v1/runs/u1/commit", commitReq(1, l, "a", `{}`), nil), 503, "unavailable", "commit-outcome-unknown")
	expectRetryable(t, e, e.do(t, "POST", "/v1/runs", `{"workflow_name":"w","workflow_version":"1"}`, nil), 503, "unavailable")
	// A closed pool (no network error at all) is unavailable too.
	_ = eng.Close()
	expectRetryable(t, e, e.do(t, "GET", "/v1/runs/u1", nil, nil), 503, "unavailable")
}

// TestCommitOutcomeUnknown: when the connection breaks after the commit
// statement was sent, the answer is the distinct commit-outcome-unknown
// (503, Retry-After), not 500, and re-reading the run settles it: here once
// applied (the statement reached the database), once not (it did not).
func TestCommitOutcomeUnknown(t *testing.T) {
	eng, p, _ := proxiedEngine(t)
	e := serveEngine(t, eng, "", "")
	_, l := e.leasedRun(t, "o1")
	for i, drop := range []bool{false, true} {
		marker := []byte("outcome-probe-" + string(rune('a'+i)))
		p.cutOn(marker, drop)
		before := e.snapshot(t, "o1").run.StateRevision
		res := e.do(t, "POST", "/v1/runs/o1/commit", commitReq(before, l, string(marker), `{"n":1}`), nil)
		p.expectCut(t, "the commit")
		pr := expectRetryable(t, e, res, 503, "commit-outcome-unknown")
		if !strings.Contains(pr.Detail, "GET /v1/runs/o1") {
			t.Errorf("detail does not say how to settle it: %s", pr.Detail)
		}
		after := e.snapshot(t, "o1").run.StateRevision
		if applied := after == before+1; applied == drop {
			t.Fatalf("drop=%v: revision %d -> %d", drop, before, after)
		}
	}
}

// TestHungDatabaseHitsTheDeadline: while another session holds an exclusive
// lock on runs, a commit ends by the request deadline (before: it waited
// for ever and was applied once the lock went), the in-flight bound answers
// 503 overloaded at once, and once the lock is released the timed-out
// commit was not applied. The server cancelled the statement (the store
// asks it to, and waits for its answer), so the outcome is known: 504
// timeout, not applied, rather than 503 commit-outcome-unknown.
func TestHungDatabaseHitsTheDeadline(t *testing.T) {
	direct := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := memento.Open(ctx, memento.Config{PostgresURL: direct, DataDir: t.TempDir(), PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	const deadline = time.Second
	e := serveEngineWith(t, eng, "", "", func(o *server.Options) {
		o.RequestTimeout, o.MaxInFlight = deadline, 1
	})
	_, l := e.leasedRun(t, "h1")

	locker, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		res  rawResponse
		err  error
		took time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		start := time.Now()
		res, err := e.send("POST", "/v1/runs/h1/commit", commitReq(1, l, "late", `{"late":true}`), nil)
		done <- answer{res, err, time.Since(start)}
	}()
	// While the commit hangs, the one in-flight slot is taken.
	time.Sleep(200 * time.Millisecond)
	expectRetryable(t, e, e.do(t, "GET", "/v1/runs", nil, nil), 503, "overloaded")

	var a answer
	select {
	case a = <-done:
	case <-time.After(deadline + 5*time.Second):
		_ = tx.Rollback(ctx)
		t.Fatal("the commit did not end by the request deadline")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	expectRetryable(t, e, a.res, 504, "timeout")
	if a.took > deadline+2*time.Second {
		t.Errorf("the commit took %s with a %s deadline", a.took, deadline)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time for a late commit to land, if one were still queued
	got, err := e.c.GetRun(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if got.StateRevision != 1 || got.NextStep == "next-late" {
		t.Fatalf("the timed-out commit was applied: %+v", got)
	}
}

// TestUnreachableRedisIs503: sessions on a Redis that is cut off answer
// 503 unavailable with Retry-After, not 500.
func TestUnreachableRedisIs503(t *testing.T) {
	e, p, h := proxiedRedis(t)
	p.close()
	expectRetryable(t, e, e.do(t, "GET", "/v1/sessions/s1?user_id=u1", nil, h), 503, "unavailable")
	expectRetryable(t, e, e.do(t, "POST", "/v1/sessions/s1/messages?user_id=u1", `{"messages":[{"role":"user","content":"hi"}]}`, h), 503, "unavailable")
	expectRetryable(t, e, e.do(t, "GET", "/v1/sessions?user_id=u1", nil, h), 503, "unavailable")
}

// TestSessionWriteOutcomeUnknown: a session append whose answer is lost
// after Redis ran it (or that never reached it) answers 503
// commit-outcome-unknown with the read that settles it, not 503
// unavailable (which says nothing was done); the client does not send it
// again by itself, so it is applied once or not at all.
func TestSessionWriteOutcomeUnknown(t *testing.T) {
	e, p, h := proxiedRedis(t)
	want := 0
	for i, drop := range []bool{false, true} {
		marker := fmt.Sprintf("outcome-probe-%d", i)
		p.cutOn([]byte(marker), drop)
		res := e.do(t, "POST", "/v1/sessions/s1/messages?user_id=u1", `{"messages":[{"role":"user","content":"`+marker+`"}]}`, h)
		p.expectCut(t, "the append")
		pr := expectRetryable(t, e, res, 503, "commit-outcome-unknown")
		if !strings.Contains(pr.Detail, "GET /v1/sessions/s1/messages?user_id=u1") {
			t.Errorf("detail does not say how to settle it: %s", pr.Detail)
		}
		if !drop {
			want++
		}
		got := e.do(t, "GET", "/v1/sessions/s1/messages?user_id=u1", nil, h)
		if n := strings.Count(string(got.body), "outcome-probe-"); got.status != 200 || n != want {
			t.Fatalf("drop=%v: %d probes stored, want %d (applied once or not at all): %d %s", drop, n, want, got.status, got.body)
		}
	}
}

// proxiedRedis serves an engine whose Redis is reached through a TCP proxy
// the test can cut, with session s1 of user u1 created; it answers the
// server, the proxy and the headers of the server's one key.
func proxiedRedis(t *testing.T) (*testEnv, *pgProxy, map[string]string) {
	t.Helper()
	rdb, redisURL := testenv.RedisClient(t)
	tenant := testenv.RandomID("t-")
	testenv.CleanupRedisKeys(t, rdb, "memento:{t:"+tenant+":*")
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	p := startPGProxy(t, u.Host) // a plain TCP proxy; nothing in it is PostgreSQL's
	u.Host = p.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := memento.Open(ctx, memento.Config{RedisURL: u.String(), DataDir: t.TempDir(), PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	const key = "redis-fault-key-0123456789"
	e := serveEngine(t, eng, key+"="+tenant+":writer", key)
	h := map[string]string{"Authorization": "Bearer " + key}
	if res := e.do(t, "PUT", "/v1/sessions/s1", `{"user_id":"u1","state":{"a":1}}`, h); res.status != 201 {
		t.Fatalf("put: %d %s", res.status, res.body)
	}
	return e, p, h
}

// TestWriteOutcomeUnknownOnEveryWrite: a write other than a commit or a
// session write whose answer is lost after it reached the database answers
// commit-outcome-unknown with the read that settles it (before: 503
// unavailable, which says nothing was done, though the write was applied).
func TestWriteOutcomeUnknownOnEveryWrite(t *testing.T) {
	eng, p, _ := proxiedEngine(t)
	e := serveEngine(t, eng, "", "")
	e.leasedRun(t, "w1")
	cases := []struct {
		name, path, reread string
		body               func(marker string) any
		applied            func(marker string) bool
	}{
		{"checkpoint", "/v1/runs/w1/checkpoints", "GET /v1/runs/w1/checkpoints",
			func(m string) any { return map[string]any{"label": m} },
			func(m string) bool {
				return strings.Contains(string(e.do(t, "GET", "/v1/runs/w1/checkpoints", nil, nil).body), m)
			}},
		{"operation", "/v1/runs/w1/operations", "GET /v1/runs/w1/operations",
			func(m string) any {
				return map[string]any{"business_key": m, "step_id": "refund", "tool_name": m, "request_digest": "sha256:aa"}
			},
			func(m string) bool {
				return strings.Contains(string(e.do(t, "GET", "/v1/runs/w1/operations", nil, nil).body), m)
			}},
	}
	for _, c := range cases {
		for i, drop := range []bool{false, true} {
			marker := fmt.Sprintf("%s-probe-%d", c.name, i)
			p.cutOn([]byte(marker), drop)
			res := e.do(t, "POST", c.path, c.body(marker), nil)
			p.expectCut(t, "the "+c.name)
			pr := expectRetryable(t, e, res, 503, "commit-outcome-unknown")
			if !strings.Contains(pr.Detail, c.reread) {
				t.Errorf("%s: detail does not name %q: %s", c.name, c.reread, pr.Detail)
			}
			if applied := c.applied(marker); applied == drop {
				t.Fatalf("%s drop=%v: applied=%v", c.name, drop, applied)
			}
		}
	}
}
