package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/internal/memsql"
)

var _ memory.Store = (*DB)(nil)

const claimColumns = `tenant_id, memory_id, subject_id, namespace, key, value, schema_version, text,
	category, provenance, confidence, valid_from, expires_at, status, invalidated_at, reason,
	supersedes, superseded_by, superseded_at, consent_basis, value_digest, created_at,
	confirmed_at, confirmations, version`

func microsOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func timeOrNil(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMicros(n.Int64)
	return &t
}

func scanClaim(sc rowScanner) (memory.Claim, error) {
	var (
		c                         memory.Claim
		value, prov, status       string
		validFrom, created, conf  int64
		expires, invalidated, sup sql.NullInt64
	)
	err := sc.Scan(&c.TenantID, &c.MemoryID, &c.SubjectID, &c.Namespace, &c.Key, &value, &c.SchemaVersion, &c.Text,
		&c.Category, &prov, &c.Confidence, &validFrom, &expires, &status, &invalidated, &c.InvalidationReason,
		&c.Supersedes, &c.SupersededBy, &sup, &c.ConsentBasis, &c.ValueDigest, &created,
		&conf, &c.Confirmations, &c.Version)
	if err != nil {
		return memory.Claim{}, err
	}
	if err := json.Unmarshal([]byte(prov), &c.Provenance); err != nil {
		return memory.Claim{}, fmt.Errorf("decode provenance of claim %s: %w", c.MemoryID, err)
	}
	c.Value = json.RawMessage(value)
	c.Status = memory.Status(status)
	c.ValidFrom, c.CreatedAt, c.ConfirmedAt = fromMicros(validFrom), fromMicros(created), fromMicros(conf)
	c.ExpiresAt, c.InvalidatedAt, c.SupersededAt = timeOrNil(expires), timeOrNil(invalidated), timeOrNil(sup)
	return c, nil
}

