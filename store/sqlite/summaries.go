package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mementohq/memento/compact"
)

var _ compact.Store = (*Summaries)(nil)

// Summaries is the compact.Store of a DB (table summaries, migration
// 0010). It is a view of its own because compact.Store and session.Store
// both name a Get.
type Summaries struct{ db *DB }

// Summaries returns the summary store of db.
func (db *DB) Summaries() *Summaries { return &Summaries{db: db} }

// encodeSummary is the body column: the whole artifact; status, stale
// reason and time live in their columns, which win when reading.
func encodeSummary(x compact.Summary) (string, error) {
	b, err := json.Marshal(compact.Normalize(x))
	if err != nil {
		return "", fmt.Errorf("encode summary: %w", err)
	}
	return string(b), nil
}

func decodeSummary(body, status, reason string, staleAt sql.NullInt64, created int64) (compact.Summary, error) {
	var x compact.Summary
	if err := json.Unmarshal([]byte(body), &x); err != nil {
		return compact.Summary{}, fmt.Errorf("decode summary: %w", err)
	}
	x.Status, x.StaleReason, x.StaleAt = compact.Status(status), reason, nil
	if staleAt.Valid {
		t := fromMicros(staleAt.Int64)
		x.StaleAt = &t
	}
	x.CreatedAt = fromMicros(created)
	return compact.Normalize(x), nil
}

const summaryCols = `body, status, stale_reason, stale_at, created_at`

// Put inserts x and supersedes x.Supersedes in one transaction.
func (v *Summaries) Put(ctx context.Context, x compact.Summary) error {
	body, err := encodeSummary(x)
	if err != nil {
		return err
	}
	var staleAt sql.NullInt64
	if x.StaleAt != nil {
		staleAt = sql.NullInt64{Int64: x.StaleAt.UnixMicro(), Valid: true}
	}
	err = v.db.writeTx(ctx, func(tx *sql.Tx) error {
		if x.Supersedes != "" {
			// First, so the new current row does not clash with the old one.
			if _, err := tx.ExecContext(ctx, `UPDATE summaries SET status = 'superseded' WHERE tenant_id = ? AND summary_id = ?`, x.TenantID, x.Supersedes); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO summaries (tenant_id, summary_id, owner_kind, owner_id, from_seq, to_seq, status, stale_reason, stale_at, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			x.TenantID, x.SummaryID, string(x.Owner.Kind), x.Owner.ID, x.Covers.FromSeq, x.Covers.ToSeq, string(x.Status), x.StaleReason, staleAt, body, x.CreatedAt.UnixMicro())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return compact.ErrAlreadyExists // rolls back the supersede too
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put summary %s: %w", x.SummaryID, err)
	}
	return nil
}

// Get returns one summary.
func (v *Summaries) Get(ctx context.Context, tenantID, summaryID string) (compact.Summary, error) {
	var (
		body, status, reason string
		staleAt              sql.NullInt64
		created              int64
	)
	err := v.db.r.QueryRowContext(ctx, `SELECT `+summaryCols+` FROM summaries WHERE tenant_id = ? AND summary_id = ?`, tenantID, summaryID).
		Scan(&body, &status, &reason, &staleAt, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return compact.Summary{}, fmt.Errorf("get summary %s: %w", summaryID, compact.ErrNotFound)
	}
	if err != nil {
		return compact.Summary{}, fmt.Errorf("get summary %s: %w", summaryID, err)
	}
	return decodeSummary(body, status, reason, staleAt, created)
}

// List returns a page of the owner's summaries in range order.
func (v *Summaries) List(ctx context.Context, tenantID string, owner compact.Owner, q compact.ListQuery) ([]compact.Summary, error) {
	if q.Limit <= 0 {
		q.Limit = compact.DefaultListLimit
	}
	query := `SELECT ` + summaryCols + ` FROM summaries
		WHERE tenant_id = ? AND owner_kind = ? AND owner_id = ? AND (from_seq, summary_id) > (?, ?)`
	args := []any{tenantID, string(owner.Kind), owner.ID, q.AfterFromSeq, q.AfterID}
	if q.Status != "" {
		query += ` AND status = ?`
		args = append(args, string(q.Status))
	}
	rows, err := v.db.r.QueryContext(ctx, query+` ORDER BY from_seq, summary_id LIMIT ?`, append(args, q.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	defer rows.Close()
	var out []compact.Summary
	for rows.Next() {
		var (
			body, status, reason string
			staleAt              sql.NullInt64
			created              int64
		)
		if err := rows.Scan(&body, &status, &reason, &staleAt, &created); err != nil {
			return nil, fmt.Errorf("list summaries: %w", err)
		}
		x, err := decodeSummary(body, status, reason, staleAt, created)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	return out, nil
}

// MarkStale marks a summary stale unless it is superseded.
func (v *Summaries) MarkStale(ctx context.Context, tenantID, summaryID, reason string, at time.Time) (compact.Summary, error) {
	var (
		body, status, rsn string
		staleAt           sql.NullInt64
		created           int64
	)
	err := v.db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE summaries SET status = 'stale', stale_reason = ?, stale_at = ?
			WHERE tenant_id = ? AND summary_id = ? AND status <> 'superseded'`, reason, at.UnixMicro(), tenantID, summaryID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT `+summaryCols+` FROM summaries WHERE tenant_id = ? AND summary_id = ?`, tenantID, summaryID).
			Scan(&body, &status, &rsn, &staleAt, &created)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return compact.Summary{}, fmt.Errorf("mark summary %s stale: %w", summaryID, compact.ErrNotFound)
	}
	if err != nil {
		return compact.Summary{}, fmt.Errorf("mark summary %s stale: %w", summaryID, err)
	}
	return decodeSummary(body, status, rsn, staleAt, created)
}

// DeleteOwner deletes every summary of the owner.
func (v *Summaries) DeleteOwner(ctx context.Context, tenantID string, owner compact.Owner) (int, error) {
	var n int64
	err := v.db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM summaries WHERE tenant_id = ? AND owner_kind = ? AND owner_id = ?`, tenantID, string(owner.Kind), owner.ID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete summaries of %s %s: %w", owner.Kind, owner.ID, err)
	}
	return int(n), nil
}
