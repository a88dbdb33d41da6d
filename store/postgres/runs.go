package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/run"
)

var _ run.Store = (*DB)(nil)

// terminalSQL lists the terminal statuses for SQL text.
const terminalSQL = `('completed', 'failed', 'cancelled')`

// runCols is the column list scanRun reads, in its order.
const runCols = `tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, state, state_revision, lease_owner, lease_epoch,
	lease_expires_at, parent_run_id, parent_revision, created_at, updated_at`

func scanRun(row pgx.Row, extra ...any) (run.Run, error) {
	var (
		r      run.Run
		status string
		state  []byte
		exp    *time.Time
	)
	dest := []any{&r.TenantID, &r.RunID, &r.WorkflowName, &r.WorkflowVersion, &r.StateSchemaVersion,
		&status, &r.StatusReason, &r.NextStep, &state, &r.StateRevision, &r.LeaseOwner, &r.LeaseEpoch,
		&exp, &r.ParentRunID, &r.ParentRevision, &r.CreatedAt, &r.UpdatedAt}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return run.Run{}, err
	}
	r.Status = run.Status(status)
	r.State = json.RawMessage(state)
	r.LeaseExpiresAt = utcPtr(exp)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`{}`)
	}
	return b
}

// createRunSQL inserts the run and its run.created event in one statement;
// on any key clash it inserts neither (the event CTE reads from ins).
const createRunSQL = `
WITH ins AS (
	INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
		status, status_reason, next_step, state, state_revision, parent_run_id, parent_revision,
		idempotency_key, request_digest, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5::int, $6::text, $7, $8::text, $9::jsonb, 1, $10, $11,
		NULLIF($12::text, ''), $13, now(), now())
	ON CONFLICT DO NOTHING
	RETURNING created_at
), ev AS (
	INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
		state, next_step, status, state_schema_version, created_at)
	SELECT $1::text, $2::text, 1, '` + run.EventRunCreated + `', '', 0, $14::jsonb, $9::jsonb, $8::text, $6::text, $5::int, created_at
	FROM ins
)
SELECT created_at FROM ins`

// CreateRun inserts the run at revision 1 with its run.created event.
func (db *DB) CreateRun(ctx context.Context, nr run.NewRun) (run.Run, bool, error) {
	r := nr.Run
	if r.Status == "" {
		r.Status = run.StatusRunning
	}
	r.State = orEmptyObject(r.State)
	if r.StateSchemaVersion == 0 {
		r.StateSchemaVersion = 1
	}
	r.StateRevision = 1
	r.LeaseOwner, r.LeaseEpoch, r.LeaseExpiresAt = "", 0, nil
	// The same payload as the embedded backend writes.
	payload, err := json.Marshal(map[string]any{
		"workflow_name": r.WorkflowName, "workflow_version": r.WorkflowVersion,
		"state_schema_version": r.StateSchemaVersion,
	})
	if err != nil {
		return run.Run{}, false, fmt.Errorf("create run %s: %w", r.RunID, err)
	}
	// A clash can vanish between the insert and its diagnosis (the other run
	// deleted by retention); then the insert is simply tried again.
	for attempt := 0; attempt < 3; attempt++ {
		var created time.Time
		err := db.pool.QueryRow(ctx, createRunSQL,
			r.TenantID, r.RunID, r.WorkflowName, r.WorkflowVersion, r.StateSchemaVersion,
			string(r.Status), r.StatusReason, r.NextStep, r.State, r.ParentRunID, r.ParentRevision,
			nr.IdempotencyKey, nr.RequestDigest, json.RawMessage(payload),
		).Scan(&created)
		if err == nil {
			r.CreatedAt = created.UTC()
			r.UpdatedAt = r.CreatedAt
			return r, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return run.Run{}, false, fmt.Errorf("create run %s: %w", r.RunID, err)
		}
		if nr.IdempotencyKey != "" {
			var digest string
			prev, err := scanRun(db.pool.QueryRow(ctx,
				`SELECT `+runCols+`, request_digest FROM runs WHERE tenant_id = $1 AND idempotency_key = $2`,
				r.TenantID, nr.IdempotencyKey), &digest)
			switch {
			case err == nil && digest == nr.RequestDigest:
				return prev, false, nil
			case err == nil:
				return run.Run{}, false, fmt.Errorf("create run %s with idempotency key %q: %w", r.RunID, nr.IdempotencyKey, run.ErrIdempotencyMismatch)
			case !errors.Is(err, pgx.ErrNoRows):
				return run.Run{}, false, fmt.Errorf("create run %s: read run of idempotency key: %w", r.RunID, err)
			}
		}
		exists, err := db.runExists(ctx, r.TenantID, r.RunID)
		if err != nil {
			return run.Run{}, false, fmt.Errorf("create run %s: %w", r.RunID, err)
		}
		if exists {
			return run.Run{}, false, fmt.Errorf("create run %s: %w", r.RunID, run.ErrAlreadyExists)
		}
	}
	return run.Run{}, false, fmt.Errorf("create run %s: %w (the clashing run kept vanishing)", r.RunID, run.ErrAlreadyExists)
}

