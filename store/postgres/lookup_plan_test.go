package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/postgres"
)

// A statement that finds one run by (tenant_id, run_id) reads it by the
// primary key, whatever the size of the table: with the table small or not
// analyzed (a new deployment), the list indexes' estimates tied with the
// primary key's and the tie went to one of them (runs_workflow_created,
// created last), a generic plan every commit of the connection then kept,
// each walking all the tenant's entries in that index (issue 7, commit
// speed; migration 0022). Checked on the generic plans, as the store's
// prepared statements run after their first executions.
func TestRunLookupsUseThePrimaryKey(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	svc := run.NewService(db, run.Options{})
	// A few runs, one finished, and no ANALYZE: a new deployment's table.
	for i := range 4 {
		id := "run-" + strconv.Itoa(i)
		r, l, _, err := svc.CreateLeased(ctx, "t", run.CreateRequest{RunID: id, WorkflowName: "wf", State: json.RawMessage(`{}`), NextStep: "a"}, "", "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, _, err := svc.Commit(ctx, "t", id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: json.RawMessage(`{}`),
				Status: run.StatusCompleted, Event: run.EventInput{EventType: "step.completed"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(phase string) {
		t.Helper()
		conn, err := db.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = conn.Exec(ctx, "RESET plan_cache_mode") }()
		param := regexp.MustCompile(`\$(\d+)`)
		for name, sql := range postgres.RunLookupSQL {
			n := 0
			for _, m := range param.FindAllStringSubmatch(sql, -1) {
				if k, _ := strconv.Atoi(m[1]); k > n {
					n = k
				}
			}
			if _, err := conn.Exec(ctx, "PREPARE lookup AS "+sql); err != nil {
				t.Fatalf("%s: prepare %s: %v", phase, name, err)
			}
			var raw []byte
			err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE lookup("+strings.TrimSuffix(strings.Repeat("NULL,", n), ",")+")").Scan(&raw)
			if _, derr := conn.Exec(ctx, "DEALLOCATE lookup"); derr != nil && err == nil {
				err = derr
			}
			if err != nil {
				t.Fatalf("%s: explain %s: %v", phase, name, err)
			}
			var plan []struct {
				Plan planNode `json:"Plan"`
			}
			if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
				t.Fatalf("%s: plan of %s %s: %v", phase, name, raw, err)
			}
			scans := plan[0].Plan.runsScans()
			if len(scans) != 1 || scans[0] != "Index Scan using runs_pkey" {
				t.Errorf("%s: %s reads runs by %v, want the primary key only", phase, name, scans)
			}
		}
	}
	check("new table")
	// And once analyzed, with many runs of the tenant in each list index.
	if _, err := db.Pool().Exec(ctx, `
		INSERT INTO runs (tenant_id, run_id, workflow_name, state_schema_version, status, state, state_revision, created_at, updated_at)
		SELECT 't', 'bulk-' || g, 'wf', 1, CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'running' END, '{}', 1, now(), now()
		FROM generate_series(1, 2000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, "ANALYZE runs"); err != nil {
		t.Fatal(err)
	}
	check("analyzed table")
	// The lists still read their indexes (the predicate is theirs to state).
	for index, f := range map[string]run.ListFilter{
		"runs_created":          {Limit: 10, AfterCreated: time.Now().Add(-time.Hour), AfterRunID: "bulk-1"},
		"runs_status_created":   {Limit: 10, Status: run.StatusRunning},
		"runs_workflow_created": {Limit: 10, WorkflowName: "wf"},
	} {
		q, args := postgres.ListRunsQuery("t", f)
		var raw []byte
		if err := db.Pool().QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+q, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&raw); err != nil {
			t.Fatalf("explain list %+v: %v", f, err)
		}
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("plan of list %+v %s: %v", f, raw, err)
		}
		if scans := plan[0].Plan.runsScans(); len(scans) != 1 || scans[0] != "Index Scan using "+index {
			t.Errorf("list %+v reads runs by %v, want %s", f, scans, index)
		}
	}
}

// runsScans names each scan of runs in the plan ("Index Scan using x").
func (n planNode) runsScans() []string {
	var out []string
	if n.Relation == "runs" && n.Type != "ModifyTable" {
		s := n.Type
		if n.Index != "" {
			s += fmt.Sprintf(" using %s", n.Index)
		}
		out = append(out, s)
	}
	for _, c := range n.Plans {
		out = append(out, c.runsScans()...)
	}
	return out
}
