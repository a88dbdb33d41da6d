package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/sqlite"
)

// floorSQLiteUpdate and floorSQLiteInsert are the floor of the embedded
// backend: the run's guarded UPDATE and the event's INSERT, in one
// IMMEDIATE transaction on the store's own write connection (same driver,
// same pragmas), with nothing around them.
const (
	floorSQLiteUpdate = `UPDATE runs SET state = ?, next_step = ?, status_reason = '',
		state_revision = state_revision + 1, updated_at = ?
	WHERE tenant_id = ? AND run_id = ? AND state_revision = ?
	  AND lease_owner = ? AND lease_epoch = ? AND lease_expires_at > ?
	  AND status IN ('running', 'suspended')`
	floorSQLiteInsert = `INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt,
		payload, state, next_step, status, state_schema_version, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

type sqliteBench struct {
	dir string
	db  *sqlite.DB
	svc *run.Service
	seq int
}

// openSQLite opens the embedded store in a new temporary directory.
func openSQLite(ctx context.Context) (*sqliteBench, error) {
	dir, err := os.MkdirTemp("", "memento-bench-sqlite-")
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	db, err := sqlite.OpenDir(ctx, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	return &sqliteBench{dir: dir, db: db, svc: run.NewService(db, run.Options{})}, nil
}

func (s *sqliteBench) close() {
	_ = s.db.Close()
	_ = os.RemoveAll(s.dir)
}

func (s *sqliteBench) engine() target { return engineTarget(TargetSQLiteEngine, s.svc) }

func (s *sqliteBench) floor() target {
	w := s.db.SQL()
	return target{name: TargetSQLiteFloor, prepare: func(ctx context.Context, n int) ([]stepper, error) {
		s.seq++
		runs, err := newRuns(ctx, s.svc, "sqlite-floor-"+strconv.Itoa(s.seq), n)
		if err != nil {
			return nil, err
		}
		out := make([]stepper, n)
		for i, lr := range runs {
			out[i] = func(ctx context.Context) error {
				state, payload, stepID, next := stepInput(lr.rev)
				if err := sqliteFloorCommit(ctx, w, lr, state, payload, stepID, next); err != nil {
					return fmt.Errorf("floor commit of run %s at revision %d: %w", lr.id, lr.rev, err)
				}
				lr.rev++
				return nil
			}
		}
		return out, nil
	}}
}

func sqliteFloorCommit(ctx context.Context, w *sql.DB, lr leasedRun, state, payload []byte, stepID, next string) error {
	now := time.Now().UnixMicro()
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	res, err := tx.ExecContext(ctx, floorSQLiteUpdate, string(state), next, now,
		Tenant, lr.id, lr.rev, lr.lease.Owner, lr.lease.Epoch, now)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("refused by its guard (%d rows, %v)", n, err)
	}
	if _, err := tx.ExecContext(ctx, floorSQLiteInsert, Tenant, lr.id, lr.rev+1, EventType, stepID, 1,
		string(payload), string(state), next, string(run.StatusRunning), 1, now); err != nil {
		return err
	}
	return tx.Commit()
}
