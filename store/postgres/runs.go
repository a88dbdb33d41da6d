package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mementohq/memento/run"
)

var _ run.Store = (*DB)(nil)

// terminalSQL lists the terminal statuses for SQL text.
const terminalSQL = `('completed', 'failed', 'cancelled')`

// runCols is the column list scanRun reads, in its order.
const runCols = `tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, state, state_revision, lease_owner, lease_epoch,
	lease_expires_at, parent_run_id, parent_revision, created_at, updated_at,
	chain_head, verified_seq, spent`

func scanRun(row pgx.Row, extra ...any) (run.Run, error) {
	var (
		r      run.Run
		status string
		state  []byte
		exp    *time.Time
		spent  []byte
	)
	dest := []any{&r.TenantID, &r.RunID, &r.WorkflowName, &r.WorkflowVersion, &r.StateSchemaVersion,
		&status, &r.StatusReason, &r.NextStep, &state, &r.StateRevision, &r.LeaseOwner, &r.LeaseEpoch,
		&exp, &r.ParentRunID, &r.ParentRevision, &r.CreatedAt, &r.UpdatedAt,
		&r.Chain, &r.VerifiedSeq, &spent}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return run.Run{}, err
	}
	if err := decodeSpent(spent, &r.Spent); err != nil {
		return run.Run{}, err
	}
	r.Status = run.Status(status)
	r.State = json.RawMessage(state)
	r.LeaseExpiresAt = utcPtr(exp)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, nil
}

// decodeSpent reads the spent column (NULL: unknown, nil map).
func decodeSpent(b []byte, dst *map[string]int64) error {
	if b == nil {
		*dst = nil
		return nil
	}
	m := map[string]int64{}
	if err := json.Unmarshal(b, &m); err == nil {
		*dst = m
		return nil
	}
	// Totals past int64, which an earlier version could store (its SQL
	// went on in numeric), read as the nearest int64: the run (and the
	// tenant's run list) stays readable, and a budget it passed stays
	// passed.
	var raw map[string]json.Number
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("read spend totals: %w", err)
	}
	m = make(map[string]int64, len(raw))
	for k, n := range raw {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(n.String(), 64)
			if ferr != nil {
				return fmt.Errorf("read spend totals: %s: %w", k, err)
			}
			switch {
			case f >= math.MaxInt64:
				v = math.MaxInt64
			case f <= math.MinInt64:
				v = math.MinInt64
			default:
				v = int64(f)
			}
		}
		m[k] = v
	}
	*dst = m
	return nil
}

// addSpendExact is run.AddSpend, or false if a total leaves int64, where
// SQL's numeric would go on.
func addSpendExact(total, s map[string]int64) (map[string]int64, bool) {
	if total == nil {
		return nil, true
	}
	out := maps.Clone(total)
	for k, v := range s {
		t := out[k]
		if (v > 0 && t > math.MaxInt64-v) || (v < 0 && t < math.MinInt64-v) {
			return nil, false
		}
		out[k] = t + v
	}
	return out, true
}

func encodeSpend(m map[string]int64) any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return json.RawMessage(b)
}

