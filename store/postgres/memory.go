package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/internal/memsql"
)

var _ memory.Store = (*DB)(nil)

const claimColumns = `tenant_id, memory_id, subject_id, namespace, key, value, schema_version, text,
	category, provenance, confidence, valid_from, expires_at, status, invalidated_at, reason,
	supersedes, superseded_by, superseded_at, consent_basis, value_digest, created_at,
	confirmed_at, confirmations, version`

func scanClaim(row pgx.Row) (memory.Claim, error) {
	var (
		c                   memory.Claim
		value, prov, status string
	)
	err := row.Scan(&c.TenantID, &c.MemoryID, &c.SubjectID, &c.Namespace, &c.Key, &value, &c.SchemaVersion, &c.Text,
		&c.Category, &prov, &c.Confidence, &c.ValidFrom, &c.ExpiresAt, &status, &c.InvalidatedAt, &c.InvalidationReason,
		&c.Supersedes, &c.SupersededBy, &c.SupersededAt, &c.ConsentBasis, &c.ValueDigest, &c.CreatedAt,
		&c.ConfirmedAt, &c.Confirmations, &c.Version)
	if err != nil {
		return memory.Claim{}, err
	}
	if err := json.Unmarshal([]byte(prov), &c.Provenance); err != nil {
		return memory.Claim{}, fmt.Errorf("decode provenance of claim %s: %w", c.MemoryID, err)
	}
	c.Value = json.RawMessage(value)
	c.Status = memory.Status(status)
	c.ValidFrom, c.CreatedAt, c.ConfirmedAt = c.ValidFrom.UTC(), c.CreatedAt.UTC(), c.ConfirmedAt.UTC()
	c.ExpiresAt, c.InvalidatedAt, c.SupersededAt = utcPtr(c.ExpiresAt), utcPtr(c.InvalidatedAt), utcPtr(c.SupersededAt)
	return c, nil
}

func collectClaims(rows pgx.Rows, err error) ([]memory.Claim, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Claim, error) { return scanClaim(r) })
}

type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func getClaim(ctx context.Context, q queryer, tenantID, memoryID string, lock bool) (memory.Claim, error) {
	sql := `SELECT ` + claimColumns + ` FROM memory_claims WHERE tenant_id = $1 AND memory_id = $2`
	if lock {
		sql += ` FOR UPDATE`
	}
	c, err := scanClaim(q.QueryRow(ctx, sql, tenantID, memoryID))
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Claim{}, memory.ErrNotFound
	}
	return c, err
}

// memTx runs fn in one read-committed transaction. A unique violation that
// the checks before it did not catch (they run after the subject lock, so
// only a bug gets here) is a conflict.
func (db *DB) memTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, fn)
	return uniqueConflict(err)
}

// uniqueConflict turns a unique violation into memory.ErrConflict, said in
// the caller's terms rather than by the constraint's name.
func uniqueConflict(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return err
	}
	what := "another current claim holds the subject, namespace and key"
	if pgErr.ConstraintName == "memory_claims_pkey" {
		what = "a claim with this memory id exists"
	}
	return fmt.Errorf("%s: %w", what, memory.ErrConflict)
}

// lockSubject bumps the subject's change counter, taking its row lock until
// the transaction ends, and returns the new version. Every write
// transaction calls it before reading what it checks.
func lockSubject(ctx context.Context, tx pgx.Tx, tenantID, subjectID string) (int64, error) {
	var v int64
	err := tx.QueryRow(ctx, `INSERT INTO memory_subjects AS s (tenant_id, subject_id, version) VALUES ($1, $2, 1)
		ON CONFLICT (tenant_id, subject_id) DO UPDATE SET version = s.version + 1 RETURNING version`, tenantID, subjectID).Scan(&v)
	return v, err
}

// namespaceLockKey is the first half of the advisory lock that orders a
// namespace's declaration as personal against the writes of claims without
// a consent basis into it; the second half is a hash of the schema, tenant
// and namespace (a collision only serializes two namespaces' writes).
const namespaceLockKey int32 = 0x4d454e53 // "MENS"

// namespaceLockSQL takes the lock ($1 tenant, $2 namespace) shared: the
// write of a claim without a consent basis; namespaceLockExclusiveSQL is
// a declaration as personal.
const (
	namespaceLockSQL          = `SELECT pg_advisory_xact_lock_shared(` + namespaceLockArgs + `)`
	namespaceLockExclusiveSQL = `SELECT pg_advisory_xact_lock(` + namespaceLockArgs + `)`
	namespaceLockArgs         = `$3::int, hashtext(coalesce(current_schema(), '') || chr(31) || $1::text || chr(31) || $2::text)`
)

// personalSQL tells whether the namespace ($1 tenant, $2 namespace) is
// declared personal; run after namespaceLockSQL, in its own statement, so
// that its snapshot holds a declaration the lock waited for.
const personalSQL = `SELECT EXISTS (SELECT 1 FROM memory_namespaces WHERE tenant_id = $1 AND namespace = $2 AND personal)`