func scanClaims(rows *sql.Rows) ([]memory.Claim, error) {
	defer rows.Close()
	var out []memory.Claim
	for rows.Next() {
		c, err := scanClaim(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func getClaim(ctx context.Context, q querier, tenantID, memoryID string) (memory.Claim, error) {
	c, err := scanClaim(q.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM memory_claims WHERE tenant_id = ? AND memory_id = ?`, tenantID, memoryID))
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Claim{}, memory.ErrNotFound
	}
	return c, err
}

// bumpSubject moves the subject's change counter on and returns it.
func bumpSubject(ctx context.Context, tx wtx, tenantID, subjectID string) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, `INSERT INTO memory_subjects (tenant_id, subject_id, version) VALUES (?, ?, 1)
		ON CONFLICT (tenant_id, subject_id) DO UPDATE SET version = version + 1 RETURNING version`, tenantID, subjectID).Scan(&v)
	return v, err
}

// dropProjections deletes a claim's full-text and vector rows; the caller
// sets its fts_rowid to NULL.
func dropProjections(ctx context.Context, tx wtx, tenantID, memoryID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_fts WHERE rowid =
		(SELECT fts_rowid FROM memory_claims WHERE tenant_id = ? AND memory_id = ?)`, tenantID, memoryID); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM memory_vectors WHERE tenant_id = ? AND memory_id = ?`, tenantID, memoryID)
	return err
}

// ftsRow is the scope and body columns of c's full-text row: the body's
// tokens carry the subject's scope as a prefix (see migration 0009).
func ftsRow(c memory.Claim) (scope, body string) {
	s := memsql.SubjectScope(c.TenantID, c.SubjectID)
	var b strings.Builder
	for _, t := range memsql.Tokens(c.Text) {
		b.WriteString(s)
		b.WriteString(t)
		b.WriteByte(' ')
	}
	return s + " " + memsql.NamespaceScope(c.TenantID, c.SubjectID, c.Namespace), b.String()
}

// indexText writes c's full-text row and returns its rowid.
func indexText(ctx context.Context, tx wtx, c memory.Claim) (int64, error) {
	scope, body := ftsRow(c)
	res, err := tx.ExecContext(ctx, `INSERT INTO memory_fts (scope, body, tenant_id, memory_id) VALUES (?, ?, ?, ?)`,
		scope, body, c.TenantID, c.MemoryID)
	if err != nil {
		return 0, fmt.Errorf("index text: %w", err)
	}
	return res.LastInsertId()
}

// addProjections writes the full-text row of a stored claim that became
// current and, when vec is set, its vector.
func addProjections(ctx context.Context, tx wtx, c memory.Claim, vec *memory.Vector, version int64) error {
	rowid, err := indexText(ctx, tx, c)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE memory_claims SET fts_rowid = ? WHERE tenant_id = ? AND memory_id = ?`,
		rowid, c.TenantID, c.MemoryID); err != nil {
		return err
	}
	if vec == nil {
		return nil
	}
	return putVector(ctx, tx, c, *vec, version)
}

func putVector(ctx context.Context, tx wtx, c memory.Claim, v memory.Vector, version int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO memory_vectors (tenant_id, memory_id, model, subject_id, namespace, dim, vec, expires_at, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, memory_id, model) DO UPDATE SET dim = excluded.dim, vec = excluded.vec,
			namespace = excluded.namespace, expires_at = excluded.expires_at, version = excluded.version`,
		c.TenantID, c.MemoryID, v.Model, c.SubjectID, c.Namespace, len(v.Values), memsql.EncodeVector(v.Values),
		microsOrNil(c.ExpiresAt), version)
	if err != nil {
		return fmt.Errorf("store vector: %w", err)
	}
	return nil
}

// checkSlot refuses a current claim beside another current claim of its
// (subject, namespace, key) other than the one it supersedes.
func checkSlot(ctx context.Context, tx wtx, c memory.Claim, supersede string) error {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT memory_id FROM memory_claims WHERE tenant_id = ? AND subject_id = ?
		AND namespace = ? AND key = ? AND status = 'current' AND memory_id <> ? AND memory_id <> ?`,
		c.TenantID, c.SubjectID, c.Namespace, c.Key, c.MemoryID, supersede).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("claim %s is current for the key: %w", id, memory.ErrConflict)
}

// supersedeClaim ends old (when set), which must be a current claim of
// subjectID, in favour of newID.
func supersedeClaim(ctx context.Context, tx wtx, tenantID, subjectID, old, newID string, at time.Time, version int64) error {
	if old == "" {
		return nil
	}
	if err := dropProjections(ctx, tx, tenantID, old); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE memory_claims SET status = 'superseded', superseded_by = ?, superseded_at = ?, version = ?,
		fts_rowid = NULL WHERE tenant_id = ? AND memory_id = ? AND subject_id = ? AND status = 'current'`,
		newID, at.UnixMicro(), version, tenantID, old, subjectID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("claim %s to supersede is not a current claim of the subject: %w", old, memory.ErrConflict)
	}
	return nil
}

// Insert implements memory.Store.
func (db *DB) Insert(ctx context.Context, p memory.InsertParams) (memory.Claim, error) {
	c := p.Claim
	if c.TenantID == "" || c.SubjectID == "" || c.MemoryID == "" {
		return memory.Claim{}, fmt.Errorf("insert claim: tenant, subject and memory id are required: %w", memory.ErrInvalidInput)
	}
	var out memory.Claim
	err := db.memoryTx(ctx, func(tx wtx) error {
		var err error
		out, err = insertTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return memory.Claim{}, fmt.Errorf("insert claim %s: %w", c.MemoryID, err)
	}
	return out, nil
}

// InsertBatch implements memory.BatchInserter: insertTx of each in one
// write transaction, so one commit (one fsync) per batch.
func (db *DB) InsertBatch(ctx context.Context, ps []memory.InsertParams) ([]memory.Claim, error) {
	for _, p := range ps {
		if c := p.Claim; c.TenantID == "" || c.SubjectID == "" || c.MemoryID == "" {
			return nil, fmt.Errorf("insert claims: tenant, subject and memory id are required: %w", memory.ErrInvalidInput)
		}
	}
	out := make([]memory.Claim, 0, len(ps))
	err := db.memoryTx(ctx, func(tx wtx) error {
		for _, p := range ps {
			c, err := insertTx(ctx, tx, p)
			if err != nil {
				return fmt.Errorf("claim %s: %w", p.Claim.MemoryID, err)
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d claims: %w", len(ps), err)
	}
	return out, nil
}

// insertTx is Insert within a write transaction, in as few statements as
// the rules allow: the claims' primary key refuses a taken id and the
// unique index of current claims a second current claim of a key, and the
// claim is returned as written, not read back.
func insertTx(ctx context.Context, tx wtx, p memory.InsertParams) (memory.Claim, error) {
	c := p.Claim
	if p.Supersede != "" {
		c.Supersedes = p.Supersede
	}
	prov, err := json.Marshal(c.Provenance)
	if err != nil {
		return memory.Claim{}, fmt.Errorf("encode provenance: %w", err)
	}
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM memory_tombstones WHERE tenant_id = ? AND subject_id = ? AND namespace = ?
		AND key = ? AND value_digest IN (?, ?) LIMIT 1`, c.TenantID, c.SubjectID, c.Namespace, c.Key, c.ValueDigest, cmp.Or(p.LegacyDigest, c.ValueDigest)).Scan(&one)
	if err == nil {
		return memory.Claim{}, memory.ErrTombstoned
	} else if !errors.Is(err, sql.ErrNoRows) {
		return memory.Claim{}, err
	}
	if err := checkConsent(ctx, tx, c); err != nil {
		return memory.Claim{}, err
	}
	version, err := bumpSubject(ctx, tx, c.TenantID, c.SubjectID)
	if err != nil {
		return memory.Claim{}, err
	}
	if err := supersedeClaim(ctx, tx, c.TenantID, c.SubjectID, p.Supersede, c.MemoryID, p.SupersededAt, version); err != nil {
		return memory.Claim{}, err
	}
	var rowid any // NULL unless current
	if c.Status == memory.StatusCurrent {
		if rowid, err = indexText(ctx, tx, c); err != nil {
			return memory.Claim{}, err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO memory_claims (`+claimColumns+`, fts_rowid)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.TenantID, c.MemoryID, c.SubjectID, c.Namespace, c.Key, string(c.Value), c.SchemaVersion, c.Text,
		c.Category, string(prov), c.Confidence, c.ValidFrom.UnixMicro(), microsOrNil(c.ExpiresAt), string(c.Status),
		microsOrNil(c.InvalidatedAt), c.InvalidationReason, c.Supersedes, c.SupersededBy, microsOrNil(c.SupersededAt),
		c.ConsentBasis, c.ValueDigest, c.CreatedAt.UnixMicro(), c.ConfirmedAt.UnixMicro(), c.Confirmations, version, rowid); err != nil {
		if isConstraint(err) {
			return memory.Claim{}, fmt.Errorf("the id is taken, or another claim is current for the key: %w", memory.ErrConflict)
		}
		return memory.Claim{}, err
	}
	if c.Status == memory.StatusCurrent && p.Vector != nil {
		if err := putVector(ctx, tx, c, *p.Vector, version); err != nil {
			return memory.Claim{}, err
		}
	}
	c.Version = version
	return memsql.AsStored(c), nil
}

// Get implements memory.Store.
func (db *DB) Get(ctx context.Context, tenantID, memoryID string) (memory.Claim, error) {
	c, err := getClaim(ctx, db.rd(), tenantID, memoryID)
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
	ids, err := json.Marshal(memoryIDs)
	if err != nil {
		return nil, fmt.Errorf("get claims: %w", err)
	}
	rows, err := db.rd().QueryContext(ctx, `SELECT `+claimColumns+` FROM memory_claims WHERE tenant_id = ?
		AND memory_id IN (SELECT value FROM json_each(?))`, tenantID, string(ids))
	if err != nil {
		return nil, fmt.Errorf("get claims: %w", err)
	}
	out, err := scanClaims(rows)
	if err != nil {
		return nil, fmt.Errorf("get claims: %w", err)
	}
	return out, nil
}

// liveAtSQL is Claim.LiveAt as a condition on one time parameter, given five times.
const liveAtSQL = `status NOT IN ('held', 'rejected') AND valid_from <= ?
	AND (superseded_at IS NULL OR superseded_at > ?) AND (invalidated_at IS NULL OR invalidated_at > ?)
	AND (expires_at IS NULL OR expires_at > ?)`

// List implements memory.Store.
func (db *DB) List(ctx context.Context, q memory.ListQuery) ([]memory.Claim, error) {
	if q.TenantID == "" || q.SubjectID == "" {
		return nil, fmt.Errorf("list claims: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	var (
		where strings.Builder
		args  = []any{q.TenantID, q.SubjectID}
	)
	where.WriteString(`tenant_id = ? AND subject_id = ?`)
	if q.Namespace != "" {
		where.WriteString(` AND namespace = ?`)
		args = append(args, q.Namespace)
	}
	if q.Key != "" {
		where.WriteString(` AND key = ?`)
		args = append(args, q.Key)
	}
	if len(q.Statuses) == 1 && q.Statuses[0].Known() {
		// A literal, so the partial indexes (current claims, held claims) serve the read.
		where.WriteString(` AND status = '` + string(q.Statuses[0]) + `'`)
	} else if len(q.Statuses) > 0 {
		st, _ := json.Marshal(q.Statuses)
		where.WriteString(` AND status IN (SELECT value FROM json_each(?))`)
		args = append(args, string(st))
	}
	if q.LiveAt != nil {
		t := q.LiveAt.UnixMicro()
		if q.AsOf {
			where.WriteString(` AND ` + liveAtSQL)
			args = append(args, t, t, t, t)
		} else {
			where.WriteString(` AND status = 'current' AND (expires_at IS NULL OR expires_at > ?)`)
			args = append(args, t)
		}
	}
	if q.MaxSchemaVersion > 0 {
		where.WriteString(` AND schema_version <= ?`)
		args = append(args, q.MaxSchemaVersion)
	}
	if !q.AfterCreated.IsZero() || q.AfterID != "" {
		where.WriteString(` AND (created_at, memory_id) > (?, ?)`)
		args = append(args, q.AfterCreated.UnixMicro(), q.AfterID)
	}
	limit := -1
	if q.Limit > 0 {
		limit = q.Limit
	}
	args = append(args, limit)
	rows, err := db.rd().QueryContext(ctx, `SELECT `+claimColumns+` FROM memory_claims WHERE `+where.String()+`
		ORDER BY created_at, memory_id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	out, err := scanClaims(rows)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	return out, nil
}

// Transition implements memory.Store.
func (db *DB) Transition(ctx context.Context, p memory.TransitionParams) (memory.Claim, error) {
	var out memory.Claim
	err := db.memoryTx(ctx, func(tx wtx) error {
		c, err := getClaim(ctx, tx, p.TenantID, p.MemoryID)
		if err != nil {
			return err
		}
		if !slices.Contains(p.From, c.Status) {
			return fmt.Errorf("it is %s, not one of %v: %w", c.Status, p.From, memory.ErrConflict)
		}
		wasCurrent := c.Status == memory.StatusCurrent
		becomes := p.To == memory.StatusCurrent && !wasCurrent
		leaves := wasCurrent && p.To != memory.StatusCurrent
		supersede := ""
		if becomes {
			if err := checkConsent(ctx, tx, c); err != nil {
				return err
			}
			supersede = p.Supersede
			if err := checkSlot(ctx, tx, c, supersede); err != nil {
				return err
			}
		}
		version, err := bumpSubject(ctx, tx, c.TenantID, c.SubjectID)
		if err != nil {
			return err
		}
		// The old claim leaves the key's current slot before this one takes it.
		if err := supersedeClaim(ctx, tx, p.TenantID, c.SubjectID, supersede, p.MemoryID, p.SupersededAt, version); err != nil {
			return err
		}
		set, args := `status = ?, version = ?`, []any{string(p.To), version}
		if p.To == memory.StatusInvalidated {
			set += `, invalidated_at = ?, reason = ?`
			args = append(args, p.At.UnixMicro(), p.Reason)
		}
		if supersede != "" {
			set += `, supersedes = ?`
			args = append(args, supersede)
		}
		if leaves {
			if err := dropProjections(ctx, tx, p.TenantID, p.MemoryID); err != nil {
				return err
			}
			set += `, fts_rowid = NULL`
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memory_claims SET `+set+` WHERE tenant_id = ? AND memory_id = ?`,
			append(args, p.TenantID, p.MemoryID)...); err != nil {
			return err
		}
		if becomes {
			if err := addProjections(ctx, tx, c, p.Vector, version); err != nil {
				return err
			}
		}
		out, err = getClaim(ctx, tx, p.TenantID, p.MemoryID)
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
	err := db.memoryTx(ctx, func(tx wtx) error {
		c, err := getClaim(ctx, tx, tenantID, memoryID)
		if err != nil {
			return err
		}
		if c.Status != memory.StatusCurrent {
			return fmt.Errorf("it is %s: %w", c.Status, memory.ErrConflict)
		}
		version, err := bumpSubject(ctx, tx, tenantID, c.SubjectID)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memory_claims SET confirmed_at = ?, confirmations = confirmations + 1, version = ?
			WHERE tenant_id = ? AND memory_id = ?`, at.UnixMicro(), version, tenantID, memoryID); err != nil {
			return err
		}
		out, err = getClaim(ctx, tx, tenantID, memoryID)
		return err
	})
	if err != nil {
		return memory.Claim{}, fmt.Errorf("refresh claim %s: %w", memoryID, err)
	}
	return out, nil
}

// Forget implements memory.Store. The full-text rows go by their scope
// token, not through the claims, so a row a past bug left behind goes too.
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
		rec.CreatedAt = db.now()
	}
	rec.CreatedAt = fromMicros(rec.CreatedAt.UnixMicro())
	err := db.memoryTx(ctx, func(tx wtx) error {
		scope, nsCond, args := `scope:`+memsql.SubjectScope(p.TenantID, p.SubjectID), ``, []any{p.TenantID, p.SubjectID}
		if p.Namespace != "" {
			scope += ` AND scope:` + memsql.NamespaceScope(p.TenantID, p.SubjectID, p.Namespace)
			nsCond = ` AND namespace = ?`
			args = append(args, p.Namespace)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_fts WHERE rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)`, scope); err != nil {
			return fmt.Errorf("delete full text: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_vectors WHERE tenant_id = ? AND subject_id = ?`+nsCond, args...); err != nil {
			return fmt.Errorf("delete vectors: %w", err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO memory_tombstones (tenant_id, subject_id, namespace, key, value_digest, created_at)
			SELECT DISTINCT tenant_id, subject_id, namespace, key, value_digest, ? FROM memory_claims
			WHERE tenant_id = ? AND subject_id = ?`+nsCond+` ON CONFLICT DO NOTHING`, append([]any{rec.CreatedAt.UnixMicro()}, args...)...)
		if err != nil {
			return fmt.Errorf("write tombstones: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		rec.Tombstones = int(n)
		res, err = tx.ExecContext(ctx, `DELETE FROM memory_claims WHERE tenant_id = ? AND subject_id = ?`+nsCond, args...)
		if err != nil {
			return fmt.Errorf("delete claims: %w", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		rec.Claims = int(n)
		if rec.Claims > 0 {
			v, err := bumpSubject(ctx, tx, p.TenantID, p.SubjectID)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE memory_subjects SET forgotten = ? WHERE tenant_id = ? AND subject_id = ?`,
				v, p.TenantID, p.SubjectID); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO memory_forgets (tenant_id, forget_id, subject_id, namespace, reason, claims, tombstones, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, rec.TenantID, rec.ForgetID, rec.SubjectID, rec.Namespace, rec.Reason,
			rec.Claims, rec.Tombstones, rec.CreatedAt.UnixMicro())
		if err != nil {
			return fmt.Errorf("write the forget record: %w", err)
		}
		return nil
	})
	if err != nil {
		return memory.ForgetRecord{}, fmt.Errorf("forget subject %s: %w", p.SubjectID, err)
	}
	if rec.Claims > 0 {
		// secure_delete zeroed the rows in the database's pages; the WAL
		// still holds page images with them until it is checkpointed and
		// truncated. Best effort: a reader that holds an old snapshot
		// keeps its frames until the next forget or checkpoint.
		_, _ = db.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	return rec, nil
}

// Tombstones implements memory.Store.
func (db *DB) Tombstones(ctx context.Context, tenantID, subjectID string) ([]memory.Tombstone, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT tenant_id, subject_id, namespace, key, value_digest, created_at
		FROM memory_tombstones WHERE tenant_id = ? AND subject_id = ? ORDER BY created_at, namespace, key, value_digest`, tenantID, subjectID)
	if err != nil {
		return nil, fmt.Errorf("list tombstones: %w", err)
	}
	defer rows.Close()
	var out []memory.Tombstone
	for rows.Next() {
		var (
			ts memory.Tombstone
			at int64
		)
		if err := rows.Scan(&ts.TenantID, &ts.SubjectID, &ts.Namespace, &ts.Key, &ts.ValueDigest, &at); err != nil {
			return nil, fmt.Errorf("list tombstones: %w", err)
		}
		ts.CreatedAt = fromMicros(at)
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tombstones: %w", err)
	}
	return out, nil
}

// SearchText implements memory.Store with FTS5: the query's stemmed words,
// each prefixed with the subject's scope token and ORed, ranked by bm25()
// (the scope column weighed 0). A scoped token's posting list is the
// subject's alone, so the cost follows the subject's hits, not the table's,
// and the document frequencies are the subject's; only the average length
// and row count bm25() uses are the table's. The namespace is filtered on
// the claim row.
func (db *DB) SearchText(ctx context.Context, q memory.TextQuery) ([]memory.Scored, error) {
	if q.TenantID == "" || q.SubjectID == "" {
		return nil, fmt.Errorf("search claims: tenant and subject are required: %w", memory.ErrInvalidInput)
	}
	words := memsql.QueryTokens(q.Terms)
	if len(words) == 0 {
		return nil, nil
	}
	scope := memsql.SubjectScope(q.TenantID, q.SubjectID)
	for i, w := range words {
		words[i] = `"` + scope + w + `"` // letters and digits only: quoted, a plain token
	}
	match := `body:(` + strings.Join(words, " OR ") + `)`
	now := q.Now
	if now.IsZero() {
		now = db.now()
	}
	if q.Limit <= 0 {
		out, _, err := db.searchText(ctx, q, match, now, -1)
		return out, err
	}
	// The best hits are ranked inside FTS5 and only they are read from the
	// claims: reading every hit's claim costs more than ranking it. A few
	// more than asked for cover claims that expired but still have their
	// row; when the filters leave too few, the search runs uncut.
	fetch := 2*q.Limit + 16
	out, cut, err := db.searchText(ctx, q, match, now, fetch)
	if err == nil && cut && len(out) < q.Limit {
		out, _, err = db.searchText(ctx, q, match, now, -1)
	}
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, err
}

// searchText ranks the fetch best hits of match (all for -1), keeps those
// whose claims pass q's filters, and reports whether fetch cut the hits.
func (db *DB) searchText(ctx context.Context, q memory.TextQuery, match string, now time.Time, fetch int) ([]memory.Scored, bool, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT f.memory_id, h.r, c.memory_id IS NOT NULL
		FROM (SELECT rowid, bm25(memory_fts, 0.0, 1.0) AS r FROM memory_fts WHERE memory_fts MATCH ? ORDER BY r LIMIT ?) h
		JOIN memory_fts f ON f.rowid = h.rowid
		LEFT JOIN memory_claims c ON c.tenant_id = ? AND c.memory_id = f.memory_id AND c.subject_id = ?
			AND c.status = 'current' AND (c.expires_at IS NULL OR c.expires_at > ?) AND (? = '' OR c.namespace = ?)
		WHERE f.tenant_id = ?
		ORDER BY h.r, f.memory_id`, match, fetch, q.TenantID, q.SubjectID, now.UnixMicro(), q.Namespace, q.Namespace, q.TenantID)
	if err != nil {
		return nil, false, fmt.Errorf("search claims: %w", err)
	}
	defer rows.Close()
	var (
		out  []memory.Scored
		hits int
	)
	for rows.Next() {
		var (
			s    memory.Scored
			keep bool
		)
		if err := rows.Scan(&s.MemoryID, &s.Score, &keep); err != nil {
			return nil, false, fmt.Errorf("search claims: %w", err)
		}
		hits++
		if keep {
			s.Score = -s.Score // bm25() is lower-is-better
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("search claims: %w", err)
	}
	return out, fetch >= 0 && hits >= fetch, nil
}

// Vectors implements memory.Store. The rows and the version are read in one
// read transaction, so they are one snapshot.
func (db *DB) Vectors(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) ([]memory.Vector, int64, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("read vectors: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	version, err := subjectVersion(ctx, tx, tenantID, subjectID)
	if err != nil {
		return nil, 0, fmt.Errorf("read vectors: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT memory_id, namespace, model, dim, vec, expires_at, version FROM memory_vectors
		WHERE tenant_id = ? AND subject_id = ? AND model = ? AND version > ? ORDER BY version, memory_id`,
		tenantID, subjectID, model, afterVersion)
	if err != nil {
		return nil, 0, fmt.Errorf("read vectors: %w", err)
	}
	defer rows.Close()
	var out []memory.Vector
	for rows.Next() {
		var (
			v       memory.Vector
			dim     int
			blob    []byte
			expires sql.NullInt64
		)
		if err := rows.Scan(&v.MemoryID, &v.Namespace, &v.Model, &dim, &blob, &expires, &v.Version); err != nil {
			return nil, 0, fmt.Errorf("read vectors: %w", err)
		}
		if v.Values, err = memsql.DecodeVector(blob, dim); err != nil {
			return nil, 0, fmt.Errorf("read vector of claim %s: %w", v.MemoryID, err)
		}
		v.ExpiresAt = timeOrNil(expires)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read vectors: %w", err)
	}
	return out, version, nil
}

// Changes implements memory.Store in one statement, so one snapshot.
func (db *DB) Changes(ctx context.Context, tenantID, subjectID, model string, afterVersion int64) (memory.Changes, error) {
	rows, err := db.rd().QueryContext(ctx, `
		SELECT 0, version, forgotten, '', '', '', NULL, '', NULL, 0 FROM memory_subjects WHERE tenant_id = ?1 AND subject_id = ?2
		UNION ALL
		SELECT 1, version, 0, memory_id, namespace, status, expires_at, CASE WHEN status = 'current' THEN text ELSE '' END, NULL, 0
			FROM memory_claims WHERE tenant_id = ?1 AND subject_id = ?2 AND version > ?3 AND (?3 > 0 OR status = 'current')
		UNION ALL
		SELECT 2, version, 0, memory_id, namespace, '', expires_at, '', vec, dim
			FROM memory_vectors WHERE ?4 <> '' AND tenant_id = ?1 AND subject_id = ?2 AND model = ?4 AND version > ?3`, tenantID, subjectID, afterVersion, model)
	if err != nil {
		return memory.Changes{}, fmt.Errorf("read changes of subject %s: %w", subjectID, err)
	}
	defer rows.Close()
	var out memory.Changes
	for rows.Next() {
		var (
			kind, dim      int
			version, forg  int64
			id, ns, st, tx string
			expires        sql.NullInt64
			blob           []byte
		)
		if err := rows.Scan(&kind, &version, &forg, &id, &ns, &st, &expires, &tx, &blob, &dim); err != nil {
			return memory.Changes{}, fmt.Errorf("read changes of subject %s: %w", subjectID, err)
		}
		switch kind {
		case 0:
			out.Version, out.Forgotten = version, forg
		case 1:
			out.Claims = append(out.Claims, memory.ClaimChange{MemoryID: id, Namespace: ns, Status: memory.Status(st), Text: tx, ExpiresAt: timeOrNil(expires), Version: version})
		case 2:
			vs, err := memsql.DecodeVector(blob, dim)
			if err != nil {
				return memory.Changes{}, fmt.Errorf("read vector of claim %s: %w", id, err)
			}
			out.Vectors = append(out.Vectors, memory.Vector{MemoryID: id, Namespace: ns, Model: model, Values: vs, ExpiresAt: timeOrNil(expires), Version: version})
		}
	}
	if err := rows.Err(); err != nil {
		return memory.Changes{}, fmt.Errorf("read changes of subject %s: %w", subjectID, err)
	}
	return out, nil
}

// MissingVectors implements memory.Store.
func (db *DB) MissingVectors(ctx context.Context, tenantID, subjectID, model string, limit int) ([]memory.Claim, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+claimColumns+` FROM memory_claims c WHERE tenant_id = ? AND subject_id = ?
		AND status = 'current' AND NOT EXISTS (SELECT 1 FROM memory_vectors v
			WHERE v.tenant_id = c.tenant_id AND v.memory_id = c.memory_id AND v.model = ?)
		ORDER BY created_at, memory_id LIMIT ?`, tenantID, subjectID, model, limit)
	if err != nil {
		return nil, fmt.Errorf("list claims without vectors: %w", err)
	}
	out, err := scanClaims(rows)
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
	err := db.memoryTx(ctx, func(tx wtx) error {
		var (
			claims []memory.Claim
			keep   []memory.Vector
		)
		for _, v := range vs {
			c, err := getClaim(ctx, tx, tenantID, v.MemoryID)
			if errors.Is(err, memory.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if c.SubjectID == subjectID && c.Status == memory.StatusCurrent {
				claims, keep = append(claims, c), append(keep, v)
			}
		}
		if len(keep) == 0 {
			return nil
		}
		version, err := bumpSubject(ctx, tx, tenantID, subjectID)
		if err != nil {
			return err
		}
		for i, v := range keep {
			if err := putVector(ctx, tx, claims[i], v, version); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put vectors of subject %s: %w", subjectID, err)
	}
	return nil
}

func subjectVersion(ctx context.Context, q querier, tenantID, subjectID string) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT version FROM memory_subjects WHERE tenant_id = ? AND subject_id = ?`, tenantID, subjectID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// SubjectVersion implements memory.Store.
func (db *DB) SubjectVersion(ctx context.Context, tenantID, subjectID string) (int64, error) {
	v, err := subjectVersion(ctx, db.rd(), tenantID, subjectID)
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
	err := db.memoryTx(ctx, func(tx wtx) error {
		if ns.Personal {
			// In the write transaction (writes are serialized), so no claim
			// without consent lands between the count and the declaration.
			var n int
			if err := tx.QueryRowContext(ctx, unconsentedSQL, ns.TenantID, ns.Name, string(memory.StatusCurrent), time.Now().UnixMicro()).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("it holds %d current claims without a consent basis: %w", n, memory.ErrNoConsent)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO memory_namespaces (tenant_id, namespace, personal, sensitive, ttl_us) VALUES (?, ?, ?, ?, ?)
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
	err := db.rd().QueryRowContext(ctx, `SELECT personal, sensitive, ttl_us FROM memory_namespaces WHERE tenant_id = ? AND namespace = ?`,
		tenantID, name).Scan(&ns.Personal, &ns.Sensitive, &ttl)
	if errors.Is(err, sql.ErrNoRows) {
		return ns, nil
	} else if err != nil {
		return memory.Namespace{}, fmt.Errorf("get namespace %s: %w", name, err)
	}
	ns.TTL = time.Duration(ttl) * time.Microsecond
	return ns, nil
}

// unconsentedSQL counts a namespace's live claims of a status without a
// consent basis: tenant, namespace, status, now (µs).
const unconsentedSQL = `SELECT count(*) FROM memory_claims WHERE tenant_id = ? AND namespace = ?
		AND status = ? AND coalesce(consent_basis, '') = '' AND (expires_at IS NULL OR expires_at > ?)`

// checkConsent refuses, in a write transaction, a claim without a consent
// basis in a namespace declared personal: the service read the policy
// before; a declaration (another instance's) may have come in between.
func checkConsent(ctx context.Context, tx wtx, c memory.Claim) error {
	if strings.TrimSpace(c.ConsentBasis) != "" {
		return nil
	}
	var personal bool
	err := tx.QueryRowContext(ctx, `SELECT personal FROM memory_namespaces WHERE tenant_id = ? AND namespace = ?`, c.TenantID, c.Namespace).Scan(&personal)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	if personal {
		return fmt.Errorf("namespace %s: %w", c.Namespace, memory.ErrNoConsent)
	}
	return nil
}

// Unconsented implements memory.Store.
func (db *DB) Unconsented(ctx context.Context, tenantID, namespace string) (int, error) {
	var n int
	err := db.rd().QueryRowContext(ctx, unconsentedSQL, tenantID, namespace, string(memory.StatusCurrent), time.Now().UnixMicro()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count unconsented claims in %s: %w", namespace, err)
	}
	return n, nil
}

// ProjectionRows implements memory.Store. Full-text rows are counted by
// their scope token, whether or not a claim still points at them.
func (db *DB) ProjectionRows(ctx context.Context, tenantID, subjectID string) (int, error) {
	var text, vecs int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?`,
		`scope:`+memsql.SubjectScope(tenantID, subjectID)).Scan(&text); err != nil {
		return 0, fmt.Errorf("count projection rows: %w", err)
	}
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM memory_vectors WHERE tenant_id = ? AND subject_id = ?`,
		tenantID, subjectID).Scan(&vecs); err != nil {
		return 0, fmt.Errorf("count projection rows: %w", err)
	}
	return text + vecs, nil
}
