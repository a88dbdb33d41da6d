package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/run"
)

// recoverableSQL is the recovery poll: running runs with a free or expired
// lease (compared with the database clock), then suspended runs with due
// wake-ups. Each part reads only the rows it returns: the first the range
// up to now() of runs_lease_due (0015; running runs keyed by when their
// lease stops being live, so finished runs and live leases are not in the
// range), the second the range up to $3 of run_wakeups_due (0015; future
// timed wake-ups are not in it). The second part also returns due wake-ups
// of runs no longer active (status NULL or terminal), which the caller
// deletes.
const recoverableSQL = `
SELECT run_id, workflow_name, status, lease_expires_at, '' AS status_reason, NULL::jsonb AS control,
	NULL::timestamptz[] AS ats, NULL::bigint[] AS ns
FROM runs
WHERE tenant_id = $1 AND status = 'running' AND run_id > $2
  AND ` + leaseDueSQL + ` <= now()
UNION ALL
SELECT d.run_id, r.workflow_name, r.status, r.lease_expires_at, r.status_reason,
	CASE WHEN $4::text = '' THEN NULL ELSE r.state -> $4::text END, d.ats, d.ns
FROM (
	SELECT run_id, array_agg(wake_at ORDER BY wake_at) AS ats, array_agg(n ORDER BY wake_at) AS ns
	FROM run_wakeups
	WHERE tenant_id = $1 AND wake_at <= $3 AND run_id > $2
	GROUP BY run_id
) d LEFT JOIN runs r ON r.tenant_id = $1 AND r.run_id = d.run_id
WHERE r.status IS DISTINCT FROM 'running'
ORDER BY run_id
LIMIT $5`

// leaseDueSQL is when a running run's lease stops being live: the key of
// runs_lease_due, spelled as its migration does so the planner matches it.
const leaseDueSQL = `(CASE WHEN lease_owner = '' OR lease_expires_at IS NULL THEN '-infinity'::timestamptz ELSE lease_expires_at END)`

// ListRecoverable returns the runs a recovery loop must look at; see run.Store.
func (db *DB) ListRecoverable(ctx context.Context, tenantID string, q run.RecoveryQuery) ([]run.Recoverable, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	if q.Now.IsZero() {
		q.Now = time.Now()
	}
	// Planned for each call's values (an unnamed statement), never as a
	// cached generic plan: not knowing $3, a generic plan estimates a third
	// of the wake-ups due and reads the whole table instead of
	// run_wakeups_due, which would make the poll grow with the suspended
	// runs waiting for a timed wake-up.
	rows, err := db.pool.Query(ctx, recoverableSQL, pgx.QueryExecModeExec,
		tenantID, q.AfterRunID, q.Now, q.ControlKey, limit)
	if err != nil {
		return nil, fmt.Errorf("list recoverable runs: %w", err)
	}
	defer rows.Close()
	var (
		out   []run.Recoverable
		stale []run.Recoverable
	)
	for rows.Next() {
		var (
			rc      run.Recoverable
			wf, st  *string
			exp     *time.Time
			control []byte
			ats     []time.Time
			ns      []int64
			reason  *string
		)
		if err := rows.Scan(&rc.RunID, &wf, &st, &exp, &reason, &control, &ats, &ns); err != nil {
			return nil, fmt.Errorf("list recoverable runs: %w", err)
		}
		rc.TenantID = tenantID
		if wf != nil {
			rc.WorkflowName = *wf
		}
		if st != nil {
			rc.Status = run.Status(*st)
		}
		if reason != nil {
			rc.StatusReason = *reason
		}
		rc.LeaseExpiresAt = utcPtr(exp)
		if control != nil {
			rc.Control = json.RawMessage(control)
		}
		for i := range ats {
			rc.Wakeups = append(rc.Wakeups, run.Wakeup{At: ats[i].UTC(), N: ns[i]})
		}
		if rc.Status != run.StatusRunning && rc.Status != run.StatusSuspended {
			stale = append(stale, rc)
			continue
		}
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list recoverable runs: %w", err)
	}
	rows.Close()
	for _, rc := range stale {
		if err := db.AckWakeups(ctx, tenantID, rc.RunID, rc.Wakeups); err != nil {
			return nil, fmt.Errorf("list recoverable runs: drop wake-ups of finished run: %w", err)
		}
	}
	return out, nil
}

