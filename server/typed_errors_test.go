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
		expectProblem(t, res, 409, "revision-conflict")
		var body struct {
			CurrentRevision int64 `json:"current_revision"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || body.CurrentRevision != 3 {
			t.Fatalf("conflict body %s: want current_revision 3", res.body)
		}
		_, err := e.c.Commit(ctx, "t1", commitReq(1, l, "c", `{}`))
		var rc *run.RevisionConflictError
		if !errors.Is(err, run.ErrRevisionConflict) || !errors.As(err, &rc) || rc.Current != 3 || rc.RunID != "t1" {
			t.Fatalf("client error %v: typed %+v", err, rc)
		}

		res = e.do(t, "POST", "/v1/runs/t1/lease", `{"owner":"worker-2"}`, nil)
		expectProblem(t, res, 409, "lease-held")
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
