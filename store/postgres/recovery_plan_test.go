package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/workflow/control"
)

// The recovery poll reads only the rows it returns: beside a few due runs,
// a thousand running runs holding a live lease, a thousand suspended runs
// whose wake-up is due tomorrow and a thousand finished runs cost it no row
// read (issue 7: the poll of a healthy system must not grow with them).
func TestRecoveryPollReadsOnlyDueRows(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	pool := db.Pool()
	const bulk = 1000
	for _, q := range []string{
		// Live leases, finished runs, and the runs a poll must return: five
		// running runs with a free lease, two with an expired one.
		`INSERT INTO runs (tenant_id, run_id, workflow_name, state_schema_version, status, state, state_revision,
			created_at, updated_at, finished_at, lease_owner, lease_epoch, lease_expires_at)
		SELECT 't', k || '-' || lpad(g::text, 5, '0'), 'wf', 1, s, '{}'::jsonb, 1, now(), now(),
			CASE WHEN s = 'completed' THEN now() END, o, 1, e
		FROM (VALUES ('live', 'running', 'w', now() + interval '1 hour', 1000),
		             ('done', 'completed', '', NULL, 1000),
		             ('wait', 'suspended', '', NULL, 1000),
		             ('free', 'running', '', NULL, 5),
		             ('lost', 'running', 'w', now() - interval '1 second', 2)) v(k, s, o, e, c),
			generate_series(1, v.c) g`,
		// The inserted suspended runs were woken once (their insert):
		// drop that, arm a timed wake-up for tomorrow on each, and make
		// three of them due now.
		`DELETE FROM run_wakeups`,
		`INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
		SELECT 't', run_id, now() + interval '1 day' FROM runs WHERE status = 'suspended'`,
		`INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
		SELECT 't', run_id, 'epoch' FROM runs WHERE run_id IN ('wait-00001', 'wait-00500', 'wait-01000')`,
		`ANALYZE runs`,
		`ANALYZE run_wakeups`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const due = 5 + 2 + 3
	now := time.Now()
	got, err := db.ListRecoverable(ctx, "t", run.RecoveryQuery{Now: now, ControlKey: control.Key, Limit: run.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != due {
		t.Fatalf("poll returned %d runs, want %d: %+v", len(got), due, got)
	}
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	var raw []byte
	if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+postgres.RecoverableSQL, pgx.QueryExecModeExec,
		"t", "", now, control.Key, run.MaxListLimit).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("plan %s: %v", raw, err)
	}
	read := plan[0].Plan.rowsRead()
	// Each due run once from its index, each woken run once more from
	// runs by primary key.
	if read > due+3 {
		t.Fatalf("the poll read %.0f rows of runs and run_wakeups to return %d (bulk of %d each); plan:\n%s", read, due, bulk, raw)
	}
}

// planNode is what the plan tests read of an EXPLAIN (FORMAT JSON) node.
type planNode struct {
	Type             string     `json:"Node Type"`
	Relation         string     `json:"Relation Name"`
	Index            string     `json:"Index Name"`
	ActualRows       float64    `json:"Actual Rows"`
	ActualLoops      float64    `json:"Actual Loops"`
	RemovedByFilter  float64    `json:"Rows Removed by Filter"`
	RemovedByRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans            []planNode `json:"Plans"`
}

// rowsRead counts the rows the scans of runs and run_wakeups produced or
// threw away, over every loop.
func (n planNode) rowsRead() float64 {
	total := 0.0
	if n.Relation == "runs" || n.Relation == "run_wakeups" {
		total += (n.ActualRows + n.RemovedByFilter + n.RemovedByRecheck) * n.ActualLoops
	}
	for _, c := range n.Plans {
		total += c.rowsRead()
	}
	return total
}