func (db *DB) runExists(ctx context.Context, tenantID, runID string) (bool, error) {
	var ok bool
	err := db.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM runs WHERE tenant_id = $1 AND run_id = $2)`, tenantID, runID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up run: %w", err)
	}
	return ok, nil
}

// GetRun returns the run as stored.
func (db *DB) GetRun(ctx context.Context, tenantID, runID string) (run.Run, error) {
	r, err := scanRun(db.pool.QueryRow(ctx,
		`SELECT `+runCols+` FROM runs WHERE tenant_id = $1 AND run_id = $2`, tenantID, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Run{}, fmt.Errorf("get run %s: %w", runID, run.ErrNotFound)
	}
	if err != nil {
		return run.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return r, nil
}

// ListRuns pages through a tenant's runs by (created_at, run_id).
func (db *DB) ListRuns(ctx context.Context, tenantID string, f run.ListFilter) ([]run.Run, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	var q strings.Builder
	args := []any{tenantID}
	q.WriteString(`SELECT ` + runCols + ` FROM runs WHERE tenant_id = $1`)
	if f.Status != "" {
		args = append(args, string(f.Status))
		q.WriteString(` AND status = $` + strconv.Itoa(len(args)))
	}
	if f.WorkflowName != "" {
		args = append(args, f.WorkflowName)
		q.WriteString(` AND workflow_name = $` + strconv.Itoa(len(args)))
	}
	if !f.AfterCreated.IsZero() || f.AfterRunID != "" {
		args = append(args, f.AfterCreated, f.AfterRunID)
		q.WriteString(` AND (created_at, run_id) > ($` + strconv.Itoa(len(args)-1) + `, $` + strconv.Itoa(len(args)) + `)`)
	}
	args = append(args, limit)
	q.WriteString(` ORDER BY created_at, run_id LIMIT $` + strconv.Itoa(len(args)))
	rows, err := db.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []run.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// ListEvents returns events after afterSeq in order. The state snapshot is
// left out (GetEvent has it) so that pages of events stay small.
func (db *DB) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.pool.Query(ctx, `
		SELECT seq, event_type, step_id, attempt, payload, created_at, next_step, status, state_schema_version
		FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq > $3
		ORDER BY seq LIMIT $4`, tenantID, runID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []run.Event
	for rows.Next() {
		var (
			ev      run.Event
			payload []byte
			status  string
		)
		if err := rows.Scan(&ev.Seq, &ev.EventType, &ev.StepID, &ev.Attempt, &payload, &ev.CreatedAt,
			&ev.NextStep, &status, &ev.StateSchemaVersion); err != nil {
			return nil, fmt.Errorf("list events of run %s: %w", runID, err)
		}
		ev.Payload = json.RawMessage(payload)
		ev.Status = run.Status(status)
		ev.CreatedAt = ev.CreatedAt.UTC()
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	if len(out) == 0 {
		// Only an empty page pays for telling an unknown run from the end of the log.
		if err := db.mustExist(ctx, tenantID, runID); err != nil {
			return nil, fmt.Errorf("list events of run %s: %w", runID, err)
		}
	}
	return out, nil
}

// mustExist is ErrNotFound when the tenant has no such run.
func (db *DB) mustExist(ctx context.Context, tenantID, runID string) error {
	ok, err := db.runExists(ctx, tenantID, runID)
	if err != nil {
		return err
	}
	if !ok {
		return run.ErrNotFound
	}
	return nil
}

// GetEvent returns the event at seq with its snapshot. A missing run is
// ErrNotFound; a run without that seq is ErrRevisionNotFound.
func (db *DB) GetEvent(ctx context.Context, tenantID, runID string, seq int64) (run.Event, error) {
	var (
		ev             run.Event
		payload, state []byte
		status         string
	)
	err := db.pool.QueryRow(ctx, `
		SELECT seq, event_type, step_id, attempt, payload, created_at, state, next_step, status, state_schema_version
		FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq = $3`, tenantID, runID, seq,
	).Scan(&ev.Seq, &ev.EventType, &ev.StepID, &ev.Attempt, &payload, &ev.CreatedAt, &state,
		&ev.NextStep, &status, &ev.StateSchemaVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		exists, xerr := db.runExists(ctx, tenantID, runID)
		if xerr != nil {
			return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, xerr)
		}
		if !exists {
			return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, run.ErrNotFound)
		}
		return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, run.ErrRevisionNotFound)
	}
	if err != nil {
		return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, err)
	}
	ev.Payload = json.RawMessage(payload)
	ev.State = json.RawMessage(state)
	ev.Status = run.Status(status)
	ev.CreatedAt = ev.CreatedAt.UTC()
	return ev, nil
}

// acquireLeaseSQL takes, extends or renews the lease in one statement, on
// the database clock so that every server instance agrees on expiry. SET
// expressions see the old row, so the CASE compares against the old owner.
const acquireLeaseSQL = `
UPDATE runs SET
	lease_epoch = CASE WHEN lease_owner = $3 AND lease_expires_at > now() THEN lease_epoch ELSE lease_epoch + 1 END,
	lease_owner = $3,
	lease_expires_at = now() + $5::bigint * interval '1 microsecond'