// checkConsent refuses, inside a write transaction, a claim without a
// consent basis in a namespace declared personal. The service checks the
// policy before it writes; this check under the namespace lock closes the
// window in which another instance declares the namespace personal
// between that read and the write (or counts the claims without consent
// before the write commits).
func checkConsent(ctx context.Context, tx pgx.Tx, c memory.Claim) error {
	if strings.TrimSpace(c.ConsentBasis) != "" {
		return nil
	}
	if _, err := tx.Exec(ctx, namespaceLockSQL, c.TenantID, c.Namespace, namespaceLockKey); err != nil {
		return err
	}
	var personal bool
	if err := tx.QueryRow(ctx, personalSQL, c.TenantID, c.Namespace).Scan(&personal); err != nil {
		return err
	}
	if personal {
		return fmt.Errorf("namespace %s: %w", c.Namespace, memory.ErrNoConsent)
	}
	return nil
}

func dropProjections(ctx context.Context, tx pgx.Tx, tenantID, memoryID string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM memory_text WHERE tenant_id = $1 AND memory_id = $2`, tenantID, memoryID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM memory_vectors WHERE tenant_id = $1 AND memory_id = $2`, tenantID, memoryID)
	return err
}

func addProjections(ctx context.Context, tx pgx.Tx, c memory.Claim, vec *memory.Vector, version int64) error {
	if _, err := tx.Exec(ctx, `INSERT INTO memory_text (tenant_id, memory_id, subject_id, namespace, expires_at, text)
		VALUES ($1, $2, $3, $4, $5, $6)`, c.TenantID, c.MemoryID, c.SubjectID, c.Namespace, c.ExpiresAt, c.Text); err != nil {
		return fmt.Errorf("index text: %w", err)
	}
	if vec == nil {
		return nil
	}
	return putVector(ctx, tx, c, *vec, version)
}

func putVector(ctx context.Context, tx pgx.Tx, c memory.Claim, v memory.Vector, version int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO memory_vectors (tenant_id, memory_id, model, subject_id, namespace, dim, vec, expires_at, version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (tenant_id, memory_id, model) DO UPDATE SET dim = excluded.dim, vec = excluded.vec,
			namespace = excluded.namespace, expires_at = excluded.expires_at, version = excluded.version`,
		c.TenantID, c.MemoryID, v.Model, c.SubjectID, c.Namespace, len(v.Values), memsql.EncodeVector(v.Values), c.ExpiresAt, version)
	if err != nil {
		return fmt.Errorf("store vector: %w", err)
	}
	return nil
}

func checkSupersede(ctx context.Context, tx pgx.Tx, c memory.Claim, supersede string) error {
	if supersede == "" {
		return nil
	}
	var subject, status string
	err := tx.QueryRow(ctx, `SELECT subject_id, status FROM memory_claims WHERE tenant_id = $1 AND memory_id = $2`,
		c.TenantID, supersede).Scan(&subject, &status)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (subject != c.SubjectID || status != string(memory.StatusCurrent))) {
		return fmt.Errorf("claim %s to supersede is not a current claim of the subject: %w", supersede, memory.ErrConflict)
	}
	return err
}

func checkSlot(ctx context.Context, tx pgx.Tx, c memory.Claim, supersede string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT memory_id FROM memory_claims WHERE tenant_id = $1 AND subject_id = $2
		AND namespace = $3 AND key = $4 AND status = 'current' AND memory_id <> $5 AND memory_id <> $6`,
		c.TenantID, c.SubjectID, c.Namespace, c.Key, c.MemoryID, supersede).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("claim %s is current for the key: %w", id, memory.ErrConflict)
}

