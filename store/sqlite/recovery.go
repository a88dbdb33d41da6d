package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mementohq/memento/run"
)

// recoverableSQL is the recovery poll; see the PostgreSQL store for the
// design. Each part reads only the rows it returns, through the indexes of
// migration 0015: runs_lease_due up to the store's clock (?3), whose key
// expression and predicate are repeated verbatim (SQLite matches an
// expression index and proves a partial one usable only from terms it
// sees), and run_wakeups_due up to the caller's clock (?4). INDEXED BY
// makes a query that could not use them an error rather than a scan. Due
// wake-ups come as "at:n,at:n".
const recoverableSQL = `
SELECT run_id AS rid, workflow_name, status, lease_expires_at, '', NULL, NULL
FROM runs INDEXED BY runs_lease_due
WHERE tenant_id = ?1 AND status = 'running'
  AND (CASE WHEN lease_owner = '' OR lease_expires_at IS NULL THEN 0 ELSE lease_expires_at END) <= ?3
  AND run_id > ?2
UNION ALL
SELECT d.run_id AS rid, r.workflow_name, r.status, r.lease_expires_at, r.status_reason,
	CASE WHEN ?5 = '' THEN NULL ELSE r.state -> ?5 END, d.w
FROM (
	SELECT run_id, group_concat(wake_at || ':' || n) AS w
	FROM run_wakeups INDEXED BY run_wakeups_due
	WHERE tenant_id = ?1 AND wake_at <= ?4 AND run_id > ?2
	GROUP BY run_id
) d LEFT JOIN runs r ON r.tenant_id = ?1 AND r.run_id = d.run_id
WHERE r.status IS NOT 'running'
ORDER BY rid
LIMIT ?6`

// ListRecoverable returns the runs a recovery loop must look at; see run.Store.
func (db *DB) ListRecoverable(ctx context.Context, tenantID string, q run.RecoveryQuery) ([]run.Recoverable, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	if q.Now.IsZero() {
		q.Now = time.Now()
	}
	path := ""
	if q.ControlKey != "" {
		path = `$."` + q.ControlKey + `"`
	}
	rows, err := db.r.QueryContext(ctx, recoverableSQL, tenantID, q.AfterRunID, db.nowMicros(), q.Now.UnixMicro(), path, limit)
	if err != nil {
		return nil, fmt.Errorf("list recoverable runs: %w", err)
	}
	defer rows.Close()
	var out, stale []run.Recoverable
	for rows.Next() {
		var (
			rc                  run.Recoverable
			wf, st, reason, ctl sql.NullString
			wakes               sql.NullString
			exp                 sql.NullInt64
		)
		if err := rows.Scan(&rc.RunID, &wf, &st, &exp, &reason, &ctl, &wakes); err != nil {
			return nil, fmt.Errorf("list recoverable runs: %w", err)
		}
		rc.TenantID, rc.WorkflowName, rc.Status, rc.StatusReason = tenantID, wf.String, run.Status(st.String), reason.String
		if exp.Valid {
			t := fromMicros(exp.Int64)
			rc.LeaseExpiresAt = &t
		}
		if ctl.Valid {
			rc.Control = json.RawMessage(ctl.String)
		}
		if wakes.Valid {
			if rc.Wakeups, err = parseWakeups(wakes.String); err != nil {
				return nil, fmt.Errorf("list recoverable runs: %w", err)
			}
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

// parseWakeups reads group_concat's "at:n,at:n", in At order.
func parseWakeups(s string) ([]run.Wakeup, error) {
	var out []run.Wakeup
	for _, part := range strings.Split(s, ",") {
		at, n, ok := strings.Cut(part, ":")
		a, err1 := strconv.ParseInt(at, 10, 64)
		c, err2 := strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad wake-up %q", part)
		}
		w := run.Wakeup{At: fromMicros(a), N: c}
		if a == 0 {
			w.At = run.WakeNow
		}
		i := len(out)
		for i > 0 && out[i-1].At.After(w.At) {
			i--
		}
		out = append(out, run.Wakeup{})
		copy(out[i+1:], out[i:])
		out[i] = w
	}
	return out, nil
}

// AckWakeups deletes the run's wake-ups that are still as given; see run.Store.
func (db *DB) AckWakeups(ctx context.Context, tenantID, runID string, wakeups []run.Wakeup) error {
	if len(wakeups) == 0 {
		return nil
	}
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		for _, w := range wakeups {
			if _, err := tx.ExecContext(ctx, `DELETE FROM run_wakeups
				WHERE tenant_id = ? AND run_id = ? AND wake_at = ? AND n = ?`,
				tenantID, runID, w.At.UnixMicro(), w.N); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ack wake-ups of run %s: %w", runID, err)
	}
	return nil
}

// retentionCursor is where the last full batch of a sweep stopped, so the
// next batch of the same sweep (same cutoff) starts there.
type retentionCursor struct {
	mu     sync.Mutex
	cutoff time.Time
	at     int64
	tenant string
	run    string
	valid  bool
}

// DeleteTerminalBefore deletes one batch of runs finished before cutoff,
// walking runs_finished; see run.Store. One process sweeps at a time: the
// batch is a write transaction, and the file has a single writer.
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
	type key struct {
		tenant, id string
		at         int64
	}
	var keys []key
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		q := `SELECT tenant_id, run_id, finished_at FROM runs
			WHERE finished_at IS NOT NULL AND finished_at < ?`
		args := []any{cutoff.UnixMicro()}
		if cur.valid {
			q += ` AND (finished_at, tenant_id, run_id) > (?, ?, ?)`
			args = append(args, cur.at, cur.tenant, cur.run)
		}
		rows, err := tx.QueryContext(ctx, q+` ORDER BY finished_at, tenant_id, run_id LIMIT ?`, append(args, limit)...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.tenant, &k.id, &k.at); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Explicit deletes, tenant first, rather than relying on the cascade:
		// the same statements a distributed backend would run per shard.
		// Run summaries go with their run.
		for _, q := range []string{
			`DELETE FROM summaries WHERE tenant_id = ? AND owner_kind = 'run' AND owner_id = ?`,
			`DELETE FROM run_events WHERE tenant_id = ? AND run_id = ?`,
			`DELETE FROM run_checkpoints WHERE tenant_id = ? AND run_id = ?`,
			`DELETE FROM run_wakeups WHERE tenant_id = ? AND run_id = ?`,
			`DELETE FROM tool_operations WHERE tenant_id = ? AND run_id = ?`,
			`DELETE FROM approvals WHERE tenant_id = ? AND run_id = ?`,
			`DELETE FROM runs WHERE tenant_id = ? AND run_id = ?`,
		} {
			st, err := tx.PrepareContext(ctx, q)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if _, err := st.ExecContext(ctx, k.tenant, k.id); err != nil {
					st.Close()
					return err
				}
			}
			st.Close()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete runs finished before %s: %w", cutoff.UTC().Format(time.RFC3339Nano), err)
	}
	if len(keys) < limit {
		cur.valid = false
		return len(keys), nil
	}
	last := keys[len(keys)-1]
	cur.cutoff, cur.at, cur.tenant, cur.run, cur.valid = cutoff, last.at, last.tenant, last.id, true
	return len(keys), nil
}