WHERE tenant_id = $1 AND run_id = $2 AND status NOT IN ` + terminalSQL + `
  AND (  ($4::bigint = 0 AND (lease_owner = $3 OR lease_owner = '' OR lease_expires_at IS NULL OR lease_expires_at <= now()))
      OR ($4::bigint > 0 AND lease_owner = $3 AND lease_epoch = $4 AND lease_expires_at > now()))
RETURNING lease_epoch, lease_expires_at`

// AcquireLease takes (epoch 0) or renews (epoch > 0) the run's lease.
func (db *DB) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (run.Lease, error) {
	for attempt := 0; ; attempt++ {
		l := run.Lease{Owner: owner}
		err := db.pool.QueryRow(ctx, acquireLeaseSQL, tenantID, runID, owner, epoch, ttl.Microseconds()).
			Scan(&l.Epoch, &l.ExpiresAt)
		if err == nil {
			l.ExpiresAt = l.ExpiresAt.UTC()
			return l, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return run.Lease{}, fmt.Errorf("lease run %s for %s: %w", runID, owner, err)
		}
		var (
			status, holder string
			until          *time.Time
			live           bool
		)
		err = db.pool.QueryRow(ctx, `
			SELECT status, lease_owner, lease_expires_at, coalesce(lease_expires_at > now(), false)
			FROM runs WHERE tenant_id = $1 AND run_id = $2`, tenantID, runID).Scan(&status, &holder, &until, &live)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return run.Lease{}, fmt.Errorf("lease run %s: %w", runID, run.ErrNotFound)
		case err != nil:
			return run.Lease{}, fmt.Errorf("lease run %s: %w", runID, err)
		case run.Status(status).Terminal():
			return run.Lease{}, fmt.Errorf("lease run %s (%s): %w", runID, status, run.ErrRunNotActive)
		case epoch > 0:
			return run.Lease{}, fmt.Errorf("renew lease of run %s for %s at epoch %d: %w", runID, owner, epoch, run.ErrLeaseLost)
		case live && holder != owner:
			return run.Lease{}, fmt.Errorf("lease run %s for %s: %w", runID, owner, &run.LeaseHeldError{RunID: runID, Owner: holder, ExpiresAt: utcPtr(until)})
		case attempt >= 2:
			// Freed and retaken between our statements, repeatedly.
			return run.Lease{}, fmt.Errorf("lease run %s for %s: %w", runID, owner, run.ErrLeaseHeld)
		}
		// The lease changed hands between the update and this read: try again.
	}
}

// ReleaseLease frees the lease if owner and epoch match, keeping the epoch.
func (db *DB) ReleaseLease(ctx context.Context, tenantID, runID, owner string, epoch int64) error {
	tag, err := db.pool.Exec(ctx, `
		UPDATE runs SET lease_owner = '', lease_expires_at = NULL
		WHERE tenant_id = $1 AND run_id = $2 AND lease_owner = $3 AND lease_epoch = $4`,
		tenantID, runID, owner, epoch)
	if err != nil {
		return fmt.Errorf("release lease of run %s: %w", runID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	exists, err := db.runExists(ctx, tenantID, runID)
	if err != nil {
		return fmt.Errorf("release lease of run %s: %w", runID, err)
	}
	if !exists {
		return fmt.Errorf("release lease of run %s: %w", runID, run.ErrNotFound)
	}
	return fmt.Errorf("release lease of run %s for %s at epoch %d: %w", runID, owner, epoch, run.ErrLeaseLost)
}

// commitSQL is the whole happy path of a commit in one statement (one round
// trip, no explicit transaction): the guarded UPDATE, and the INSERT of the
// event reading from its RETURNING, so that when the guard matches no row
// the INSERT sees no row either and nothing at all changes. A data-modifying
// CTE always runs to completion, so e need not be read by the final SELECT;
// an INSERT error (say a duplicate seq) fails the whole statement.
const commitSQL = `
WITH u AS (
	UPDATE runs SET
		state = $6::jsonb,
		next_step = $7::text,
		status = CASE WHEN $8::text = '' THEN status ELSE $8::text END,
		status_reason = $9,
		state_schema_version = CASE WHEN $10::int > 0 THEN $10::int ELSE state_schema_version END,
		state_revision = state_revision + 1,
		updated_at = now()
	WHERE tenant_id = $1 AND run_id = $2 AND state_revision = $3
	  AND lease_owner = $4 AND lease_epoch = $5 AND lease_expires_at > now()
	  AND status = ANY($11::text[])
	RETURNING workflow_name, workflow_version, state_schema_version, status, state_revision,
		lease_expires_at, parent_run_id, parent_revision, created_at, updated_at
), e AS (
	INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
		state, next_step, status, state_schema_version, created_at)
	SELECT $1::text, $2::text, u.state_revision, $12::text, $13::text, $14::int, $15::jsonb, $6::jsonb, $7::text, u.status, u.state_schema_version, u.updated_at
	FROM u
)
SELECT workflow_name, workflow_version, state_schema_version, status, state_revision,
	lease_expires_at, parent_run_id, parent_revision, created_at, updated_at