func supersedeClaim(ctx context.Context, tx pgx.Tx, tenantID, old, newID string, at time.Time, version int64) error {
	if old == "" {
		return nil
	}
	if err := dropProjections(ctx, tx, tenantID, old); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE memory_claims SET status = 'superseded', superseded_by = $1, superseded_at = $2, version = $3
		WHERE tenant_id = $4 AND memory_id = $5`, newID, at, version, tenantID, old)
	return err
}

// Insert implements memory.Store in two round trips: the transaction and
// every statement of it in one batch (queueInsert), then the commit, or a
// rollback when the batch revealed a refusal. pgxpool closes a connection
// released inside a transaction, so an interrupted insert leaves none open.
func (db *DB) Insert(ctx context.Context, p memory.InsertParams) (memory.Claim, error) {
	c := p.Claim
	if c.TenantID == "" || c.SubjectID == "" || c.MemoryID == "" {
		return memory.Claim{}, fmt.Errorf("insert claim: tenant, subject and memory id are required: %w", memory.ErrInvalidInput)
	}
	out, err := db.insert(ctx, p)
	err = uniqueConflict(err)
	if err != nil {
		return memory.Claim{}, fmt.Errorf("insert claim %s: %w", c.MemoryID, err)
	}
	return out, nil
}

func (db *DB) insert(ctx context.Context, p memory.InsertParams) (memory.Claim, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return memory.Claim{}, err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	out, check, err := queueInsert(b, p)
	if err == nil {
		err = conn.SendBatch(ctx, b).Close() // runs the callbacks of the statements before a failure
		if cerr := check(); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		_, _ = conn.Exec(ctx, `ROLLBACK`)
		return memory.Claim{}, err
	}
	if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
		return memory.Claim{}, fmt.Errorf("commit: %w", err)
	}
	return out(), nil
}

// InsertBatch implements memory.BatchInserter: every claim's statements
// queued in one batch, so one transaction and one round trip.
func (db *DB) InsertBatch(ctx context.Context, ps []memory.InsertParams) ([]memory.Claim, error) {
	for _, p := range ps {
		if c := p.Claim; c.TenantID == "" || c.SubjectID == "" || c.MemoryID == "" {
			return nil, fmt.Errorf("insert claims: tenant, subject and memory id are required: %w", memory.ErrInvalidInput)
		}
	}
	out, err := db.insertBatch(ctx, ps)
	err = uniqueConflict(err)
	if err != nil {
		return nil, fmt.Errorf("insert %d claims: %w", len(ps), err)
	}
	return out, nil
}

func (db *DB) insertBatch(ctx context.Context, ps []memory.InsertParams) ([]memory.Claim, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	outs := make([]func() memory.Claim, len(ps))
	checks := make([]func() error, len(ps))
	for i, p := range ps {
		if outs[i], checks[i], err = queueInsert(b, p); err != nil {
			return nil, fmt.Errorf("claim %s: %w", p.Claim.MemoryID, err)
		}
	}
	err = conn.SendBatch(ctx, b).Close() // runs the callbacks of the statements before a failure
	for i, check := range checks {
		if cerr := check(); cerr != nil {
			err = fmt.Errorf("claim %s: %w", ps[i].Claim.MemoryID, cerr)
			break
		}
	}
	if err != nil {
		_, _ = conn.Exec(ctx, `ROLLBACK`)
		return nil, err
	}
	if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	out := make([]memory.Claim, len(ps))
	for i, o := range outs {
		out[i] = o()
	}
	return out, nil
}

// subjectVersionSQL is the subject's version within the writing
// transaction, after its bump: $1 and $2 are the tenant and subject.
const subjectVersionSQL = `(SELECT version FROM memory_subjects WHERE tenant_id = $1 AND subject_id = $2)`

// queueInsert queues Insert's statements, to run in one transaction: the
// subject lock and bump first, the tombstone check, the supersession
// (checked by rows affected), the claim (its primary key refuses a taken id
// and the unique index of current claims a second current claim of a key:
// 23505, a conflict) and its projection rows. After the batch, check says
// whether it revealed a refusal (then the transaction must roll back) and
// out is the claim as written: it is not read back.
func queueInsert(b *pgx.Batch, p memory.InsertParams) (out func() memory.Claim, check func() error, err error) {
	c := p.Claim
	if p.Supersede != "" {
		c.Supersedes = p.Supersede
	}
	prov, err := json.Marshal(c.Provenance)
	if err != nil {
		return nil, nil, fmt.Errorf("encode provenance: %w", err)
	}
	var (
		version    int64
		tombstoned bool
		superseded = int64(-1)
	)
	b.Queue(`INSERT INTO memory_subjects AS s (tenant_id, subject_id, version) VALUES ($1, $2, 1)
		ON CONFLICT (tenant_id, subject_id) DO UPDATE SET version = s.version + 1 RETURNING version`, c.TenantID, c.SubjectID).
		QueryRow(func(r pgx.Row) error { return r.Scan(&version) })
	personal := false
	if strings.TrimSpace(c.ConsentBasis) == "" {
		b.Queue(namespaceLockSQL, c.TenantID, c.Namespace, namespaceLockKey)
		b.Queue(personalSQL, c.TenantID, c.Namespace).QueryRow(func(r pgx.Row) error { return r.Scan(&personal) })
	}
	b.Queue(`SELECT EXISTS (SELECT 1 FROM memory_tombstones WHERE tenant_id = $1 AND subject_id = $2 AND namespace = $3
		AND key = $4 AND value_digest IN ($5, $6))`, c.TenantID, c.SubjectID, c.Namespace, c.Key, c.ValueDigest, cmp.Or(p.LegacyDigest, c.ValueDigest)).
		QueryRow(func(r pgx.Row) error { return r.Scan(&tombstoned) })
	if p.Supersede != "" {
		b.Queue(`DELETE FROM memory_text WHERE tenant_id = $1 AND memory_id = $2`, c.TenantID, p.Supersede)
		b.Queue(`DELETE FROM memory_vectors WHERE tenant_id = $1 AND memory_id = $2`, c.TenantID, p.Supersede)
		b.Queue(`UPDATE memory_claims SET status = 'superseded', superseded_by = $3, superseded_at = $4, version = `+subjectVersionSQL+`
			WHERE tenant_id = $1 AND memory_id = $5 AND subject_id = $2 AND status = 'current'`,
			c.TenantID, c.SubjectID, c.MemoryID, p.SupersededAt, p.Supersede).
			Exec(func(tag pgconn.CommandTag) error { superseded = tag.RowsAffected(); return nil })
	}
	b.Queue(`INSERT INTO memory_claims (`+claimColumns+`) VALUES
		($1, $3, $2, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, `+subjectVersionSQL+`)`,
		c.TenantID, c.SubjectID, c.MemoryID, c.Namespace, c.Key, string(c.Value), c.SchemaVersion, c.Text,
		c.Category, string(prov), c.Confidence, c.ValidFrom, c.ExpiresAt, string(c.Status),
		c.InvalidatedAt, c.InvalidationReason, c.Supersedes, c.SupersededBy, c.SupersededAt,
		c.ConsentBasis, c.ValueDigest, c.CreatedAt, c.ConfirmedAt, c.Confirmations)
	if c.Status == memory.StatusCurrent {
		b.Queue(`INSERT INTO memory_text (tenant_id, memory_id, subject_id, namespace, expires_at, text)
			VALUES ($1, $2, $3, $4, $5, $6)`, c.TenantID, c.MemoryID, c.SubjectID, c.Namespace, c.ExpiresAt, c.Text)
		if v := p.Vector; v != nil {
			b.Queue(`INSERT INTO memory_vectors (tenant_id, memory_id, model, subject_id, namespace, dim, vec, expires_at, version)
				VALUES ($1, $3, $4, $2, $5, $6, $7, $8, `+subjectVersionSQL+`)`,
				c.TenantID, c.SubjectID, c.MemoryID, v.Model, c.Namespace, len(v.Values), memsql.EncodeVector(v.Values), c.ExpiresAt)
		}
	}
	check = func() error {
		switch {
		case tombstoned:
			return memory.ErrTombstoned
		case personal:
			return fmt.Errorf("namespace %s: %w", c.Namespace, memory.ErrNoConsent)
		case superseded == 0:
			return fmt.Errorf("claim %s to supersede is not a current claim of the subject: %w", p.Supersede, memory.ErrConflict)
		}
		return nil
	}
	out = func() memory.Claim {
		c.Version = version
		return memsql.AsStored(c)
	}
	return out, check, nil
}

// Get implements memory.Store.
func (db *DB) Get(ctx context.Context, tenantID, memoryID string) (memory.Claim, error) {
	c, err := getClaim(ctx, db.pool, tenantID, memoryID, false)
	if err != nil {
		return memory.Claim{}, fmt.Errorf("get claim %s: %w", memoryID, err)
	}
	return c, nil
}

// GetMany implements memory.Store.
func (db *DB) GetMany(ctx context.Context, tenantID string, memoryIDs []string) ([]memory.Claim, error) {
	if len(memoryIDs) == 0 {
		return nil, nil
	}
	out, err := collectClaims(db.pool.Query(ctx, `SELECT `+claimColumns+` FROM memory_claims
		WHERE tenant_id = $1 AND memory_id = ANY($2)`, tenantID, memoryIDs))
	if err != nil {
		return nil, fmt.Errorf("get claims: %w", err)
	}
	return out, nil
}

// args numbers the parameters of a query as they are added.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// List implements memory.Store.
func (db *DB) List(ctx context.Context, q memory.ListQuery) ([]memory.Claim, error) {
	if q.TenantID == "" || q.SubjectID == "" {
		return nil, fmt.Errorf("list claims: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	var a args
	var w strings.Builder
	w.WriteString(`tenant_id = ` + a.add(q.TenantID) + ` AND subject_id = ` + a.add(q.SubjectID))
	if q.Namespace != "" {
		w.WriteString(` AND namespace = ` + a.add(q.Namespace))
	}
	if q.Key != "" {
		w.WriteString(` AND key = ` + a.add(q.Key))
	}
	if len(q.Statuses) == 1 && q.Statuses[0].Known() {
		// A literal, so the partial indexes (current claims, held claims)
		// serve the read whatever plan the statement cache settles on.
		w.WriteString(` AND status = '` + string(q.Statuses[0]) + `'`)
	} else if len(q.Statuses) > 0 {
		st := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			st[i] = string(s)
		}
		w.WriteString(` AND status = ANY(` + a.add(st) + `)`)
	}
	if q.LiveAt != nil {
		t := a.add(*q.LiveAt)
		if q.AsOf {
			w.WriteString(` AND status NOT IN ('held', 'rejected') AND valid_from <= ` + t +
				` AND (superseded_at IS NULL OR superseded_at > ` + t + `) AND (invalidated_at IS NULL OR invalidated_at > ` + t +
				`) AND (expires_at IS NULL OR expires_at > ` + t + `)`)
		} else {
			w.WriteString(` AND status = 'current' AND (expires_at IS NULL OR expires_at > ` + t + `)`)
		}
	}
	if q.MaxSchemaVersion > 0 {
		w.WriteString(` AND schema_version <= ` + a.add(q.MaxSchemaVersion))
	}
	if !q.AfterCreated.IsZero() || q.AfterID != "" {
		w.WriteString(` AND (created_at, memory_id) > (` + a.add(q.AfterCreated) + `, ` + a.add(q.AfterID) + `)`)
	}
	limit := ""
	if q.Limit > 0 {
		limit = ` LIMIT ` + a.add(q.Limit)
	}
	out, err := collectClaims(db.pool.Query(ctx, `SELECT `+claimColumns+` FROM memory_claims WHERE `+w.String()+
		` ORDER BY created_at, memory_id`+limit, a...))
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	return out, nil
}

// lockedClaim reads a claim for a write: its subject is locked (and
// bumped) first, then the claim is read again under that lock.
func lockedClaim(ctx context.Context, tx pgx.Tx, tenantID, memoryID string) (memory.Claim, int64, error) {
	var subject string
	err := tx.QueryRow(ctx, `SELECT subject_id FROM memory_claims WHERE tenant_id = $1 AND memory_id = $2`, tenantID, memoryID).Scan(&subject)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Claim{}, 0, memory.ErrNotFound
	} else if err != nil {
		return memory.Claim{}, 0, err
	}
	version, err := lockSubject(ctx, tx, tenantID, subject)
	if err != nil {
		return memory.Claim{}, 0, err
	}
	c, err := getClaim(ctx, tx, tenantID, memoryID, true)
	return c, version, err
}

// Transition implements memory.Store.
func (db *DB) Transition(ctx context.Context, p memory.TransitionParams) (memory.Claim, error) {
	var out memory.Claim
	err := db.memTx(ctx, func(tx pgx.Tx) error {
		c, version, err := lockedClaim(ctx, tx, p.TenantID, p.MemoryID)
		if err != nil {
			return err
		}
		if !slices.Contains(p.From, c.Status) {
			return fmt.Errorf("it is %s, not one of %v: %w", c.Status, p.From, memory.ErrConflict)
		}
		wasCurrent := c.Status == memory.StatusCurrent
		becomes := p.To == memory.StatusCurrent && !wasCurrent
		supersede := ""
		if becomes {
			if err := checkConsent(ctx, tx, c); err != nil {
				return err
			}
			supersede = p.Supersede
			if err := checkSupersede(ctx, tx, c, supersede); err != nil {
				return err
			}
			if err := checkSlot(ctx, tx, c, supersede); err != nil {
				return err
			}
		}
		// The old claim leaves the key's current slot before this one takes it.
		if err := supersedeClaim(ctx, tx, p.TenantID, supersede, p.MemoryID, p.SupersededAt, version); err != nil {
			return err
		}
		var a args
		set := `status = ` + a.add(string(p.To)) + `, version = ` + a.add(version)
		if p.To == memory.StatusInvalidated {
			set += `, invalidated_at = ` + a.add(p.At) + `, reason = ` + a.add(p.Reason)
		}
		if supersede != "" {
			set += `, supersedes = ` + a.add(supersede)
		}
		if _, err := tx.Exec(ctx, `UPDATE memory_claims SET `+set+` WHERE tenant_id = `+a.add(p.TenantID)+
			` AND memory_id = `+a.add(p.MemoryID), a...); err != nil {
			return err
		}
		switch {
		case becomes:
			if err := addProjections(ctx, tx, c, p.Vector, version); err != nil {
				return err
			}
		case wasCurrent && p.To != memory.StatusCurrent:
			if err := dropProjections(ctx, tx, p.TenantID, p.MemoryID); err != nil {
				return err
			}
		}
		out, err = getClaim(ctx, tx, p.TenantID, p.MemoryID, false)
		return err
	})
	if err != nil {
		return memory.Claim{}, fmt.Errorf("transition claim %s to %s: %w", p.MemoryID, p.To, err)
	}
	return out, nil
}

// Refresh implements memory.Store.
func (db *DB) Refresh(ctx context.Context, tenantID, memoryID string, at time.Time) (memory.Claim, error) {
	var out memory.Claim
	err := db.memTx(ctx, func(tx pgx.Tx) error {
		c, version, err := lockedClaim(ctx, tx, tenantID, memoryID)
		if err != nil {
			return err
		}
		if c.Status != memory.StatusCurrent {
			return fmt.Errorf("it is %s: %w", c.Status, memory.ErrConflict)
		}
		out, err = scanClaim(tx.QueryRow(ctx, `UPDATE memory_claims SET confirmed_at = $1, confirmations = confirmations + 1, version = $2
			WHERE tenant_id = $3 AND memory_id = $4 RETURNING `+claimColumns, at, version, tenantID, memoryID))
		return err
	})
	if err != nil {
		return memory.Claim{}, fmt.Errorf("refresh claim %s: %w", memoryID, err)
	}
	return out, nil
}

// Forget implements memory.Store.
func (db *DB) Forget(ctx context.Context, p memory.ForgetParams) (memory.ForgetRecord, error) {
	if p.TenantID == "" || p.SubjectID == "" {
		return memory.ForgetRecord{}, fmt.Errorf("forget: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	rec := p.Record
	rec.TenantID, rec.SubjectID, rec.Namespace = p.TenantID, p.SubjectID, p.Namespace
	if rec.ForgetID == "" {
		rec.ForgetID = uuid.NewString()
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Now()
	}
	rec.CreatedAt = rec.CreatedAt.UTC().Truncate(time.Microsecond)
	err := db.memTx(ctx, func(tx pgx.Tx) error {
		version, err := lockSubject(ctx, tx, p.TenantID, p.SubjectID)
		if err != nil {
			return err
		}
		// $3 = '' is every namespace.
		scope := ` WHERE tenant_id = $1 AND subject_id = $2 AND ($3 = '' OR namespace = $3)`
		if _, err := tx.Exec(ctx, `DELETE FROM memory_text`+scope, p.TenantID, p.SubjectID, p.Namespace); err != nil {
			return fmt.Errorf("delete full text: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memory_vectors`+scope, p.TenantID, p.SubjectID, p.Namespace); err != nil {
			return fmt.Errorf("delete vectors: %w", err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO memory_tombstones (tenant_id, subject_id, namespace, key, value_digest, created_at)
			SELECT DISTINCT tenant_id, subject_id, namespace, key, value_digest, $4::timestamptz FROM memory_claims`+scope+`
			ON CONFLICT DO NOTHING`, p.TenantID, p.SubjectID, p.Namespace, rec.CreatedAt)
		if err != nil {
			return fmt.Errorf("write tombstones: %w", err)
		}
		rec.Tombstones = int(tag.RowsAffected())
		if tag, err = tx.Exec(ctx, `DELETE FROM memory_claims`+scope, p.TenantID, p.SubjectID, p.Namespace); err != nil {
			return fmt.Errorf("delete claims: %w", err)
		}
		rec.Claims = int(tag.RowsAffected())
		if rec.Claims > 0 {
			if _, err := tx.Exec(ctx, `UPDATE memory_subjects SET forgotten = $1 WHERE tenant_id = $2 AND subject_id = $3`,
				version, p.TenantID, p.SubjectID); err != nil {
				return err
			}
		} else {
			// Nothing changed: the version goes back to what it was (or the
			// row goes, for a subject that never had a claim).
			if _, err := tx.Exec(ctx, `UPDATE memory_subjects SET version = version - 1 WHERE tenant_id = $1 AND subject_id = $2`,
				p.TenantID, p.SubjectID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM memory_subjects WHERE tenant_id = $1 AND subject_id = $2 AND version = 0`,
				p.TenantID, p.SubjectID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO memory_forgets (tenant_id, forget_id, subject_id, namespace, reason, claims, tombstones, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, rec.TenantID, rec.ForgetID, rec.SubjectID, rec.Namespace, rec.Reason,
			rec.Claims, rec.Tombstones, rec.CreatedAt)
		if err != nil {
			return fmt.Errorf("write the forget record: %w", err)
		}
		return nil
	})
	if err != nil {
		return memory.ForgetRecord{}, fmt.Errorf("forget subject %s: %w", p.SubjectID, err)
	}
	return rec, nil
}