// chainSQL is run.ChainNext in SQL over text expressions: prev, then each
// field as "<octet length>:<text>,". Each expression is evaluated twice, so
// callers pass columns or values computed once. One concat builds the input
// (a chain of || would copy it once per piece).
func chainSQL(prev string, fields ...string) string {
	var b strings.Builder
	b.WriteString("encode(sha256(convert_to(concat(" + prev)
	for _, f := range fields {
		// The byte length in UTF-8, whatever the database's encoding.
		b.WriteString(", octet_length(convert_to(" + f + ", 'UTF8')), ':', " + f + ", ','")
	}
	b.WriteString("), 'UTF8')), 'hex')")
	return b.String()
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
var createRunSQL = `
WITH t AS (
	SELECT $14::jsonb::text AS payload_t, $9::jsonb::text AS state_t, $5::int::text AS version_t
), ins AS (
	INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
		status, status_reason, next_step, state, state_revision, parent_run_id, parent_revision,
		idempotency_key, request_digest, created_at, updated_at, chain_head, spent,
		lease_owner, lease_epoch, lease_expires_at)
	SELECT $1, $2, $3, $4, $5::int, $6::text, $7, $8::text, $9::jsonb, 1, $10, $11,
		NULLIF($12::text, ''), $13, now(), now(),
		` + chainSQL("''", "'1'", "'"+run.EventRunCreated+"'", "''", "'0'", "t.payload_t", "'S'", "t.state_t", "$8::text", "$6::text", "t.version_t") + `,
		'{}'::jsonb,
		$16::text, CASE WHEN $16::text = '' THEN 0 ELSE 1 END,
		CASE WHEN $16::text <> '' THEN now() + $17::bigint * interval '1 microsecond' END
	FROM t
	-- The schema condition of commitSQL (schemaGuardSQL), for the version
	-- the run is created at.
	WHERE coalesce((SELECT bool_or(w.version = $5::int AND w.digest = $15::text)
	                FROM workflow_schemas w
	                WHERE w.tenant_id = $1 AND w.workflow_name = $3), true)
	ON CONFLICT DO NOTHING
	RETURNING created_at, chain_head, lease_expires_at
), ev AS (
	INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
		state, next_step, status, state_schema_version, created_at, chain)
	SELECT $1::text, $2::text, 1, '` + run.EventRunCreated + `', '', 0, $14::jsonb, $9::jsonb, $8::text, $6::text, $5::int, created_at, chain_head
	FROM ins
)
SELECT created_at, chain_head, lease_expires_at FROM ins`

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
	if nr.LeaseOwner != "" {
		r.LeaseOwner, r.LeaseEpoch = nr.LeaseOwner, 1
	}
	// The same payload as the embedded backend writes.
	payload, err := json.Marshal(map[string]any{
		"workflow_name": r.WorkflowName, "workflow_version": r.WorkflowVersion,
		"state_schema_version": r.StateSchemaVersion,
	})
	if err != nil {
		return run.Run{}, false, err
	}
	// A clash can vanish between the insert and its diagnosis (the other run
	// deleted by retention); then the insert is simply tried again.
	for attempt := 0; attempt < 3; attempt++ {
		var created time.Time
		err := db.pool.QueryRow(ctx, createRunSQL,
			r.TenantID, r.RunID, r.WorkflowName, r.WorkflowVersion, r.StateSchemaVersion,
			string(r.Status), r.StatusReason, r.NextStep, r.State, r.ParentRunID, r.ParentRevision,
			nr.IdempotencyKey, nr.RequestDigest, json.RawMessage(payload),
			nr.Schema.Digest, r.LeaseOwner, nr.LeaseTTL.Microseconds(),
		).Scan(&created, &r.Chain, &r.LeaseExpiresAt)
		if err == nil {
			r.LeaseExpiresAt = utcPtr(r.LeaseExpiresAt)
			r.CreatedAt = created.UTC()
			r.UpdatedAt = r.CreatedAt
			r.Spent, r.VerifiedSeq = map[string]int64{}, 0
			if db.commits != nil && len(r.State) <= commitCacheMaxState {
				if _, members, ok := jsonbObject(r.State); ok {
					db.commits.put(r.TenantID, r.RunID, &commitEntry{rev: 1, chain: r.Chain,
						status: string(r.Status), version: r.StateSchemaVersion, members: members, spent: map[string]int64{}})
				}
			}
			return r, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return run.Run{}, false, err
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
				return run.Run{}, false, run.ErrIdempotencyMismatch
			case !errors.Is(err, pgx.ErrNoRows):
				return run.Run{}, false, fmt.Errorf("read run of idempotency key: %w", err)
			}
		}
		exists, err := db.runExists(ctx, r.TenantID, r.RunID)
		if err != nil {
			return run.Run{}, false, err
		}
		if exists {
			return run.Run{}, false, run.ErrAlreadyExists
		}
		need, err := db.createSchemaRequired(ctx, r.TenantID, r.WorkflowName, r.StateSchemaVersion, nr.Schema.Digest)
		if err != nil {
			return run.Run{}, false, err
		}
		if need != nil {
			return run.Run{}, false, need
		}
	}
	return run.Run{}, false, fmt.Errorf("%w (the clashing run kept vanishing)", run.ErrAlreadyExists)
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
		return run.Run{}, run.ErrNotFound
	}
	if err != nil {
		return run.Run{}, err
	}
	return r, nil
}

