package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mementohq/memento/run"
)

var _ run.Store = (*DB)(nil)

const (
	runColumns = `tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, state, state_revision,
	lease_owner, lease_epoch, lease_expires_at, parent_run_id, parent_revision,
	created_at, updated_at, chain_head, verified_seq, spent`
	// runColumnsNoState reads the same shape without the state, which can be
	// large and which a commit replaces anyway.
	runColumnsNoState = `tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, '' AS state, state_revision,
	lease_owner, lease_epoch, lease_expires_at, parent_run_id, parent_revision,
	created_at, updated_at, chain_head, verified_seq, spent`
)

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanRun(sc rowScanner) (run.Run, error) {
	var (
		r       run.Run
		status  string
		state   []byte
		expires sql.NullInt64
		created int64
		updated int64
		spent   sql.NullString
	)
	err := sc.Scan(&r.TenantID, &r.RunID, &r.WorkflowName, &r.WorkflowVersion, &r.StateSchemaVersion,
		&status, &r.StatusReason, &r.NextStep, &state, &r.StateRevision,
		&r.LeaseOwner, &r.LeaseEpoch, &expires, &r.ParentRunID, &r.ParentRevision,
		&created, &updated, &r.Chain, &r.VerifiedSeq, &spent)
	if err != nil {
		return run.Run{}, err
	}
	if spent.Valid {
		r.Spent = map[string]int64{}
		if err := json.Unmarshal([]byte(spent.String), &r.Spent); err != nil {
			return run.Run{}, fmt.Errorf("read spend totals: %w", err)
		}
	}
	r.Status = run.Status(status)
	r.State = json.RawMessage(state)
	if expires.Valid {
		t := fromMicros(expires.Int64)
		r.LeaseExpiresAt = &t
	}
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
	return r, nil
}

// querier is what reads need from either a pool or a transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func getRun(ctx context.Context, q querier, tenantID, runID string) (run.Run, error) {
	return getRunCols(ctx, q, runColumns, tenantID, runID)
}

func getRunCols(ctx context.Context, q querier, cols, tenantID, runID string) (run.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+cols+` FROM runs WHERE tenant_id = ? AND run_id = ?`, tenantID, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return run.Run{}, run.ErrNotFound
	}
	return r, err
}

// runExists reports a missing run as ErrNotFound, for lists that are empty.
func runExists(ctx context.Context, q querier, tenantID, runID string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE tenant_id = ? AND run_id = ?`, tenantID, runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return run.ErrNotFound
	}
	return err
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// spentText is the spent column of m (NULL: unknown).
func spentText(m map[string]int64) any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func insertRun(ctx context.Context, tx *sql.Tx, r run.Run, idemKey, digest string) error {
	var expires any
	if r.LeaseExpiresAt != nil {
		expires = r.LeaseExpiresAt.UnixMicro()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`, idempotency_key, request_digest)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.TenantID, r.RunID, r.WorkflowName, r.WorkflowVersion, r.StateSchemaVersion,
		string(r.Status), r.StatusReason, r.NextStep, string(r.State), r.StateRevision,
		r.LeaseOwner, r.LeaseEpoch, expires, r.ParentRunID, r.ParentRevision,
		r.CreatedAt.UnixMicro(), r.UpdatedAt.UnixMicro(), r.Chain, r.VerifiedSeq, spentText(r.Spent),
		nullIfEmpty(idemKey), digest)
	return err
}

// insertEvent writes ev's Change (a snapshot in state, or a delta with
// state ”) and computes its chain from prev, which it sets on ev.
func insertEvent(ctx context.Context, tx *sql.Tx, tenantID, runID, prev string, ev *run.Event) error {
	ev.Chain = run.ChainNext(prev, *ev)
	state, delta := string(ev.Change), any(nil)
	if !ev.Snapshot {
		state, delta = "", string(ev.Change)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt,
		payload, state, delta, next_step, status, state_schema_version, created_at, chain)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenantID, runID, ev.Seq, ev.EventType, ev.StepID, ev.Attempt,
		string(ev.Payload), state, delta, ev.NextStep, string(ev.Status), ev.StateSchemaVersion, ev.CreatedAt.UnixMicro(), ev.Chain)
	return err
}

