package refund_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/workflow"
)

type fixture struct {
	WorkflowName       string          `json:"workflow_name"`
	WorkflowVersion    string          `json:"workflow_version"`
	StateSchemaVersion int             `json:"state_schema_version"`
	NextStep           string          `json:"next_step"`
	State              json.RawMessage `json:"state"`
}

// seedFixture stores a checkpoint as older (or newer) code wrote it: through
// a run service that knows nothing of the refund schemas.
func seedFixture(t *testing.T, store run.Store, file, runID string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	old := run.NewService(store, run.Options{})
	if _, _, err := old.Create(context.Background(), "default", run.CreateRequest{
		RunID: runID, WorkflowName: f.WorkflowName, WorkflowVersion: f.WorkflowVersion,
		StateSchemaVersion: f.StateSchemaVersion, NextStep: f.NextStep, State: f.State,
	}, ""); err != nil {
		t.Fatalf("seed %s: %v", file, err)
	}
}

// A stored checkpoint of state schema v1 is migrated to v2 on resume and
// the run finishes; one of an unknown newer schema is refused explicitly.
func TestFixtureCheckpoints(t *testing.T) {
	for _, mk := range []func(*testing.T) backend{sqliteBackend, postgresBackend} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			pay, err := refund.OpenPayments(filepath.Join(t.TempDir(), "ledger.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer pay.Close()
			srv := httptest.NewServer(pay.Handler())
			defer srv.Close()
			e := b.open(t)
			defer e.Close()
			seedFixture(t, e.Runs.Store(), "checkpoint_v1.json", "refund-order-0004")
			seedFixture(t, e.Runs.Store(), "checkpoint_v9.json", "refund-order-0003")

			client := refund.NewClient(srv.URL)
			eng := workflow.New(e.Runs, e.Ops, workflow.Options{Approver: refund.Policy(15000)})
			if err := eng.RegisterTool(refund.Tool(client)); err != nil {
				t.Fatal(err)
			}
			if err := eng.Register(refund.Workflow(client, services(e), refund.Options{})); err != nil {
				t.Fatal(err)
			}

			r, err := eng.Drive(ctx, "refund-order-0004")
			if err != nil || r.Status != run.StatusCompleted || r.StateSchemaVersion != 2 {
				t.Fatalf("v1 checkpoint: %s v%d %q %v", r.Status, r.StateSchemaVersion, r.StatusReason, err)
			}
			var st struct {
				Order   map[string]any  `json:"order"`
				Outcome string          `json:"outcome"`
				Dec     refund.Decision `json:"decision"`
			}
			_ = json.Unmarshal(r.State, &st)
			if st.Order["amount_cents"] != float64(12676) || st.Order["amount"] != nil || st.Outcome != refund.OutcomeRefunded || st.Dec.DecisionID != "fixture-decision" {
				t.Fatalf("state after migration and resume: %s", r.State)
			}
			evs := events(t, e, "refund-order-0004")
			var migrated, verified bool
			for _, ev := range evs {
				migrated = migrated || ev.EventType == run.EventStateMigrated
				if ev.EventType == resume.EventVerified && strings.Contains(string(ev.Payload), "migrated v1 -") {
					verified = true
				}
			}
			if !migrated || !verified {
				t.Fatalf("events: %s", eventSummary(evs))
			}
			rs, _ := client.Refunds(ctx)
			if len(rs) != 1 || rs[0].OrderID != "order-0004" || rs[0].AmountCents != 12676 {
				t.Fatalf("ledger: %+v", rs)
			}

			_, err = eng.Drive(ctx, "refund-order-0003")
			r, _ = e.Runs.Get(ctx, "default", "refund-order-0003")
			if !errors.Is(err, resume.ErrRefused) || !errors.Is(err, run.ErrNoMigrationPath) && !strings.Contains(err.Error(), "no migration path") || r.Status != run.StatusSuspended ||
				!strings.Contains(r.StatusReason, resume.CheckSchema) || !strings.Contains(r.StatusReason, "v9") || r.StateSchemaVersion != 9 {
				t.Fatalf("v9 checkpoint: err %v, run %s v%d %q", err, r.Status, r.StateSchemaVersion, r.StatusReason)
			}
			if rs, _ := client.Refunds(ctx); len(rs) != 1 {
				t.Fatalf("the refused run sent a refund: %+v", rs)
			}
		})
	}
}