// ListRuns pages through a tenant's runs by (created_at, run_id).
func (db *DB) ListRuns(ctx context.Context, tenantID string, f run.ListFilter) ([]run.Run, error) {
	q, args := listRunsQuery(tenantID, f)
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []run.Run
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

// listRunsQuery is ListRuns' statement and its arguments.
func listRunsQuery(tenantID string, f run.ListFilter) (string, []any) {
	limit := f.Limit
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	var q strings.Builder
	args := []any{tenantID}
	// run_id <> '' (always true) is the predicate of the list indexes
	// (migration 0022): it lets this query, and only the queries that
	// state it, read them.
	q.WriteString(`SELECT ` + runCols + ` FROM runs WHERE tenant_id = $1 AND run_id <> ''`)
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
	return q.String(), args
}

// ListEvents returns events after afterSeq in order. The state snapshot is
// left out (GetEvent has it) so that pages of events stay small.
func (db *DB) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.pool.Query(ctx, `
		SELECT `+eventCols+`
		FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq > $3
		ORDER BY seq LIMIT $4`, tenantID, runID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []run.Event
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
		// Only an empty page pays for telling an unknown run from the end of the log.
		if err := db.mustExist(ctx, tenantID, runID); err != nil {
			return nil, err
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

// eventCols is the column list scanEvent reads, in its order. A row from
// before compact history has its state and no delta: a snapshot.
const eventCols = `seq, event_type, step_id, attempt, payload, created_at, next_step, status,
	state_schema_version, coalesce(delta, state), delta IS NULL, chain`

// rebuildCols is eventCols for the rows a state is rebuilt from: only the
// last row (seq $4) brings its payload, the others (deltas) their change.
var rebuildCols = strings.Replace(eventCols, "payload,", "CASE WHEN seq = $4 THEN payload END,", 1)

func scanEvent(row pgx.Row) (run.Event, error) {
	var (
		ev              run.Event
		payload, change []byte
		status          string
	)
	if err := row.Scan(&ev.Seq, &ev.EventType, &ev.StepID, &ev.Attempt, &payload, &ev.CreatedAt,
		&ev.NextStep, &status, &ev.StateSchemaVersion, &change, &ev.Snapshot, &ev.Chain); err != nil {
		return run.Event{}, err
	}
	ev.Payload = json.RawMessage(payload)
	ev.Change = json.RawMessage(change)
	ev.Status = run.Status(status)
	ev.CreatedAt = ev.CreatedAt.UTC()
	return ev, nil
}

// snapshotBase is the seq of the snapshot at or before seq: events at 1 and
// at multiples of run.SnapshotEvery keep the whole state.
func snapshotBase(seq int64) int64 {
	if seq < run.SnapshotEvery {
		return 1
	}
	return seq - seq%run.SnapshotEvery
}

// rebuild folds events (in seq order, the first a snapshot at or before the
// last) into the last one's state.
func rebuild(evs []run.Event) (run.Event, error) {
	base := -1
	for i, ev := range evs {
		if ev.Snapshot {
			base = i
		}
	}
	if base < 0 {
		return run.Event{}, fmt.Errorf("no snapshot at or before seq %d", evs[len(evs)-1].Seq)
	}
	deltas := make([]json.RawMessage, 0, len(evs)-base-1)
	for _, ev := range evs[base+1:] {
		deltas = append(deltas, ev.Change)
	}
	state, err := run.ApplyDeltas(evs[base].Change, deltas)
	if err != nil {
		return run.Event{}, err
	}
	last := evs[len(evs)-1]
	last.State = state
	return last, nil
}

// getEvent reads the event at seq and the events back to the snapshot it
// is rebuilt from (at most run.SnapshotEvery rows), in one query.
func getEvent(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, tenantID, runID string, seq int64) (run.Event, bool, error) {
	rows, err := q.Query(ctx, `
		SELECT `+rebuildCols+`
		FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq BETWEEN $3 AND $4
		ORDER BY seq`, tenantID, runID, snapshotBase(seq), seq)
	if err != nil {
		return run.Event{}, false, err
	}
	defer rows.Close()
	var evs []run.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return run.Event{}, false, err
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return run.Event{}, false, err
	}
	if len(evs) == 0 || evs[len(evs)-1].Seq != seq {
		return run.Event{}, false, nil
	}
	ev, err := rebuild(evs)
	return ev, err == nil, err
}

// GetEvent returns the event at seq with the state rebuilt at it. A missing
// run is ErrNotFound; a run without that seq is ErrRevisionNotFound.
func (db *DB) GetEvent(ctx context.Context, tenantID, runID string, seq int64) (run.Event, error) {
	ev, ok, err := getEvent(ctx, db.pool, tenantID, runID, seq)
	if err != nil {
		return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, err)
	}
	if !ok {
		exists, xerr := db.runExists(ctx, tenantID, runID)
		if xerr != nil {
			return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, xerr)
		}
		if !exists {
			return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, run.ErrNotFound)
		}
		return run.Event{}, fmt.Errorf("get event %d of run %s: %w", seq, runID, run.ErrRevisionNotFound)
	}
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
RETURNING lease_epoch, lease_expires_at, state_revision`

// AcquireLease takes (epoch 0) or renews (epoch > 0) the run's lease.
func (db *DB) AcquireLease(ctx context.Context, tenantID, runID, owner string, epoch int64, ttl time.Duration) (run.Lease, error) {
	for attempt := 0; ; attempt++ {
		l := run.Lease{Owner: owner}
		err := db.pool.QueryRow(ctx, acquireLeaseSQL, tenantID, runID, owner, epoch, ttl.Microseconds()).
			Scan(&l.Epoch, &l.ExpiresAt, &l.Revision)
		if err == nil {
			l.ExpiresAt = l.ExpiresAt.UTC()
			return l, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return run.Lease{}, err
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
			return run.Lease{}, run.ErrNotFound
		case err != nil:
			return run.Lease{}, err
		case run.Status(status).Terminal():
			return run.Lease{}, fmt.Errorf("it is %s: %w", status, run.ErrRunNotActive)
		case epoch > 0:
			return run.Lease{}, fmt.Errorf("lease of %s at epoch %d: %w", owner, epoch, run.ErrLeaseLost)
		case live && holder != owner:
			return run.Lease{}, &run.LeaseHeldError{RunID: runID, Owner: holder, ExpiresAt: utcPtr(until)}
		case attempt >= 2:
			// Freed and retaken between our statements, repeatedly.
			return run.Lease{}, run.ErrLeaseHeld
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
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	exists, err := db.runExists(ctx, tenantID, runID)
	if err != nil {
		return err
	}
	if !exists {
		return run.ErrNotFound
	}
	return fmt.Errorf("lease of %s at epoch %d: %w", owner, epoch, run.ErrLeaseLost)
}

// commitSQL is the whole happy path of a commit in one statement (one round
// trip, no explicit transaction): the guarded UPDATE, and the INSERT of the
// event reading from its RETURNING, so that when the guard matches no row
// the INSERT sees no row either and nothing at all changes. A data-modifying
// CTE always runs to completion, so e need not be read by the final SELECT;
// an INSERT error (say a duplicate seq) fails the whole statement.
//
// The delta and the chain are computed in the SET list, whose column
// references are the row version being replaced: the one the WHERE guard
// pinned at state_revision = $3 (under READ COMMITTED the guard is
// re-checked on the newest version before it is updated), so they are
// exactly against the expected revision with a single scan of the row and
// no join. RETURNING sees only new values, so the delta reaches the event
// INSERT through the last_change column (0008), set with the chain head in
// one sub-select so that the delta is computed once.
var commitSQL = `
WITH u AS (
	UPDATE runs SET
		state = $6::jsonb,
		next_step = $7::text,
		status = CASE WHEN $8::text = '' THEN status ELSE $8::text END,
		status_reason = $9,
		state_schema_version = CASE WHEN $10::int > 0 THEN $10::int ELSE state_schema_version END,
		state_revision = state_revision + 1,
		updated_at = now(),
		finished_at = CASE WHEN $8::text IN ` + terminalSQL + ` THEN now() ELSE finished_at END,
		(last_change, chain_head) = (
			SELECT x.delta, ` + chainSQL("runs.chain_head", "($3::bigint + 1)::text", "$12::text", "$13::text", "$14::int::text",
	"x.payload_t", "(CASE WHEN $16::bool THEN 'S' ELSE 'D' END)", "x.change_t", "$7::text", "x.new_status", "x.new_version") + `
			FROM (SELECT d.delta, coalesce(d.delta, $6::jsonb)::text AS change_t, $15::jsonb::text AS payload_t,
				CASE WHEN $8::text = '' THEN runs.status ELSE $8::text END AS new_status,
				(CASE WHEN $10::int > 0 THEN $10::int ELSE runs.state_schema_version END)::text AS new_version
			FROM (SELECT CASE WHEN $16::bool THEN NULL ELSE jsonb_build_object(
				's', coalesce((SELECT jsonb_object_agg(n.key, n.value) FROM jsonb_each($6::jsonb) n
					WHERE (runs.state -> n.key)::text IS DISTINCT FROM n.value::text), '{}'::jsonb),
				'd', coalesce((SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(runs.state) k
					WHERE NOT ($6::jsonb ? k)), '[]'::jsonb)) END AS delta
				-- OFFSET 0 keeps the planner from pulling d and x up, which
				-- would compute their values again at each use.
				OFFSET 0) d OFFSET 0) x),
		-- Each total back to bigint: one out of its range fails the
		-- statement (22003), so the commit is refused and changes nothing
		-- rather than keep a total that no run read can decode.
		-- (COALESCE: the aggregate of no totals is NULL, not {}.)
		spent = CASE WHEN $17::jsonb IS NULL OR spent IS NULL THEN spent ELSE COALESCE((
			SELECT jsonb_object_agg(t.key, t.value::bigint)
			FROM jsonb_each_text(memento_add_spend(spent, $17::jsonb)) t), '{}'::jsonb) END,
		verified_seq = CASE WHEN $18::bigint > 0 THEN $18::bigint ELSE verified_seq END
	WHERE tenant_id = $1 AND run_id = $2 AND state_revision = $3
	  AND lease_owner = $4 AND lease_epoch = $5 AND lease_expires_at > now()
	  AND status = ANY($11::text[])` + schemaGuardSQL + `
	RETURNING workflow_name, workflow_version, state_schema_version, status, state_revision,
		lease_expires_at, parent_run_id, parent_revision, created_at, updated_at,
		chain_head, verified_seq, spent, last_change
), e AS (
	INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
		state, delta, next_step, status, state_schema_version, created_at, chain)
	SELECT $1::text, $2::text, u.state_revision, $12::text, $13::text, $14::int, $15::jsonb,
		CASE WHEN u.last_change IS NULL THEN $6::jsonb END, u.last_change,
		$7::text, u.status, u.state_schema_version, u.updated_at, u.chain_head
	FROM u
)
SELECT workflow_name, workflow_version, state_schema_version, status, state_revision,
	lease_expires_at, parent_run_id, parent_revision, created_at, updated_at,
	chain_head, verified_seq, spent, last_change