// CreateRun inserts a run at revision 1 with its run.created event; see run.Store.
func (db *DB) CreateRun(ctx context.Context, nr run.NewRun) (run.Run, bool, error) {
	r := nr.Run
	now := fromMicros(db.nowMicros())
	r.StateRevision = 1
	if r.Status == "" {
		r.Status = run.StatusRunning
	}
	if len(r.State) == 0 {
		r.State = json.RawMessage(`{}`)
	}
	if r.StateSchemaVersion == 0 {
		r.StateSchemaVersion = 1
	}
	r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = "", 0, nil
	if nr.LeaseOwner != "" {
		exp := fromMicros(now.UnixMicro() + nr.LeaseTTL.Microseconds())
		r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = nr.LeaseOwner, 1, &exp
	}
	r.CreatedAt, r.UpdatedAt = now, now
	r.Spent, r.VerifiedSeq = map[string]int64{}, 0
	payload, err := json.Marshal(map[string]any{
		"workflow_name": r.WorkflowName, "workflow_version": r.WorkflowVersion,
		"state_schema_version": r.StateSchemaVersion,
	})
	if err != nil {
		return run.Run{}, false, err
	}
	var existing run.Run
	created := false
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		if nr.IdempotencyKey != "" {
			var id, digest string
			err := tx.QueryRowContext(ctx, `SELECT run_id, request_digest FROM runs WHERE tenant_id = ? AND idempotency_key = ?`,
				r.TenantID, nr.IdempotencyKey).Scan(&id, &digest)
			switch {
			case err == nil:
				if digest != nr.RequestDigest {
					return run.ErrIdempotencyMismatch
				}
				existing, err = getRun(ctx, tx, r.TenantID, id)
				return err
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if err := runExists(ctx, tx, r.TenantID, r.RunID); err == nil {
			return run.ErrAlreadyExists
		} else if !errors.Is(err, run.ErrNotFound) {
			return err
		}
		if err := checkSchema(ctx, tx, r.TenantID, r, run.StoreCommit{Schema: nr.Schema}); err != nil {
			return err
		}
		ev := run.Event{
			Seq: 1, EventType: run.EventRunCreated, Payload: payload, CreatedAt: now,
			State: r.State, NextStep: r.NextStep, Status: r.Status, StateSchemaVersion: r.StateSchemaVersion,
			Change: r.State, Snapshot: true,
		}
		r.Chain = run.ChainNext("", ev)
		if err := insertRun(ctx, tx, r, nr.IdempotencyKey, nr.RequestDigest); err != nil {
			return err
		}
		created = true
		return insertEvent(ctx, tx, r.TenantID, r.RunID, "", &ev)
	})
	if err != nil {
		return run.Run{}, false, err
	}
	if !created {
		return existing, false, nil
	}
	return r, true, nil
}

// GetRun returns the run; see run.Store.
func (db *DB) GetRun(ctx context.Context, tenantID, runID string) (run.Run, error) {
	r, err := getRun(ctx, db.r, tenantID, runID)
	if err != nil {
		return run.Run{}, err
	}
	return r, nil
}