FROM u`

// Commit appends the event and replaces the state in one statement, guarded
// by revision, lease and status. Only when it changes nothing does it read
// the run to tell which check failed.
func (db *DB) Commit(ctx context.Context, tenantID, runID string, c run.StoreCommit) (run.Run, run.Event, error) {
	from := make([]string, len(c.FromStatuses))
	for i, s := range c.FromStatuses {
		from[i] = string(s)
	}
	payload := orEmptyObject(c.Event.Payload)
	state := orEmptyObject(c.State)
	r := run.Run{
		TenantID: tenantID, RunID: runID, StatusReason: c.StatusReason, NextStep: c.NextStep,
		State: state, LeaseOwner: c.Owner, LeaseEpoch: c.Epoch,
	}
	var (
		status string
		exp    *time.Time
	)
	err := db.pool.QueryRow(ctx, commitSQL,
		tenantID, runID, c.ExpectedRevision, c.Owner, c.Epoch,
		state, c.NextStep, string(c.Status), c.StatusReason, c.StateSchemaVersion, from,
		c.Event.EventType, c.Event.StepID, c.Event.Attempt, payload,
	).Scan(&r.WorkflowName, &r.WorkflowVersion, &r.StateSchemaVersion, &status, &r.StateRevision,
		&exp, &r.ParentRunID, &r.ParentRevision, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Run{}, run.Event{}, db.diagnoseCommit(ctx, tenantID, runID, c, from)
	}
	if err != nil {
		return run.Run{}, run.Event{}, fmt.Errorf("commit run %s at revision %d: %w", runID, c.ExpectedRevision, err)
	}
	r.Status = run.Status(status)
	r.LeaseExpiresAt = utcPtr(exp)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	ev := run.Event{
		Seq: r.StateRevision, EventType: c.Event.EventType, StepID: c.Event.StepID,
		Attempt: c.Event.Attempt, Payload: payload, CreatedAt: r.UpdatedAt,
		State: state, NextStep: c.NextStep, Status: r.Status, StateSchemaVersion: r.StateSchemaVersion,
	}
	return r, ev, nil
}

// diagnoseCommit names the first failed check of a commit that changed
// nothing, in the order run.Store documents.
func (db *DB) diagnoseCommit(ctx context.Context, tenantID, runID string, c run.StoreCommit, from []string) error {
	var (
		status, owner   string
		revision, epoch int64
		live            bool
	)
	err := db.pool.QueryRow(ctx, `
		SELECT status, state_revision, lease_owner, lease_epoch, coalesce(lease_expires_at > now(), false)
		FROM runs WHERE tenant_id = $1 AND run_id = $2`, tenantID, runID,
	).Scan(&status, &revision, &owner, &epoch, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("commit run %s: %w", runID, run.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("commit run %s at revision %d: %w", runID, c.ExpectedRevision, err)
	}
	allowed := false
	for _, s := range from {
		if s == status {
			allowed = true
			break
		}
	}
	switch {
	case !allowed:
		target := string(c.Status)
		if target == "" {
			target = status
		}
		return fmt.Errorf("commit run %s: %s -> %s: %w", runID, status, target, run.ErrInvalidTransition)
	case owner != c.Owner || epoch != c.Epoch || !live:
		return fmt.Errorf("commit run %s: lease of %s at epoch %d: %w", runID, c.Owner, c.Epoch, run.ErrLeaseLost)
	case revision != c.ExpectedRevision:
		return fmt.Errorf("commit run %s: %w", runID, &run.RevisionConflictError{RunID: runID, Expected: c.ExpectedRevision, Current: revision})
	}
	// Every check passes now, so the run changed between the two statements
	// (a revision only grows and an expired lease never comes back): the
	// caller raced another commit.
	return fmt.Errorf("commit run %s at revision %d: concurrent change: %w", runID, c.ExpectedRevision, run.ErrRevisionConflict)
}

// CreateCheckpoint labels an existing revision of a run.
func (db *DB) CreateCheckpoint(ctx context.Context, tenantID, runID, label string, revision int64) (run.Checkpoint, error) {
	cp := run.Checkpoint{Label: label, Revision: revision}
	err := db.pool.QueryRow(ctx, `
		INSERT INTO run_checkpoints (tenant_id, run_id, label, revision, created_at)
		SELECT tenant_id, run_id, $3, seq, now() FROM run_events
		WHERE tenant_id = $1 AND run_id = $2 AND seq = $4
		ON CONFLICT DO NOTHING
		RETURNING created_at`, tenantID, runID, label, revision).Scan(&cp.CreatedAt)
	if err == nil {
		cp.CreatedAt = cp.CreatedAt.UTC()
		return cp, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return run.Checkpoint{}, fmt.Errorf("checkpoint run %s as %q: %w", runID, label, err)
	}
	var runOK, revOK bool
	err = db.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM runs WHERE tenant_id = $1 AND run_id = $2),
		       EXISTS (SELECT 1 FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq = $3)`,
		tenantID, runID, revision).Scan(&runOK, &revOK)
	switch {
	case err != nil:
		return run.Checkpoint{}, fmt.Errorf("checkpoint run %s as %q: %w", runID, label, err)
	case !runOK:
		return run.Checkpoint{}, fmt.Errorf("checkpoint run %s: %w", runID, run.ErrNotFound)
	case !revOK:
		return run.Checkpoint{}, fmt.Errorf("checkpoint run %s at revision %d: %w", runID, revision, run.ErrRevisionNotFound)
	}
	return run.Checkpoint{}, fmt.Errorf("checkpoint run %s as %q: %w", runID, label, run.ErrCheckpointExists)
}