FROM u`

// commitFastSQL is commitSQL with the delta ($16, NULL for a snapshot) and
// the new chain head ($20) computed in Go from the commit cache's entry
// (commitcache.go): the same statement without the JSONB walk, re-encoding
// and hashing. The entry was computed against chain head $21, status $22
// and schema version $23, so the guard also requires those; the chain head
// covers every event, so the state the delta was computed against is the
// row's. The spend totals are added in Go too (memento_add_spend is a
// PL/pgSQL call per commit): with $17 true the row's spent must be $25, the
// totals the entry holds, and becomes $24, those plus the commit's spend.
var commitFastSQL = `
WITH u AS (
	UPDATE runs SET
		state = $6::jsonb,
		next_step = $7::text,
		status = CASE WHEN $8::text = '' THEN status ELSE $8::text END,
		status_reason = $9,
		state_schema_version = CASE WHEN $10::int > 0 THEN $10::int ELSE state_schema_version END,
		state_revision = state_revision + 1,
		updated_at = now(),
		finished_at = CASE WHEN $8::text IN ` + terminalSQL + ` THEN now() ELSE finished_at END,
		last_change = $16::jsonb,
		chain_head = $20::text,
		spent = CASE WHEN $17::bool THEN $24::jsonb ELSE spent END,
		verified_seq = CASE WHEN $18::bigint > 0 THEN $18::bigint ELSE verified_seq END
	WHERE tenant_id = $1 AND run_id = $2 AND state_revision = $3
	  AND lease_owner = $4 AND lease_epoch = $5 AND lease_expires_at > now()
	  AND status = ANY($11::text[])
	  AND chain_head = $21::text AND status = $22::text AND state_schema_version = $23::int
	  AND (NOT $17::bool OR spent IS NOT DISTINCT FROM $25::jsonb)` + schemaGuardSQL + `
	RETURNING workflow_name, workflow_version, state_schema_version, status, state_revision,
		lease_expires_at, parent_run_id, parent_revision, created_at, updated_at,
		verified_seq
), e AS (
	INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
		state, delta, next_step, status, state_schema_version, created_at, chain)
	SELECT $1::text, $2::text, u.state_revision, $12::text, $13::text, $14::int, $15::jsonb,
		CASE WHEN $16::jsonb IS NULL THEN $6::jsonb END, $16::jsonb,
		$7::text, u.status, u.state_schema_version, u.updated_at, $20::text
	FROM u
)
SELECT workflow_name, workflow_version, state_schema_version, status, state_revision,
	lease_expires_at, parent_run_id, parent_revision, created_at, updated_at,
	verified_seq
