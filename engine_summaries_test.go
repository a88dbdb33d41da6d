package memento_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
)

// TestEngineSummaries: Open wires the summary service on the runs backend,
// reading run events and session messages, and summaries survive a reopen.
func TestEngineSummaries(t *testing.T) {
	ctx := context.Background()
	for _, backend := range []memento.Backend{memento.BackendSQLite, memento.BackendPostgres} {
		t.Run(string(backend), func(t *testing.T) {
			cfg := memento.Config{DataDir: filepath.Join(t.TempDir(), "data"), PII: memento.PIIConfig{Key: testenv.PIIKey}}
			if backend == memento.BackendPostgres {
				cfg.PostgresURL = testenv.PostgresURL(t)
			}
			eng, err := memento.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if eng.Summaries == nil {
				t.Fatal("Open left Summaries nil")
			}
			r, _, err := eng.Runs.Create(ctx, "t1", run.CreateRequest{RunID: "r1", WorkflowName: "w"}, "")
			if err != nil {
				t.Fatal(err)
			}
			l, err := eng.Runs.AcquireLease(ctx, "t1", "r1", "w", 0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := eng.Runs.Commit(ctx, "t1", "r1", run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: json.RawMessage(`{}`),
				Event: run.EventInput{EventType: "step.completed", StepID: "pay", Attempt: 1, Payload: json.RawMessage(`{"amount":"99.90","currency":"EUR"}`)}}); err != nil {
				t.Fatal(err)
			}
			s, _, err := eng.Summaries.Compact(ctx, "t1", compact.RunOwner("r1"), compact.CompactRequest{})
			if err != nil || len(s.Carried.Amounts) != 1 || s.Carried.Amounts[0].Value != "99.90" {
				t.Fatalf("compact run: %v %+v", err, s.Carried.Amounts)
			}
			if _, _, err := eng.Sessions.Put(ctx, "t1", "s1", session.PutRequest{UserID: "u1"}); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Sessions.Append(ctx, "t1", "s1", "u1", []session.MessageInput{{Role: "user", Content: "I never fly on Fridays."}}); err != nil {
				t.Fatal(err)
			}
			ss, _, err := eng.Summaries.Compact(ctx, "t1", compact.SessionOwner("s1", "u1"), compact.CompactRequest{})
			if err != nil || len(ss.Carried.Negations) != 1 {
				t.Fatalf("compact session: %v %+v", err, ss.Carried)
			}
			if err := eng.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := memento.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			v, err := again.Summaries.Verify(ctx, "t1", s.SummaryID)
			if err != nil || !v.OK {
				t.Fatalf("verify after reopen: %v %+v", err, v)
			}
		})
	}
}