// ListRuns returns a keyset page of runs; see run.Store.
func (db *DB) ListRuns(ctx context.Context, tenantID string, f run.ListFilter) ([]run.Run, error) {
	var (
		where = []string{"tenant_id = ?"}
		args  = []any{tenantID}
	)
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if f.WorkflowName != "" {
		where = append(where, "workflow_name = ?")
		args = append(args, f.WorkflowName)
	}
	if f.AfterRunID != "" || !f.AfterCreated.IsZero() {
		where = append(where, "(created_at, run_id) > (?, ?)")
		args = append(args, f.AfterCreated.UnixMicro(), f.AfterRunID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	args = append(args, limit)
	rows, err := db.r.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at, run_id LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []run.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ListEvents returns events after afterSeq, without snapshots; see run.Store.
func (db *DB) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+eventColumns+`
		FROM run_events WHERE tenant_id = ? AND run_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		tenantID, runID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []run.Event{}
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		// Every event row has its run, so only an empty page needs this check.
		if err := runExists(ctx, db.r, tenantID, runID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// eventColumns is what scanEvent reads. A row from before compact history
// has its state and no delta: a snapshot.
const eventColumns = `seq, event_type, step_id, attempt, payload, created_at, next_step, status,
	state_schema_version, coalesce(delta, state), delta IS NULL, chain`

// rebuildColumns is eventColumns for the rows a state is rebuilt from: only
// the last row (seq ?4) brings its payload, the others (deltas) their change.
var rebuildColumns = strings.Replace(eventColumns, "payload,", "CASE WHEN seq = ?4 THEN payload ELSE '' END,", 1)

func scanEvent(sc rowScanner) (run.Event, error) {
	var (
		ev              run.Event
		payload, change []byte
		status          string
		created         int64
	)
	if err := sc.Scan(&ev.Seq, &ev.EventType, &ev.StepID, &ev.Attempt, &payload, &created,
		&ev.NextStep, &status, &ev.StateSchemaVersion, &change, &ev.Snapshot, &ev.Chain); err != nil {
		return run.Event{}, err
	}
	ev.Payload = json.RawMessage(payload)
	ev.Change = json.RawMessage(change)
	ev.Status = run.Status(status)
	ev.CreatedAt = fromMicros(created)
	return ev, nil
}

// snapshotBase is the seq of the snapshot at or before seq.
func snapshotBase(seq int64) int64 {
	if seq < run.SnapshotEvery {
		return 1
	}
	return seq - seq%run.SnapshotEvery
}

// getEvent reads the event at seq and the events back to the snapshot it
// is rebuilt from (at most run.SnapshotEvery rows).
func getEvent(ctx context.Context, q querier, tenantID, runID string, seq int64) (run.Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+rebuildColumns+`
		FROM run_events WHERE tenant_id = ?1 AND run_id = ?2 AND seq BETWEEN ?3 AND ?4 ORDER BY seq`,
		tenantID, runID, snapshotBase(seq), seq)
	if err != nil {
		return run.Event{}, err
	}
	defer rows.Close()
	var evs []run.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return run.Event{}, err
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return run.Event{}, err
	}
	if len(evs) == 0 || evs[len(evs)-1].Seq != seq {
		if err := runExists(ctx, q, tenantID, runID); err != nil {
			return run.Event{}, err
		}
		return run.Event{}, run.ErrRevisionNotFound
	}
	base := -1
	for i, ev := range evs {
		if ev.Snapshot {
			base = i
		}
	}
	if base < 0 {
		return run.Event{}, fmt.Errorf("no snapshot at or before seq %d", seq)
	}
	deltas := make([]json.RawMessage, 0, len(evs)-base-1)
	for _, ev := range evs[base+1:] {
		deltas = append(deltas, ev.Change)
	}
	ev := evs[len(evs)-1]
	if ev.State, err = run.ApplyDeltas(evs[base].Change, deltas); err != nil {
		return run.Event{}, err
	}
	return ev, nil
}

// GetEvent returns one event with its snapshot; see run.Store.
func (db *DB) GetEvent(ctx context.Context, tenantID, runID string, seq int64) (run.Event, error) {
	ev, err := getEvent(ctx, db.r, tenantID, runID, seq)
	if err != nil {
		return run.Event{}, fmt.Errorf("event %d: %w", seq, err)
	}
	return ev, nil
}

// leaseHeld reports whether the run's lease is held at now (micros).
func leaseHeld(r run.Run, now int64) bool {
	return r.LeaseOwner != "" && r.LeaseExpiresAt != nil && r.LeaseExpiresAt.UnixMicro() > now
}

// AcquireLease takes or renews the lease; see run.Store.
func (db *DB) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (run.Lease, error) {
	var l run.Lease
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := getRunCols(ctx, tx, runColumnsNoState, tenantID, runID)
		if err != nil {
			return err
		}
		if r.Status.Terminal() {
			return fmt.Errorf("%w: status %s", run.ErrRunNotActive, r.Status)
		}
		now := db.nowMicros()
		held := leaseHeld(r, now)
		newEpoch := r.LeaseEpoch
		switch {
		case epoch > 0:
			if !held || r.LeaseOwner != owner || r.LeaseEpoch != epoch {
				return fmt.Errorf("%w: renewing epoch %d", run.ErrLeaseLost, epoch)
			}
		case held && r.LeaseOwner != owner:
			return &run.LeaseHeldError{RunID: runID, Owner: r.LeaseOwner, ExpiresAt: r.LeaseExpiresAt}
		case !held:
			newEpoch = r.LeaseEpoch + 1
		}
		expires := now + ttl.Microseconds()
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET lease_owner = ?, lease_epoch = ?, lease_expires_at = ?
			WHERE tenant_id = ? AND run_id = ?`, owner, newEpoch, expires, tenantID, runID); err != nil {
			return err
		}
		l = run.Lease{Owner: owner, Epoch: newEpoch, ExpiresAt: fromMicros(expires), Revision: r.StateRevision}
		return nil
	})
	if err != nil {
		return run.Lease{}, err
	}
	return l, nil
}