// ListCheckpoints lists a run's checkpoints by revision, then label.
func (db *DB) ListCheckpoints(ctx context.Context, tenantID, runID string) ([]run.Checkpoint, error) {
	rows, err := db.pool.Query(ctx, `
		SELECT label, revision, created_at FROM run_checkpoints
		WHERE tenant_id = $1 AND run_id = $2 ORDER BY revision, label`, tenantID, runID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []run.Checkpoint
	for rows.Next() {
		var cp run.Checkpoint
		if err := rows.Scan(&cp.Label, &cp.Revision, &cp.CreatedAt); err != nil {
			return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, err)
		}
		cp.CreatedAt = cp.CreatedAt.UTC()
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, err)
	}
	if len(out) == 0 {
		if err := db.mustExist(ctx, tenantID, runID); err != nil {
			return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, err)
		}
	}
	return out, nil
}

// GetCheckpoint returns one checkpoint by label.
func (db *DB) GetCheckpoint(ctx context.Context, tenantID, runID, label string) (run.Checkpoint, error) {
	cp := run.Checkpoint{Label: label}
	err := db.pool.QueryRow(ctx, `
		SELECT revision, created_at FROM run_checkpoints
		WHERE tenant_id = $1 AND run_id = $2 AND label = $3`, tenantID, runID, label).Scan(&cp.Revision, &cp.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		exists, xerr := db.runExists(ctx, tenantID, runID)
		if xerr != nil {
			return run.Checkpoint{}, fmt.Errorf("get checkpoint %q of run %s: %w", label, runID, xerr)
		}
		if !exists {
			return run.Checkpoint{}, fmt.Errorf("get checkpoint %q of run %s: %w", label, runID, run.ErrNotFound)
		}
		return run.Checkpoint{}, fmt.Errorf("get checkpoint %q of run %s: %w", label, runID, run.ErrCheckpointNotFound)
	}
	if err != nil {
		return run.Checkpoint{}, fmt.Errorf("get checkpoint %q of run %s: %w", label, runID, err)
	}
	cp.CreatedAt = cp.CreatedAt.UTC()
	return cp, nil
}