FROM u`

// errCommitRaced is diagnoseCommit's answer when every check passes now.
var errCommitRaced = fmt.Errorf("concurrent change: %w", run.ErrRevisionConflict)

// Commit appends the event and replaces the state in one statement, guarded
// by revision, lease and status. Only when it changes nothing does it read
// the run to tell which check failed. When the commit cache holds the run
// at the expected revision the statement is commitFastSQL (delta and chain
// from Go), otherwise commitSQL.
func (db *DB) Commit(ctx context.Context, tenantID, runID string, c run.StoreCommit) (run.Run, run.Event, error) {
	from := make([]string, len(c.FromStatuses))
	for i, s := range c.FromStatuses {
		from[i] = string(s)
	}
	payload := orEmptyObject(c.Event.Payload)
	state := orEmptyObject(c.State)
	snapshot := run.IsSnapshotSeq(c.ExpectedRevision + 1)
	var (
		stateText []byte
		members   []jsonbMember
		canonical bool
	)
	if db.commits != nil && len(state) <= commitCacheMaxState {
		stateText, members, canonical = jsonbObject(state)
	}
	if canonical {
		e := db.commits.get(tenantID, runID, c.ExpectedRevision)
		if e == nil && !snapshot && len(state) >= warmMinState {
			e = db.warm(ctx, tenantID, runID, c.ExpectedRevision)
		}
		if e != nil {
			r, ev, err, done := db.commitFast(ctx, tenantID, runID, c, from, payload, state, stateText, members, snapshot, e)
			if done {
				return r, ev, err
			}
		}
	}
	r, ev, err := db.commitSQL(ctx, tenantID, runID, c, from, payload, state, snapshot)
	if db.commits != nil {
		if err == nil && canonical {
			db.commits.put(tenantID, runID, &commitEntry{rev: r.StateRevision, chain: r.Chain,
				status: string(r.Status), version: r.StateSchemaVersion, members: members, spent: maps.Clone(r.Spent)})
		} else {
			db.commits.drop(tenantID, runID)
		}
	}
	return r, ev, err
}

// warmMinState is the state size from which a commit whose run is not in
// the commit cache (another instance wrote it last, or this one restarted)
// reads the run first: one more round trip, so that its delta is computed
// in Go and changes large members in place. The SQL path's delta replaces
// every changed top-level member whole, which for a large array edited at
// each step stores about a full copy per event.
const warmMinState = 8 << 10

// warm reads the run into the commit cache if it is at revision rev, and
// returns its entry (nil if it is not, or on any error: the SQL path then
// commits and names the failed check).
func (db *DB) warm(ctx context.Context, tenantID, runID string, rev int64) *commitEntry {
	var (
		e            commitEntry
		state, spent []byte
	)
	err := db.pool.QueryRow(ctx, `
		SELECT state_revision, chain_head, status, state_schema_version, spent, state::text
		FROM runs WHERE tenant_id = $1 AND run_id = $2`, tenantID, runID,
	).Scan(&e.rev, &e.chain, &e.status, &e.version, &spent, &state)
	if err != nil || e.rev != rev || len(state) > commitCacheMaxState || decodeSpent(spent, &e.spent) != nil {
		return nil
	}
	_, members, ok := jsonbObject(state)
	if !ok {
		return nil
	}
	e.members = members
	db.commits.put(tenantID, runID, &e)
	return db.commits.get(tenantID, runID, rev)
}

// commitFast is the commit with its delta and chain computed from the
// cache entry e. done false sends the caller to the SQL path: the payload
// has no jsonb text computed here, or the guard refused the commit while
// every check the caller knows of passes (the entry was stale).
func (db *DB) commitFast(ctx context.Context, tenantID, runID string, c run.StoreCommit, from []string,
	payload, state, stateText json.RawMessage, members []jsonbMember, snapshot bool, e *commitEntry,
) (run.Run, run.Event, error, bool) {
	payloadText, ok := jsonbText(payload)
	if !ok {
		return run.Run{}, run.Event{}, nil, false
	}
	r := run.Run{
		TenantID: tenantID, RunID: runID, StatusReason: c.StatusReason, NextStep: c.NextStep,
		State: state, LeaseOwner: c.Owner, LeaseEpoch: c.Epoch,
	}
	status, version := run.Status(e.status), e.version
	if c.Status != "" {
		status = c.Status
	}
	if c.StateSchemaVersion > 0 {
		version = c.StateSchemaVersion
	}
	ev := run.Event{
		Seq: c.ExpectedRevision + 1, EventType: c.Event.EventType, StepID: c.Event.StepID,
		Attempt: c.Event.Attempt, Payload: payloadText, State: state, NextStep: c.NextStep,
		Status: status, StateSchemaVersion: version, Snapshot: snapshot, Change: stateText,
	}
	var delta any // NULL for a snapshot
	if !snapshot {
		ev.Change = jsonbDelta(e.members, members)
		delta = ev.Change
	}
	ev.Chain = run.ChainNext(e.chain, ev)
	// The totals after this commit, and what the row must hold before it.
	addSpend := c.Spend != nil
	spent, newSpent, oldSpent := e.spent, any(nil), any(nil)
	if addSpend {
		var ok bool
		if spent, ok = addSpendExact(e.spent, c.Spend); !ok {
			// Left to the SQL path, which checks the lease and revision
			// before the totals and refuses a total out of int64 (22003,
			// see commitSQL): the entry's totals may be stale, and a
			// caller that lost its lease or revision must hear that.
			return run.Run{}, run.Event{}, nil, false
		}
		newSpent, oldSpent = encodeSpend(spent), encodeSpend(e.spent)
	}
	var (
		dbStatus string
		exp      *time.Time
	)
	err := db.pool.QueryRow(ctx, commitFastSQL,
		tenantID, runID, c.ExpectedRevision, c.Owner, c.Epoch,
		state, c.NextStep, string(c.Status), c.StatusReason, c.StateSchemaVersion, from,
		c.Event.EventType, c.Event.StepID, c.Event.Attempt, payload,
		delta, addSpend, c.VerifiedSeq, c.Schema.Digest,
		ev.Chain, e.chain, e.status, e.version, newSpent, oldSpent,
	).Scan(&r.WorkflowName, &r.WorkflowVersion, &r.StateSchemaVersion, &dbStatus, &r.StateRevision,
		&exp, &r.ParentRunID, &r.ParentRevision, &r.CreatedAt, &r.UpdatedAt,
		&r.VerifiedSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		db.commits.drop(tenantID, runID)
		diag := db.diagnoseCommit(ctx, tenantID, runID, c, from)
		if errors.Is(diag, errCommitRaced) {
			return run.Run{}, run.Event{}, nil, false
		}
		return run.Run{}, run.Event{}, diag, true
	}
	if err != nil {
		db.commits.drop(tenantID, runID)
		return run.Run{}, run.Event{}, err, true
	}
	r.Spent = maps.Clone(spent) // the caller's to keep; the entry keeps its own
	r.Status = run.Status(dbStatus)
	r.Chain = ev.Chain
	r.LeaseExpiresAt = utcPtr(exp)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	// The event as the SQL path returns it: the payload as sent.
	ev.Payload, ev.CreatedAt = payload, r.UpdatedAt
	if snapshot {
		ev.Change = nil
	}
	db.commits.put(tenantID, runID, &commitEntry{rev: r.StateRevision, chain: r.Chain,
		status: string(r.Status), version: r.StateSchemaVersion, members: members, spent: spent})
	db.fastCommits.Add(1)
	return r, ev, nil, true
}

// commitSQL is the commit with its delta and chain computed by the database.
func (db *DB) commitSQL(ctx context.Context, tenantID, runID string, c run.StoreCommit, from []string,
	payload, state json.RawMessage, snapshot bool,
) (run.Run, run.Event, error) {
	r := run.Run{
		TenantID: tenantID, RunID: runID, StatusReason: c.StatusReason, NextStep: c.NextStep,
		State: state, LeaseOwner: c.Owner, LeaseEpoch: c.Epoch,
	}
	var (
		status       string
		exp          *time.Time
		spent, delta []byte
	)
	err := db.pool.QueryRow(ctx, commitSQL,
		tenantID, runID, c.ExpectedRevision, c.Owner, c.Epoch,
		state, c.NextStep, string(c.Status), c.StatusReason, c.StateSchemaVersion, from,
		c.Event.EventType, c.Event.StepID, c.Event.Attempt, payload,
		snapshot, encodeSpend(c.Spend), c.VerifiedSeq, c.Schema.Digest,
	).Scan(&r.WorkflowName, &r.WorkflowVersion, &r.StateSchemaVersion, &status, &r.StateRevision,
		&exp, &r.ParentRunID, &r.ParentRevision, &r.CreatedAt, &r.UpdatedAt,
		&r.Chain, &r.VerifiedSeq, &spent, &delta)
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Run{}, run.Event{}, db.diagnoseCommit(ctx, tenantID, runID, c, from)
	}
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "22003" && c.Spend != nil {
		return run.Run{}, run.Event{}, fmt.Errorf("%w: a spend total of the run leaves the 64-bit range (%s)", run.ErrInvalidInput, pgErr.Message)
	}
	if err != nil {
		return run.Run{}, run.Event{}, err
	}
	if err := decodeSpent(spent, &r.Spent); err != nil {
		return run.Run{}, run.Event{}, err
	}
	r.Status = run.Status(status)
	r.LeaseExpiresAt = utcPtr(exp)
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	ev := run.Event{
		Seq: r.StateRevision, EventType: c.Event.EventType, StepID: c.Event.StepID,
		Attempt: c.Event.Attempt, Payload: payload, CreatedAt: r.UpdatedAt,
		State: state, NextStep: c.NextStep, Status: r.Status, StateSchemaVersion: r.StateSchemaVersion,
		Snapshot: snapshot, Chain: r.Chain,
	}
	if !snapshot {
		ev.Change = json.RawMessage(delta)
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
		return run.ErrNotFound
	}
	if err != nil {
		return err
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
		return fmt.Errorf("%s -> %s: %w", status, target, run.ErrInvalidTransition)
	case owner != c.Owner || epoch != c.Epoch || !live:
		return fmt.Errorf("lease of %s at epoch %d: %w", c.Owner, c.Epoch, run.ErrLeaseLost)
	case revision != c.ExpectedRevision:
		return &run.RevisionConflictError{RunID: runID, Expected: c.ExpectedRevision, Current: revision}
	}
	need, err := db.schemaRequired(ctx, tenantID, runID, c)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if need != nil {
		return need
	}
	// Every check passes now, so the run changed between the two statements
	// (a revision only grows and an expired lease never comes back): the
	// caller raced another commit.
	return errCommitRaced
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
		return run.Checkpoint{}, err
	}
	var runOK, revOK bool
	err = db.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM runs WHERE tenant_id = $1 AND run_id = $2),
		       EXISTS (SELECT 1 FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq = $3)`,
		tenantID, runID, revision).Scan(&runOK, &revOK)
	switch {
	case err != nil:
		return run.Checkpoint{}, err
	case !runOK:
		return run.Checkpoint{}, run.ErrNotFound
	case !revOK:
		return run.Checkpoint{}, fmt.Errorf("revision %d: %w", revision, run.ErrRevisionNotFound)
	}
	return run.Checkpoint{}, run.ErrCheckpointExists
}

