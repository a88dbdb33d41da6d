package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/toolop"
)

// backends opens the two stores the ledger serves.
func backends(t *testing.T) map[string]toolop.Store {
	t.Helper()
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memento.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	pg, err := postgres.Open(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(pg.Close)
	return map[string]toolop.Store{"sqlite": lite, "postgres": pg}
}

// checkErr asserts err is target, names what it must and no id or backend.
func checkErr(t *testing.T, what string, err, target error, want string, ids ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Fatalf("%s: error %q does not say %q", what, msg, want)
	}
	for _, bad := range append(ids, "sqlite", "postgres", "pgx") {
		if strings.Contains(strings.ToLower(msg), bad) {
			t.Fatalf("%s: error %q names %q", what, msg, bad)
		}
	}
}

// The store's refusals carry the facts (current status, expiry) once and
// leave the ids to toolop.Service, which wraps them with the id.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	for name, st := range backends(t) {
		t.Run(name, func(t *testing.T) {
			now := time.Now().UTC().Truncate(time.Microsecond)
			op := toolop.Operation{TenantID: "t1", OperationID: "op-" + name, RunID: "run-1", StepID: "s",
				ToolName: "tool", RequestDigest: "sha256:aa", CreatedAt: now}
			if _, created, err := st.PrepareOperation(ctx, op); err != nil || !created {
				t.Fatalf("prepare: created=%v err=%v", created, err)
			}

			_, err := st.GetOperation(ctx, "t1", "op-missing")
			checkErr(t, "get missing", err, toolop.ErrNotFound, "not found", "op-missing")
			_, err = st.TransitionOperation(ctx, "t1", "op-missing", toolop.Transition{From: []toolop.Status{toolop.StatusPrepared}, To: toolop.StatusStarted, At: now})
			checkErr(t, "transition missing", err, toolop.ErrNotFound, "not found", "op-missing")
			_, err = st.TransitionOperation(ctx, "t1", "op-missing", toolop.Transition{To: toolop.StatusStarted, At: now})
			checkErr(t, "transition missing from nothing", err, toolop.ErrNotFound, "not found", "op-missing")

			_, err = st.TransitionOperation(ctx, "t1", op.OperationID, toolop.Transition{From: []toolop.Status{toolop.StatusStarted, toolop.StatusUnknown}, To: toolop.StatusSucceeded, At: now})
			checkErr(t, "transition from another status", err, toolop.ErrInvalidTransition, "it is prepared", op.OperationID)
			_, err = st.TransitionOperation(ctx, "t1", op.OperationID, toolop.Transition{To: toolop.StatusStarted, At: now})
			checkErr(t, "transition from no status", err, toolop.ErrInvalidTransition, "it is prepared", op.OperationID)
			if got, err := st.GetOperation(ctx, "t1", op.OperationID); err != nil || got.Status != toolop.StatusPrepared || !got.UpdatedAt.Equal(now) {
				t.Fatalf("after refused transitions: %+v %v", got, err)
			}

			a := toolop.Approval{TenantID: "t1", ApprovalID: "ap-" + name, RunID: "run-1", StepID: "s",
				RequestDigest: "sha256:aa", ExpiresAt: now.Add(time.Hour), CreatedAt: now}
			if _, created, err := st.CreateApproval(ctx, a); err != nil || !created {
				t.Fatalf("create approval: created=%v err=%v", created, err)
			}
			late := a
			late.ApprovalID += "-late"
			if _, created, err := st.CreateApproval(ctx, late); err != nil || !created {
				t.Fatalf("create approval: created=%v err=%v", created, err)
			}
			_, err = st.DecideApproval(ctx, "t1", "ap-missing", toolop.Decision{Approve: true, By: "alice", At: now})
			checkErr(t, "decide missing", err, toolop.ErrApprovalNotFound, "not found", "ap-missing")
			if _, err := st.DecideApproval(ctx, "t1", a.ApprovalID, toolop.Decision{Approve: true, By: "alice", At: now}); err != nil {
				t.Fatalf("decide: %v", err)
			}
			_, err = st.DecideApproval(ctx, "t1", a.ApprovalID, toolop.Decision{By: "bob", At: now})
			checkErr(t, "decide twice", err, toolop.ErrApprovalDecided, "it is approved", a.ApprovalID)
			_, err = st.DecideApproval(ctx, "t1", late.ApprovalID, toolop.Decision{Approve: true, By: "alice", At: late.ExpiresAt})
			checkErr(t, "decide expired", err, toolop.ErrApprovalExpired, late.ExpiresAt.Format(time.RFC3339Nano), late.ApprovalID)
		})
	}
}

// Through toolop.Service, which adds the id, a refusal names it once.
func TestServiceNamesIDOnce(t *testing.T) {
	ctx := context.Background()
	for name, st := range backends(t) {
		t.Run(name, func(t *testing.T) {
			svc := toolop.NewService(st, time.Now)
			req := toolop.PrepareRequest{OperationID: toolop.OperationID("run-1", "k"), RunID: "run-1", StepID: "s",
				ToolName: "tool", RequestDigest: "sha256:aa"}
			if _, _, err := svc.Prepare(ctx, "t1", req); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			if _, err := svc.Start(ctx, "t1", req.OperationID); err != nil {
				t.Fatalf("start: %v", err)
			}
			if _, err := svc.Succeed(ctx, "t1", req.OperationID, toolop.Outcome{ExternalRef: "ref-1"}); err != nil {
				t.Fatalf("succeed: %v", err)
			}
			for what, err := range map[string]error{
				"start a succeeded operation": second(svc.Start(ctx, "t1", req.OperationID)),
				"get a missing operation":     second(svc.Get(ctx, "t1", "op-missing")),
			} {
				if err == nil {
					t.Fatalf("%s: no error", what)
				}
				id := req.OperationID
				if strings.Contains(what, "missing") {
					id = "op-missing"
				}
				if n := strings.Count(err.Error(), id); n != 1 {
					t.Fatalf("%s: error %q names %s %d times, want once", what, err, id, n)
				}
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }
