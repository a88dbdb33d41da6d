package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
)

// TestTypedErrorsCarryTheirFacts: a revision conflict answers the run's
// current revision and a held lease its holder and expiry, as problem
// extension members, on every backend; the client exposes them as the
// domain's typed errors (errors.As) and errors.Is still matches the sentinel.
func TestTypedErrorsCarryTheirFacts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{cfg: memento.Config{}})
		ctx := context.Background()
		_, l := e.leasedRun(t, "t1")
		if _, err := e.c.Commit(ctx, "t1", commitReq(1, l, "a", `{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Commit(ctx, "t1", commitReq(2, l, "b", `{"n":2}`)); err != nil {
			t.Fatal(err)
		}
		res := e.do(t, "POST", "/v1/runs/t1/commit", commitReq(1, l, "c", `{}`), nil)
		if p := expectProblem(t, res, 409, "revision-conflict"); strings.Count(p.Detail, "t1") != 1 || strings.Count(p.Detail, "revision") > 2 {
			t.Errorf("conflict detail repeats itself: %q", p.Detail)
		}
		var body struct {
			CurrentRevision int64 `json:"current_revision"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || body.CurrentRevision != 3 {
			t.Fatalf("conflict body %s: want current_revision 3", res.body)
		}
		_, err := e.c.Commit(ctx, "t1", commitReq(1, l, "c", `{}`))
		var rc *run.RevisionConflictError
		if !errors.Is(err, run.ErrRevisionConflict) || !errors.As(err, &rc) || rc.Current != 3 || rc.Expected != 1 || rc.RunID != "t1" {
			t.Fatalf("client error %v: typed %+v", err, rc)
		}

		res = e.do(t, "POST", "/v1/runs/t1/lease", `{"owner":"worker-2"}`, nil)
		if p := expectProblem(t, res, 409, "lease-held"); strings.Count(p.Detail, "t1") != 1 || strings.Count(p.Detail, "held") != 1 {
			t.Errorf("lease-held detail repeats itself: %q", p.Detail)
		}
		var held struct {
			LeaseOwner     string     `json:"lease_owner"`
			LeaseExpiresAt *time.Time `json:"lease_expires_at"`
		}
		if err := json.Unmarshal(res.body, &held); err != nil || held.LeaseOwner != "worker-1" || held.LeaseExpiresAt == nil || !held.LeaseExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("lease-held body %s: want lease_owner worker-1 until %v", res.body, l.ExpiresAt)
		}
		_, err = e.c.AcquireLease(ctx, "t1", "worker-2", time.Minute)
		var lh *run.LeaseHeldError
		if !errors.Is(err, run.ErrLeaseHeld) || !errors.As(err, &lh) || lh.Owner != "worker-1" || lh.ExpiresAt == nil {
			t.Fatalf("client error %v: typed %+v", err, lh)
		}
		if client.KindOf(err) != "lease-held" {
			t.Fatalf("kind %q", client.KindOf(err))
		}
	})
}

// TestSessionErrorDetailsSayThingsOnce: a missing session's detail names the
// operation once (before: "get session chat-1: get session chat-1: ...").
func TestSessionErrorDetailsSayThingsOnce(t *testing.T) {
	for _, backend := range sessionBackends {
		t.Run(backend, func(t *testing.T) {
			e := newSessionEnv(t, backend, session.Options{})
			for _, c := range []struct{ method, path, body string }{
				{"GET", "/v1/sessions/chat-1?user_id=u1", ""},
				{"POST", "/v1/sessions/chat-1/messages?user_id=u1", `{"messages":[{"role":"user","content":"hi"}]}`},
				{"PUT", "/v1/sessions/chat-1/summary?user_id=u1", `{"text":"s","through_seq":0}`},
				{"POST", "/v1/sessions/chat-1/close?user_id=u1", ""},
			} {
				var body any
				if c.body != "" {
					body = c.body
				}
				p := expectProblem(t, e.do(t, c.method, c.path, body, auth(writerKey)), 404, "session-not-found")
				if strings.Count(p.Detail, "chat-1") != 1 || strings.Contains(strings.ToLower(p.Detail), backend) {
					t.Errorf("%s %s: detail %q", c.method, c.path, p.Detail)
				}
			}
		})
	}
}

// TestErrorDetailsNameNoBackend: the problems a client meets most (a lost
// race, a stale lease, unknown runs, checkpoints and revisions, a finished
// run) never name the store behind the API (before: "sqlite commit: ...")
// and never say the same context twice.
func TestErrorDetailsNameNoBackend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, envOptions{cfg: memento.Config{}})
		_, l := e.leasedRun(t, "d1")
		stale := l
		stale.Epoch++
		cases := []struct {
			method, path string
			body         any
			status       int
			kind         string
		}{
			{"POST", "/v1/runs/d1/commit", commitReq(7, l, "a", `{}`), 409, "revision-conflict"},
			{"POST", "/v1/runs/d1/commit", commitReq(1, stale, "a", `{}`), 409, "lease-lost"},
			{"GET", "/v1/runs/nope", nil, 404, "run-not-found"},
			{"GET", "/v1/runs/nope/events", nil, 404, "run-not-found"},
			{"POST", "/v1/runs/d1/fork", map[string]any{"from_revision": 99, "run_id": "d2"}, 0, ""},
			{"POST", "/v1/runs/d1/fork", map[string]any{"checkpoint": "none", "run_id": "d3"}, 0, ""},
			{"DELETE", "/v1/runs/d1/lease", map[string]any{"lease": stale}, 409, "lease-lost"},
		}
		for _, c := range cases {
			res := e.do(t, c.method, c.path, c.body, nil)
			if res.status < 400 {
				t.Errorf("%s %s: %d, want a problem", c.method, c.path, res.status)
				continue
			}
			var p struct{ Type, Detail string }
			if err := json.Unmarshal(res.body, &p); err != nil {
				t.Fatalf("%s %s: %s", c.method, c.path, res.body)
			}
			if c.status != 0 && (res.status != c.status || !strings.HasSuffix(p.Type, "/"+c.kind)) {
				t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, res.status, p.Type, c.status, c.kind)
			}
			low := strings.ToLower(p.Detail)
			for _, name := range []string{"sqlite", "postgres", "pgx", "redis", "sql:"} {
				if strings.Contains(low, name) {
					t.Errorf("%s %s: detail names the backend (%s): %q", c.method, c.path, name, p.Detail)
				}
			}
			parts := strings.Split(p.Detail, ": ")
			for i := 1; i < len(parts); i++ {
				if parts[i] == parts[i-1] || (len(parts[i]) > 8 && strings.Contains(parts[i-1], parts[i])) {
					t.Errorf("%s %s: detail repeats itself: %q", c.method, c.path, p.Detail)
					break
				}
			}
		}
	})
}