// ReleaseLease frees the lease, keeping the epoch; see run.Store.
func (db *DB) ReleaseLease(ctx context.Context, tenantID, runID, owner string, epoch int64) error {
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET lease_owner = '', lease_expires_at = NULL
			WHERE tenant_id = ? AND run_id = ? AND lease_owner = ? AND lease_epoch = ? AND lease_owner <> ''`,
			tenantID, runID, owner, epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		if err := runExists(ctx, tx, tenantID, runID); err != nil {
			return err
		}
		return run.ErrLeaseLost
	})
	if err != nil {
		return err
	}
	return nil
}

// Commit appends one event and replaces the state in one transaction; see run.Store.
func (db *DB) Commit(ctx context.Context, tenantID, runID string, c run.StoreCommit) (run.Run, run.Event, error) {
	var (
		out run.Run
		ev  run.Event
	)
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		// The old state is read for the delta (the commit replaces it).
		r, err := getRun(ctx, tx, tenantID, runID)
		if err != nil {
			return err
		}
		// Diagnose in the order run.Store documents.
		if !slices.Contains(c.FromStatuses, r.Status) {
			if c.Status != "" {
				return fmt.Errorf("%w: %s -> %s", run.ErrInvalidTransition, r.Status, c.Status)
			}
			return fmt.Errorf("%w: run is %s", run.ErrInvalidTransition, r.Status)
		}
		now := db.nowMicros()
		if !leaseHeld(r, now) || r.LeaseOwner != c.Owner || r.LeaseEpoch != c.Epoch {
			return fmt.Errorf("%w: %s/%d does not hold it", run.ErrLeaseLost, c.Owner, c.Epoch)
		}
		if r.StateRevision != c.ExpectedRevision {
			return &run.RevisionConflictError{RunID: runID, Expected: c.ExpectedRevision, Current: r.StateRevision}
		}
		if err := checkSchema(ctx, tx, tenantID, r, c); err != nil {
			return err
		}
		ts := fromMicros(now)
		oldState := r.State
		r.State = c.State
		if len(r.State) == 0 {
			r.State = json.RawMessage(`{}`)
		}
		r.NextStep = c.NextStep
		if c.Status != "" {
			r.Status = c.Status
		}
		r.StatusReason = c.StatusReason
		if c.StateSchemaVersion != 0 {
			r.StateSchemaVersion = c.StateSchemaVersion
		}
		r.StateRevision++
		r.UpdatedAt = ts
		payload := c.Event.Payload
		if len(payload) == 0 {
			payload = json.RawMessage(`{}`)
		}
		ev = run.Event{
			Seq: r.StateRevision, EventType: c.Event.EventType, StepID: c.Event.StepID, Attempt: c.Event.Attempt,
			Payload: payload, CreatedAt: ts,
			State: r.State, NextStep: r.NextStep, Status: r.Status, StateSchemaVersion: r.StateSchemaVersion,
			Change: r.State, Snapshot: run.IsSnapshotSeq(r.StateRevision),
		}
		if !ev.Snapshot {
			if ev.Change, err = run.MakeDelta(oldState, r.State); err != nil {
				return err
			}
		}
		if err := insertEvent(ctx, tx, tenantID, runID, r.Chain, &ev); err != nil {
			return err
		}
		r.Chain = ev.Chain
		if c.Spend != nil {
			if r.Spent, err = run.AddSpendChecked(r.Spent, c.Spend); err != nil {
				return err
			}
		}
		if c.VerifiedSeq > 0 {
			r.VerifiedSeq = c.VerifiedSeq
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, next_step = ?, status = ?, status_reason = ?,
			state_schema_version = ?, state_revision = ?, updated_at = ?, chain_head = ?, verified_seq = ?, spent = ?,
			finished_at = CASE WHEN ? THEN ? ELSE finished_at END
			WHERE tenant_id = ? AND run_id = ?`,
			string(r.State), r.NextStep, string(r.Status), r.StatusReason, r.StateSchemaVersion, r.StateRevision, now,
			r.Chain, r.VerifiedSeq, spentText(r.Spent), r.Status.Terminal(), now, tenantID, runID); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return run.Run{}, run.Event{}, err
	}
	return out, ev, nil
}