// forkSQL creates the new run from the snapshot at the revision and copies
// events 1..revision, in one statement. The join of runs and run_events is
// on the same tenant and run (colocated). On a clash of the new run id the
// event copy reads no row from ins and inserts nothing.
const forkSQL = `
WITH src AS (
	SELECT r.workflow_name, r.workflow_version, e.state, e.next_step, e.status, e.state_schema_version
	FROM runs r JOIN run_events e ON e.tenant_id = r.tenant_id AND e.run_id = r.run_id
	WHERE r.tenant_id = $1::text AND r.run_id = $2::text AND e.seq = $3::bigint
), ins AS (
	INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
		status, status_reason, next_step, state, state_revision, parent_run_id, parent_revision,
		idempotency_key, request_digest, created_at, updated_at)
	SELECT $1::text, $4::text, workflow_name, workflow_version, state_schema_version,
		CASE WHEN status IN ` + terminalSQL + ` THEN 'suspended' ELSE status END,
		'', next_step, state, $3::bigint, $5::text, $6::bigint, NULLIF($7::text, ''), $8::text, now(), now()
	FROM src
	ON CONFLICT DO NOTHING
	RETURNING ` + runCols + `
), ev AS (
	INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
		state, next_step, status, state_schema_version, created_at)
	SELECT e.tenant_id, ins.run_id, e.seq, e.event_type, e.step_id, e.attempt, e.payload,
		e.state, e.next_step, e.status, e.state_schema_version, e.created_at
	FROM run_events e, ins
	WHERE e.tenant_id = $1 AND e.run_id = $2 AND e.seq <= $3
)
SELECT ` + runCols + ` FROM ins`