// AckWakeups deletes the run's wake-ups that are still as given; see run.Store.
// The (wake_at, n) match is rechecked on a row updated concurrently, so a
// wake-up written again meanwhile survives.
func (db *DB) AckWakeups(ctx context.Context, tenantID, runID string, wakeups []run.Wakeup) error {
	if len(wakeups) == 0 {
		return nil
	}
	ats := make([]time.Time, len(wakeups))
	ns := make([]int64, len(wakeups))
	for i, w := range wakeups {
		ats[i], ns[i] = w.At, w.N
	}
	if _, err := db.pool.Exec(ctx, `
		DELETE FROM run_wakeups w USING unnest($3::timestamptz[], $4::bigint[]) AS a(at, n)
		WHERE w.tenant_id = $1 AND w.run_id = $2 AND w.wake_at = a.at AND w.n = a.n`,
		tenantID, runID, ats, ns); err != nil {
		return fmt.Errorf("ack wake-ups of run %s: %w", runID, err)
	}
	return nil
}

// retentionLockKey is the first half of the advisory lock one retention
// batch holds; the second is a hash of the schema, as for migrations.
const retentionLockKey int32 = 0x4d455254 // "MERT"

// retentionCursor is where the last full batch of a sweep stopped, so the
// next batch of the same sweep (same cutoff) starts there instead of walking
// the index entries of runs it has just deleted again.
type retentionCursor struct {
	mu     sync.Mutex
	cutoff time.Time
	at     time.Time
	tenant string
	run    string
	valid  bool
}

// deleteFinishedSQL deletes one batch of the oldest finished runs with
// everything that lives with them, in one statement. The candidates are
// read from runs_finished in index order after the cursor.
const deleteFinishedSQL = `
WITH c AS (
	SELECT tenant_id, run_id, finished_at FROM runs
	WHERE finished_at IS NOT NULL AND finished_at < $1
	  AND (NOT $3::bool OR (finished_at, tenant_id, run_id) > ($4::timestamptz, $5::text, $6::text))
	ORDER BY finished_at, tenant_id, run_id
	LIMIT $2
), d AS (
	DELETE FROM runs r USING c
	WHERE r.tenant_id = c.tenant_id AND r.run_id = c.run_id
	RETURNING r.tenant_id, r.run_id, c.finished_at
), de AS (
	DELETE FROM run_events e USING d WHERE e.tenant_id = d.tenant_id AND e.run_id = d.run_id
), dc AS (
	DELETE FROM run_checkpoints x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id
), dw AS (
	DELETE FROM run_wakeups x USING d WHERE x.tenant_id = d.tenant_id AND x.run_id = d.run_id
), dop AS (
	DELETE FROM tool_operations o USING d WHERE o.tenant_id = d.tenant_id AND o.run_id = d.run_id
), dap AS (
	DELETE FROM approvals a USING d WHERE a.tenant_id = d.tenant_id AND a.run_id = d.run_id
), dsu AS (
	-- Run summaries live with the run.
	DELETE FROM summaries s USING d WHERE s.tenant_id = d.tenant_id AND s.owner_kind = 'run' AND s.owner_id = d.run_id
)
SELECT count(*), max(finished_at),
	(array_agg(tenant_id ORDER BY finished_at DESC, tenant_id DESC, run_id DESC))[1],
	(array_agg(run_id ORDER BY finished_at DESC, tenant_id DESC, run_id DESC))[1]
FROM d`

// DeleteTerminalBefore deletes one batch of runs finished before cutoff;
// see run.Store. The batch holds a transaction-scoped advisory lock: while
// another instance sweeps, it returns 0 at once instead of deleting beside it.
func (db *DB) DeleteTerminalBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	cur := &db.retention
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if !cur.cutoff.Equal(cutoff) {
		cur.valid = false
	}
	n, err := db.deleteFinished(ctx, cutoff, limit, cur)
	if err != nil {
		return 0, fmt.Errorf("delete runs finished before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

func (db *DB) deleteFinished(ctx context.Context, cutoff time.Time, limit int, cur *retentionCursor) (int, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }() // no-op after Commit
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`,
		retentionLockKey).Scan(&mine); err != nil {
		return 0, fmt.Errorf("take retention lock: %w", err)
	}
	if !mine {
		return 0, nil
	}
	var (
		n          int
		lastAt     *time.Time
		lastTenant *string
		lastRun    *string
	)
	err = tx.QueryRow(ctx, deleteFinishedSQL, cutoff, limit, cur.valid, cur.at, cur.tenant, cur.run).
		Scan(&n, &lastAt, &lastTenant, &lastRun)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	if n < limit || lastAt == nil {
		// The sweep is done; the next one starts from the oldest again, and
		// finds what finished meanwhile with an older time (a commit whose
		// transaction began before this batch read the index).
		cur.valid = false
		return n, nil
	}
	cur.cutoff, cur.at, cur.tenant, cur.run, cur.valid = cutoff, *lastAt, *lastTenant, *lastRun, true
	return n, nil
}