// CreateCheckpoint labels an existing revision; see run.Store.
func (db *DB) CreateCheckpoint(ctx context.Context, tenantID, runID, label string, revision int64) (run.Checkpoint, error) {
	var cp run.Checkpoint
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := getRunCols(ctx, tx, runColumnsNoState, tenantID, runID)
		if err != nil {
			return err
		}
		if revision < 1 || revision > r.StateRevision {
			return fmt.Errorf("%w: %d, run is at %d", run.ErrRevisionNotFound, revision, r.StateRevision)
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM run_checkpoints WHERE tenant_id = ? AND run_id = ? AND label = ?`,
			tenantID, runID, label).Scan(&one)
		if err == nil {
			return run.ErrCheckpointExists
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		now := db.nowMicros()
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_checkpoints (tenant_id, run_id, label, revision, created_at)
			VALUES (?, ?, ?, ?, ?)`, tenantID, runID, label, revision, now); err != nil {
			return err
		}
		cp = run.Checkpoint{Label: label, Revision: revision, CreatedAt: fromMicros(now)}
		return nil
	})
	if err != nil {
		return run.Checkpoint{}, err
	}
	return cp, nil
}

// ListCheckpoints lists a run's checkpoints by revision, then label; see run.Store.
func (db *DB) ListCheckpoints(ctx context.Context, tenantID, runID string, afterRevision int64, afterLabel string, limit int) ([]run.Checkpoint, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.r.QueryContext(ctx, `SELECT label, revision, created_at FROM run_checkpoints
		WHERE tenant_id = ? AND run_id = ? AND (revision, label) > (?, ?)
		ORDER BY revision, label LIMIT ?`, tenantID, runID, afterRevision, afterLabel, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []run.Checkpoint{}
	for rows.Next() {
		var (
			cp      run.Checkpoint
			created int64
		)
		if err := rows.Scan(&cp.Label, &cp.Revision, &created); err != nil {
			return nil, err
		}
		cp.CreatedAt = fromMicros(created)
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		if err := runExists(ctx, db.r, tenantID, runID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetCheckpoint returns one checkpoint by label; see run.Store.
func (db *DB) GetCheckpoint(ctx context.Context, tenantID, runID, label string) (run.Checkpoint, error) {
	cp := run.Checkpoint{Label: label}
	var created int64
	err := db.r.QueryRowContext(ctx, `SELECT revision, created_at FROM run_checkpoints
		WHERE tenant_id = ? AND run_id = ? AND label = ?`, tenantID, runID, label).Scan(&cp.Revision, &created)
	if errors.Is(err, sql.ErrNoRows) {
		err = runExists(ctx, db.r, tenantID, runID)
		if err == nil {
			err = run.ErrCheckpointNotFound
		}
	}
	if err != nil {
		return run.Checkpoint{}, err
	}
	cp.CreatedAt = fromMicros(created)
	return cp, nil
}

// Fork copies a run as it was at revision into a new run; see run.Store.
func (db *DB) Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr run.NewRun) (run.Run, error) {
	var out run.Run
	replayed := false
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if nr.IdempotencyKey != "" {
			var id, digest string
			err := tx.QueryRowContext(ctx, `SELECT run_id, request_digest FROM runs WHERE tenant_id = ? AND idempotency_key = ?`,
				tenantID, nr.IdempotencyKey).Scan(&id, &digest)
			switch {
			case err == nil && digest != nr.RequestDigest:
				return run.ErrIdempotencyMismatch
			case err == nil:
				replayed = true
				out, err = getRun(ctx, tx, tenantID, id)
				return err
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		src, err := getRunCols(ctx, tx, runColumnsNoState, tenantID, sourceRunID)
		if err != nil {
			return err
		}
		if revision < 1 || revision > src.StateRevision {
			return fmt.Errorf("%w: %d, run is at %d", run.ErrRevisionNotFound, revision, src.StateRevision)
		}
		snap, err := getEvent(ctx, tx, tenantID, sourceRunID, revision)
		if err != nil {
			return err
		}
		if err := runExists(ctx, tx, tenantID, nr.Run.RunID); err == nil {
			return fmt.Errorf("%w: %s", run.ErrAlreadyExists, nr.Run.RunID)
		} else if !errors.Is(err, run.ErrNotFound) {
			return err
		}
		now := fromMicros(db.nowMicros())
		status := snap.Status
		if status.Terminal() {
			// A fork exists to go on from a past point; a terminal one could not.
			status = run.StatusSuspended
		}
		r := run.Run{
			TenantID: tenantID, RunID: nr.Run.RunID,
			WorkflowName: src.WorkflowName, WorkflowVersion: src.WorkflowVersion,
			StateSchemaVersion: snap.StateSchemaVersion, Status: status,
			NextStep: snap.NextStep, State: snap.State, StateRevision: revision,
			ParentRunID: sourceRunID, ParentRevision: revision,
			CreatedAt: now, UpdatedAt: now, Chain: snap.Chain,
		}
		if src.Spent != nil {
			if r.Spent, err = sumSpend(ctx, tx, tenantID, sourceRunID, revision); err != nil {
				return err
			}
		}
		if err := insertRun(ctx, tx, r, nr.IdempotencyKey, nr.RequestDigest); err != nil {
			return err
		}
		// The compact rows are copied as stored: deltas stay deltas, chains stay valid.
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt,
				payload, state, delta, next_step, status, state_schema_version, created_at, chain)
			SELECT tenant_id, ?, seq, event_type, step_id, attempt,
				payload, state, delta, next_step, status, state_schema_version, created_at, chain
			FROM run_events WHERE tenant_id = ? AND run_id = ? AND seq <= ?`,
			r.RunID, tenantID, sourceRunID, revision); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return run.Run{}, err
	}
	if replayed {
		return out, fmt.Errorf("%w: %s (idempotency key replayed)", run.ErrAlreadyExists, out.RunID)
	}
	return out, nil
}

// sumSpend totals run.SpendOf over the payloads of events 1..through.
func sumSpend(ctx context.Context, tx *sql.Tx, tenantID, runID string, through int64) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT payload FROM run_events
		WHERE tenant_id = ? AND run_id = ? AND seq <= ? AND instr(payload, '"spend"') > 0`, tenantID, runID, through)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	total := map[string]int64{}
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		total = run.AddSpend(total, run.SpendOf(p))
	}
	return total, rows.Err()
}

// rowKey is a tenant and an id, as selected by the sweeps.
type rowKey struct{ tenant, id string }

// queryKeys collects the (tenant, id) rows a query selects, before the caller
// deletes them in the same transaction.
func queryKeys(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]rowKey, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []rowKey
	for rows.Next() {
		var k rowKey
		if err := rows.Scan(&k.tenant, &k.id); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}