// Fork creates nr.Run from the source run's snapshot at revision.
func (db *DB) Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr run.NewRun) (run.Run, error) {
	newID := nr.Run.RunID
	r, err := scanRun(db.pool.QueryRow(ctx, forkSQL, tenantID, sourceRunID, revision, newID,
		nr.Run.ParentRunID, nr.Run.ParentRevision, nr.IdempotencyKey, nr.RequestDigest))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return run.Run{}, fmt.Errorf("fork run %s at revision %d as %s: %w", sourceRunID, revision, newID, err)
	}
	var srcOK, revOK bool
	err = db.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM runs WHERE tenant_id = $1 AND run_id = $2),
		       EXISTS (SELECT 1 FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq = $3)`,
		tenantID, sourceRunID, revision).Scan(&srcOK, &revOK)
	switch {
	case err != nil:
		return run.Run{}, fmt.Errorf("fork run %s at revision %d: %w", sourceRunID, revision, err)
	case !srcOK:
		return run.Run{}, fmt.Errorf("fork run %s: %w", sourceRunID, run.ErrNotFound)
	case !revOK:
		return run.Run{}, fmt.Errorf("fork run %s at revision %d: %w", sourceRunID, revision, run.ErrRevisionNotFound)
	}
	return run.Run{}, fmt.Errorf("fork run %s as %s: %w", sourceRunID, newID, run.ErrAlreadyExists)
}

// DeleteTerminalBefore deletes terminal runs last updated before cutoff,
// with their events and checkpoints. Candidates are found across tenants;
// the deletes then run per tenant (each statement touches one tenant, as a
// distributed database routes best), all sent in one batch.
func (db *DB) DeleteTerminalBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	rows, err := db.pool.Query(ctx, `
		SELECT tenant_id, run_id FROM runs
		WHERE status IN `+terminalSQL+` AND updated_at < $1
		ORDER BY updated_at LIMIT $2`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("find terminal runs before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	byTenant := map[string][]string{}
	var tenants []string
	for rows.Next() {
		var tenant, id string
		if err := rows.Scan(&tenant, &id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("find terminal runs: %w", err)
		}
		if _, ok := byTenant[tenant]; !ok {
			tenants = append(tenants, tenant)
		}
		byTenant[tenant] = append(byTenant[tenant], id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find terminal runs: %w", err)
	}
	if len(tenants) == 0 {
		return 0, nil
	}
	// The status and age are checked again by the DELETE itself, so a run
	// revived or touched since the scan is kept.
	var b pgx.Batch
	for _, tenant := range tenants {
		b.Queue(`
			WITH d AS (
				DELETE FROM runs
				WHERE tenant_id = $1 AND run_id = ANY($2::text[])
				  AND status IN `+terminalSQL+` AND updated_at < $3
				RETURNING run_id
			), de AS (
				DELETE FROM run_events e USING d WHERE e.tenant_id = $1 AND e.run_id = d.run_id
			), dc AS (
				DELETE FROM run_checkpoints c USING d WHERE c.tenant_id = $1 AND c.run_id = d.run_id
			), dop AS (
				DELETE FROM tool_operations o USING d WHERE o.tenant_id = $1 AND o.run_id = d.run_id
			), dap AS (
				DELETE FROM approvals a USING d WHERE a.tenant_id = $1 AND a.run_id = d.run_id
			)
			SELECT count(*) FROM d`, tenant, byTenant[tenant], cutoff)
	}
	br := db.pool.SendBatch(ctx, &b)
	total := 0
	for range tenants {
		var n int
		if err := br.QueryRow().Scan(&n); err != nil {
			_ = br.Close()
			// The batch is one implicit transaction: nothing was deleted.
			return 0, fmt.Errorf("delete terminal runs: %w", err)
		}
		total += n
	}
	if err := br.Close(); err != nil {
		return 0, fmt.Errorf("delete terminal runs: %w", err)
	}
	return total, nil
}