// ListCheckpoints lists a run's checkpoints by revision, then label.
func (db *DB) ListCheckpoints(ctx context.Context, tenantID, runID string, afterRevision int64, afterLabel string, limit int) ([]run.Checkpoint, error) {
	if limit <= 0 {
		limit = run.DefaultListSize
	}
	rows, err := db.pool.Query(ctx, `
		SELECT label, revision, created_at FROM run_checkpoints
		WHERE tenant_id = $1 AND run_id = $2 AND (revision, label) > ($3, $4::text)
		ORDER BY revision, label LIMIT $5`, tenantID, runID, afterRevision, afterLabel, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []run.Checkpoint
	for rows.Next() {
		var cp run.Checkpoint
		if err := rows.Scan(&cp.Label, &cp.Revision, &cp.CreatedAt); err != nil {
			return nil, err
		}
		cp.CreatedAt = cp.CreatedAt.UTC()
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		if err := db.mustExist(ctx, tenantID, runID); err != nil {
			return nil, err
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
			return run.Checkpoint{}, xerr
		}
		if !exists {
			return run.Checkpoint{}, run.ErrNotFound
		}
		return run.Checkpoint{}, run.ErrCheckpointNotFound
	}
	if err != nil {
		return run.Checkpoint{}, err
	}
	cp.CreatedAt = cp.CreatedAt.UTC()
	return cp, nil
}

// forkRunSQL creates the fork from the event at the revision (read and
// rebuilt by the caller in the same transaction). The spend totals are
// those of the source's payloads through the revision, summed as
// run.SpendOf reads them (NULL if the source keeps none).
const forkRunSQL = `
INSERT INTO runs (tenant_id, run_id, workflow_name, workflow_version, state_schema_version,
	status, status_reason, next_step, state, state_revision, parent_run_id, parent_revision,
	idempotency_key, request_digest, created_at, updated_at, chain_head, verified_seq, spent)
SELECT $1::text, $4::text, r.workflow_name, r.workflow_version, $9::int,
	CASE WHEN $10::text IN ` + terminalSQL + ` THEN 'suspended' ELSE $10::text END,
	'', $11::text, $12::jsonb, $3::bigint, $5::text, $6::bigint, NULLIF($7::text, ''), $8::text, now(), now(),
	$13::text, 0,
	CASE WHEN r.spent IS NULL THEN NULL ELSE (
		SELECT coalesce(jsonb_object_agg(x.key, x.total), '{}'::jsonb) FROM (
			SELECT m.key, sum(m.value::numeric) AS total
			FROM run_events e, jsonb_each_text(CASE WHEN jsonb_typeof(e.payload -> 'spend') = 'object'
				THEN e.payload -> 'spend' ELSE '{}'::jsonb END) m
			WHERE e.tenant_id = $1 AND e.run_id = $2 AND e.seq <= $3
			  AND jsonb_typeof(e.payload -> 'spend' -> m.key) = 'number' AND m.value ~ '^-?[0-9]{1,18}$'
			GROUP BY m.key) x) END
FROM runs r WHERE r.tenant_id = $1 AND r.run_id = $2
ON CONFLICT DO NOTHING
RETURNING ` + runCols

// forkEventsSQL copies the source's events 1..revision as stored: deltas
// stay deltas and chains stay valid, since every field hashed is copied.
const forkEventsSQL = `
INSERT INTO run_events (tenant_id, run_id, seq, event_type, step_id, attempt, payload,
	state, delta, next_step, status, state_schema_version, created_at, chain)
SELECT tenant_id, $4::text, seq, event_type, step_id, attempt, payload,
	state, delta, next_step, status, state_schema_version, created_at, chain
FROM run_events WHERE tenant_id = $1 AND run_id = $2 AND seq <= $3`

// Fork creates nr.Run from the source run's event at revision, copying the
// compact rows of events 1..revision, in one transaction.
func (db *DB) Fork(ctx context.Context, tenantID, sourceRunID string, revision int64, nr run.NewRun) (run.Run, error) {
	newID := nr.Run.RunID
	fail := func(err error) (run.Run, error) {
		return run.Run{}, err
	}
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if nr.IdempotencyKey != "" {
		var digest string
		prev, err := scanRun(tx.QueryRow(ctx,
			`SELECT `+runCols+`, request_digest FROM runs WHERE tenant_id = $1 AND idempotency_key = $2`,
			tenantID, nr.IdempotencyKey), &digest)
		switch {
		case err == nil && digest == nr.RequestDigest:
			return prev, fmt.Errorf("%w: %s (idempotency key replayed)", run.ErrAlreadyExists, prev.RunID)
		case err == nil:
			return run.Run{}, run.ErrIdempotencyMismatch
		case !errors.Is(err, pgx.ErrNoRows):
			return fail(err)
		}
	}
	snap, ok, err := getEvent(ctx, tx, tenantID, sourceRunID, revision)
	if err != nil {
		return fail(err)
	}
	if !ok {
		exists, err := db.runExists(ctx, tenantID, sourceRunID)
		switch {
		case err != nil:
			return fail(err)
		case !exists:
			return run.Run{}, run.ErrNotFound
		}
		return run.Run{}, run.ErrRevisionNotFound
	}
	r, err := scanRun(tx.QueryRow(ctx, forkRunSQL, tenantID, sourceRunID, revision, newID,
		nr.Run.ParentRunID, nr.Run.ParentRevision, nr.IdempotencyKey, nr.RequestDigest,
		snap.StateSchemaVersion, string(snap.Status), snap.NextStep, snap.State, snap.Chain))
	if errors.Is(err, pgx.ErrNoRows) {
		exists, xerr := db.runExists(ctx, tenantID, sourceRunID)
		switch {
		case xerr != nil:
			return fail(xerr)
		case !exists:
			return run.Run{}, run.ErrNotFound
		}
		return run.Run{}, fmt.Errorf("run %s: %w", newID, run.ErrAlreadyExists)
	}
	if err != nil {
		return fail(err)
	}
	tag, err := tx.Exec(ctx, forkEventsSQL, tenantID, sourceRunID, revision, newID)
	if err != nil {
		return fail(err)
	}
	if tag.RowsAffected() != revision {
		// The source went (retention) between the reads: nothing is kept.
		return run.Run{}, fmt.Errorf("copied %d of %d events: %w", tag.RowsAffected(), revision, run.ErrNotFound)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return r, nil
}
