package sqlite_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/workflow/control"
)

// The recovery poll reads only the rows it returns: both of its parts are
// range searches up to now of an index that holds no live lease, no
// finished run and no wake-up due later (issue 7: the poll of a healthy
// system must not grow with them), and it returns exactly the due runs
// from among a thousand of each of those.
func TestRecoveryPollReadsOnlyDueRows(t *testing.T) {
	ctx := t.Context()
	db := openTemp(t)
	w := db.SQL()
	now := time.Now()
	hour := time.Hour.Microseconds()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 1000),
			v(k, s, o, e, c) AS (VALUES ('live', 'running', 'w', ?1 + ?2, 1000),
				('done', 'completed', '', NULL, 1000), ('wait', 'suspended', '', NULL, 1000),
				('free', 'running', '', NULL, 5), ('lost', 'running', 'w', ?1 - 1000000, 2))
		INSERT INTO runs (tenant_id, run_id, workflow_name, state_schema_version, status, state, state_revision,
			created_at, updated_at, finished_at, lease_owner, lease_epoch, lease_expires_at)
		SELECT 't', k || '-' || printf('%05d', i), 'wf', 1, s, '{}', 1, ?1, ?1,
			CASE WHEN s = 'completed' THEN ?1 END, o, 1, e
		FROM v JOIN g ON g.i <= v.c`, []any{now.UnixMicro(), hour}},
		{`DELETE FROM run_wakeups`, nil},
		{`INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
		SELECT 't', run_id, ?1 FROM runs WHERE status = 'suspended'`, []any{now.UnixMicro() + 24*hour}},
		{`INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
		SELECT 't', run_id, 0 FROM runs WHERE run_id IN ('wait-00001', 'wait-00500', 'wait-01000')`, nil},
	} {
		if _, err := w.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	const due = 5 + 2 + 3
	got, err := db.ListRecoverable(ctx, "t", run.RecoveryQuery{Now: now, ControlKey: control.Key, Limit: run.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != due {
		t.Fatalf("poll returned %d runs, want %d: %+v", len(got), due, got)
	}
	rows, err := w.QueryContext(ctx, "EXPLAIN QUERY PLAN "+sqlite.RecoverableSQL, "t", "", now.UnixMicro(), now.UnixMicro(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, want := range []string{
		"SEARCH runs USING INDEX runs_lease_due (tenant_id=? AND <expr><?)",
		"SEARCH run_wakeups USING INDEX run_wakeups_due (tenant_id=? AND wake_at<?)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the poll's plan has no %q:\n%s", want, text)
		}
	}
}