// Tombstones implements memory.Store.
func (db *DB) Tombstones(ctx context.Context, tenantID, subjectID string) ([]memory.Tombstone, error) {
	rows, err := db.pool.Query(ctx, `SELECT tenant_id, subject_id, namespace, key, value_digest, created_at
		FROM memory_tombstones WHERE tenant_id = $1 AND subject_id = $2 ORDER BY created_at, namespace, key, value_digest`, tenantID, subjectID)
	if err != nil {
		return nil, fmt.Errorf("list tombstones: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Tombstone, error) {
		var ts memory.Tombstone
		err := r.Scan(&ts.TenantID, &ts.SubjectID, &ts.Namespace, &ts.Key, &ts.ValueDigest, &ts.CreatedAt)
		ts.CreatedAt = ts.CreatedAt.UTC()
		return ts, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tombstones: %w", err)
	}
	return out, nil
}

// SearchText implements memory.Store: the english tsvector of each current
// claim matched against the OR of plainto_tsquery of each word (every word a
// bound parameter), ranked by ts_rank normalised by 1 + log(document length).
// ts_rank_cd (cover density) ranked the 32,000 hits of a common word among
// 100,000 claims four times slower (600 ms against 150 ms on a busy
// machine); for claims of a dozen words, proximity adds little.
func (db *DB) SearchText(ctx context.Context, q memory.TextQuery) ([]memory.Scored, error) {
	if q.TenantID == "" || q.SubjectID == "" {
		return nil, fmt.Errorf("search claims: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	words := memsql.Words(q.Terms)
	if len(words) == 0 {
		return nil, nil
	}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	a := args{q.TenantID, q.SubjectID, q.Namespace, now}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = `plainto_tsquery('english', ` + a.add(w) + `)`
	}
	limit := ""
	if q.Limit > 0 {
		limit = ` LIMIT ` + a.add(q.Limit)
	}
	rows, err := db.pool.Query(ctx, `SELECT t.memory_id, ts_rank(t.tsv, q.q, 1)::float8 AS score
		FROM memory_text t, (SELECT `+strings.Join(parts, " || ")+` AS q) q
		WHERE t.tenant_id = $1 AND t.subject_id = $2 AND ($3 = '' OR t.namespace = $3)
			AND (t.expires_at IS NULL OR t.expires_at > $4) AND t.tsv @@ q.q
		ORDER BY score DESC, t.memory_id`+limit, a...)
	if err != nil {
		return nil, fmt.Errorf("search claims: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Scored, error) {
		var s memory.Scored
		err := r.Scan(&s.MemoryID, &s.Score)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("search claims: %w", err)
	}
	return out, nil
}

// Vectors implements memory.Store. The rows and the version are read in one
// repeatable-read snapshot.
func (db *DB) Vectors(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) ([]memory.Vector, int64, error) {
	var (
		out     []memory.Vector
		version int64
	)
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if version, err = subjectVersion(ctx, tx, tenantID, subjectID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT memory_id, namespace, model, dim, vec, expires_at, version FROM memory_vectors
			WHERE tenant_id = $1 AND subject_id = $2 AND model = $3 AND version > $4 ORDER BY version, memory_id`,
			tenantID, subjectID, model, afterVersion)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Vector, error) {
			var (
				v    memory.Vector
				dim  int
				blob []byte
			)
			if err := r.Scan(&v.MemoryID, &v.Namespace, &v.Model, &dim, &blob, &v.ExpiresAt, &v.Version); err != nil {
				return v, err
			}
			v.ExpiresAt = utcPtr(v.ExpiresAt)
			var err error
			if v.Values, err = memsql.DecodeVector(blob, dim); err != nil {
				return v, fmt.Errorf("vector of claim %s: %w", v.MemoryID, err)
			}
			return v, nil
		})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read vectors: %w", err)
	}
	return out, version, nil
}

// Changes implements memory.Store in one statement, so one snapshot.
func (db *DB) Changes(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) (memory.Changes, error) {
	rows, err := db.pool.Query(ctx, changesSQL, tenantID, subjectID, afterVersion, model)
	if err != nil {
		return memory.Changes{}, fmt.Errorf("read changes of subject %s: %w", subjectID, err)
	}
	out, err := scanChanges(rows, model)
	if err != nil {
		return memory.Changes{}, fmt.Errorf("read changes of subject %s: %w", subjectID, err)
	}
	return out, nil
}

// ChangesAndGet implements memory.ChangesGetter: Changes and GetMany
// queued in one batch, one round trip, so a search whose subject did not
// change meets the database once.
func (db *DB) ChangesAndGet(ctx context.Context, tenantID, subjectID, model string, afterVersion int64, memoryIDs []string) (memory.Changes, []memory.Claim, error) {
	var (
		ch     memory.Changes
		claims []memory.Claim
		cerr   error
	)
	b := &pgx.Batch{}
	b.Queue(changesSQL, tenantID, subjectID, afterVersion, model).Query(func(rows pgx.Rows) error {
		ch, cerr = scanChanges(rows, model)
		return cerr
	})
	if len(memoryIDs) > 0 {
		b.Queue(`SELECT `+claimColumns+` FROM memory_claims WHERE tenant_id = $1 AND memory_id = ANY($2)`, tenantID, memoryIDs).
			Query(func(rows pgx.Rows) error {
				claims, cerr = collectClaims(rows, nil)
				return cerr
			})
	}
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		return memory.Changes{}, nil, fmt.Errorf("read changes of subject %s and %d claims: %w", subjectID, len(memoryIDs), err)
	}
	return ch, claims, nil
}

// changesSQL is Changes in one statement, so one snapshot: $1 tenant, $2
// subject, $3 after version, $4 model.
const changesSQL = `
		SELECT 0, version, forgotten, '', '', '', NULL::timestamptz, '', NULL::bytea, 0
			FROM memory_subjects WHERE tenant_id = $1 AND subject_id = $2
		UNION ALL
		SELECT 1, version, 0, memory_id, namespace, status, expires_at, CASE WHEN status = 'current' THEN text ELSE '' END, NULL, 0
			FROM memory_claims WHERE tenant_id = $1 AND subject_id = $2 AND version > $3 AND ($3 > 0 OR status = 'current')
		UNION ALL
		SELECT 2, version, 0, memory_id, namespace, '', expires_at, '', vec, dim
			FROM memory_vectors WHERE $4 <> '' AND tenant_id = $1 AND subject_id = $2 AND model = $4 AND version > $3`

func scanChanges(rows pgx.Rows, model string) (memory.Changes, error) {
	defer rows.Close()
	var (
		out            memory.Changes
		kind, dim      int
		version, forg  int64
		id, ns, st, tx string
		expires        *time.Time
		blob           []byte
	)
	_, err := pgx.ForEachRow(rows, []any{&kind, &version, &forg, &id, &ns, &st, &expires, &tx, &blob, &dim}, func() error {
		switch kind {
		case 0:
			out.Version, out.Forgotten = version, forg
		case 1:
			out.Claims = append(out.Claims, memory.ClaimChange{MemoryID: id, Namespace: ns, Status: memory.Status(st), Text: tx, ExpiresAt: utcPtr(expires), Version: version})
		case 2:
			vs, err := memsql.DecodeVector(blob, dim)
			if err != nil {
				return fmt.Errorf("vector of claim %s: %w", id, err)
			}
			out.Vectors = append(out.Vectors, memory.Vector{MemoryID: id, Namespace: ns, Model: model, Values: vs, ExpiresAt: utcPtr(expires), Version: version})
		}
		return nil
	})
	return out, err
}

// MissingVectors implements memory.Store.
func (db *DB) MissingVectors(ctx context.Context, tenantID, subjectID, model string, limit int) ([]memory.Claim, error) {
	a := args{tenantID, subjectID, model}
	lim := ""
	if limit > 0 {
		lim = ` LIMIT ` + a.add(limit)
	}
	out, err := collectClaims(db.pool.Query(ctx, `SELECT `+claimColumns+` FROM memory_claims c WHERE tenant_id = $1 AND subject_id = $2
		AND status = 'current' AND NOT EXISTS (SELECT 1 FROM memory_vectors v
			WHERE v.tenant_id = c.tenant_id AND v.memory_id = c.memory_id AND v.model = $3)
		ORDER BY created_at, memory_id`+lim, a...))
	if err != nil {
		return nil, fmt.Errorf("list claims without vectors: %w", err)
	}
	return out, nil
}

// PutVectors implements memory.Store.
func (db *DB) PutVectors(ctx context.Context, tenantID, subjectID string, vs []memory.Vector) error {
	if len(vs) == 0 {
		return nil
	}
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.MemoryID
	}
	err := db.memTx(ctx, func(tx pgx.Tx) error {
		version, err := lockSubject(ctx, tx, tenantID, subjectID)
		if err != nil {
			return err
		}
		claims, err := collectClaims(tx.Query(ctx, `SELECT `+claimColumns+` FROM memory_claims
			WHERE tenant_id = $1 AND subject_id = $2 AND status = 'current' AND memory_id = ANY($3)`, tenantID, subjectID, ids))
		if err != nil {
			return err
		}
		byID := make(map[string]memory.Claim, len(claims))
		for _, c := range claims {
			byID[c.MemoryID] = c
		}
		stored := 0
		for _, v := range vs {
			c, ok := byID[v.MemoryID]
			if !ok {
				continue
			}
			if err := putVector(ctx, tx, c, v, version); err != nil {
				return err
			}
			stored++
		}
		if stored == 0 { // nothing changed: undo the bump
			_, err = tx.Exec(ctx, `UPDATE memory_subjects SET version = version - 1 WHERE tenant_id = $1 AND subject_id = $2`, tenantID, subjectID)
			if err == nil {
				_, err = tx.Exec(ctx, `DELETE FROM memory_subjects WHERE tenant_id = $1 AND subject_id = $2 AND version = 0`, tenantID, subjectID)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("put vectors of subject %s: %w", subjectID, err)
	}
	return nil
}

func subjectVersion(ctx context.Context, q queryer, tenantID, subjectID string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT version FROM memory_subjects WHERE tenant_id = $1 AND subject_id = $2`, tenantID, subjectID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// SubjectVersion implements memory.Store.
func (db *DB) SubjectVersion(ctx context.Context, tenantID, subjectID string) (int64, error) {
	v, err := subjectVersion(ctx, db.pool, tenantID, subjectID)
	if err != nil {
		return 0, fmt.Errorf("read subject version: %w", err)
	}
	return v, nil
}

// PutNamespace implements memory.Store.
func (db *DB) PutNamespace(ctx context.Context, ns memory.Namespace) error {
	if ns.TenantID == "" || ns.Name == "" {
		return fmt.Errorf("put namespace: tenant and name are required: %w", memory.ErrInvalidInput)
	}
	err := db.memTx(ctx, func(tx pgx.Tx) error {
		if ns.Personal {
			// Under the exclusive lock no claim without consent is being
			// written into the namespace, so the count is final until the
			// declaration commits (memory.Service.DeclareNamespace counted
			// before, without the lock, for its message).
			if _, err := tx.Exec(ctx, namespaceLockExclusiveSQL, ns.TenantID, ns.Name, namespaceLockKey); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, unconsentedSQL, ns.TenantID, ns.Name, string(memory.StatusCurrent)).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("namespace %s holds %d current claims without a consent basis: %w", ns.Name, n, memory.ErrNoConsent)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO memory_namespaces (tenant_id, namespace, personal, sensitive, ttl_us) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id, namespace) DO UPDATE SET personal = excluded.personal, sensitive = excluded.sensitive, ttl_us = excluded.ttl_us`,
			ns.TenantID, ns.Name, ns.Personal, ns.Sensitive, ns.TTL.Microseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("put namespace %s: %w", ns.Name, err)
	}
	return nil
}

// GetNamespace implements memory.Store.
func (db *DB) GetNamespace(ctx context.Context, tenantID, name string) (memory.Namespace, error) {
	ns := memory.Namespace{TenantID: tenantID, Name: name}
	var ttl int64
	err := db.pool.QueryRow(ctx, `SELECT personal, sensitive, ttl_us FROM memory_namespaces WHERE tenant_id = $1 AND namespace = $2`,
		tenantID, name).Scan(&ns.Personal, &ns.Sensitive, &ttl)
	if errors.Is(err, pgx.ErrNoRows) {
		return ns, nil
	} else if err != nil {
		return memory.Namespace{}, fmt.Errorf("get namespace %s: %w", name, err)
	}
	ns.TTL = time.Duration(ttl) * time.Microsecond
	return ns, nil
}

// unconsentedSQL counts a namespace's live claims of status $3 without a
// consent basis: $1 tenant, $2 namespace.
const unconsentedSQL = `SELECT count(*) FROM memory_claims WHERE tenant_id = $1 AND namespace = $2
		AND status = $3 AND coalesce(consent_basis, '') = '' AND (expires_at IS NULL OR expires_at > now())`

// Unconsented implements memory.Store.
func (db *DB) Unconsented(ctx context.Context, tenantID, namespace string) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, unconsentedSQL, tenantID, namespace, string(memory.StatusCurrent)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count unconsented claims in %s: %w", namespace, err)
	}
	return n, nil
}

// ProjectionRows implements memory.Store.
func (db *DB) ProjectionRows(ctx context.Context, tenantID, subjectID string) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM memory_text WHERE tenant_id = $1 AND subject_id = $2)
		+ (SELECT count(*) FROM memory_vectors WHERE tenant_id = $1 AND subject_id = $2)`, tenantID, subjectID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count projection rows: %w", err)
	}
	return n, nil
}
