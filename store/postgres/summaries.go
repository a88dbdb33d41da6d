package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/compact"
)

var _ compact.Store = (*Summaries)(nil)

// Summaries is the compact.Store of a DB (table summaries, migration
// 0010). It is a view of its own because compact.Store and session.Store
// both name a Get.
type Summaries struct{ db *DB }

// Summaries returns the summary store of db.
func (db *DB) Summaries() *Summaries { return &Summaries{db: db} }

const summaryCols = `body, status, stale_reason, stale_at, created_at`

// scanSummary reads summaryCols; status, stale reason and time come from
// their columns, which win over what body says.
func scanSummary(row pgx.Row) (compact.Summary, error) {
	var (
		body, status, reason string
		staleAt              *time.Time
		created              time.Time
	)
	if err := row.Scan(&body, &status, &reason, &staleAt, &created); err != nil {
		return compact.Summary{}, err
	}
	var x compact.Summary
	if err := json.Unmarshal([]byte(body), &x); err != nil {
		return compact.Summary{}, fmt.Errorf("decode summary: %w", err)
	}
	x.Status, x.StaleReason, x.StaleAt = compact.Status(status), reason, nil
	if staleAt != nil {
		t := staleAt.UTC()
		x.StaleAt = &t
	}
	x.CreatedAt = created.UTC()
	return compact.Normalize(x), nil
}

// Put inserts x and supersedes x.Supersedes in one transaction.
func (v *Summaries) Put(ctx context.Context, x compact.Summary) error {
	b, err := json.Marshal(compact.Normalize(x))
	if err != nil {
		return fmt.Errorf("put summary %s: encode: %w", x.SummaryID, err)
	}
	err = pgx.BeginFunc(ctx, v.db.pool, func(tx pgx.Tx) error {
		if x.Supersedes != "" {
			// First, so the new current row does not clash with the old one.
			if _, err := tx.Exec(ctx, `UPDATE summaries SET status = 'superseded' WHERE tenant_id = $1 AND summary_id = $2`, x.TenantID, x.Supersedes); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO summaries (tenant_id, summary_id, owner_kind, owner_id, from_seq, to_seq, status, stale_reason, stale_at, body, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
			x.TenantID, x.SummaryID, string(x.Owner.Kind), x.Owner.ID, x.Covers.FromSeq, x.Covers.ToSeq, string(x.Status), x.StaleReason, x.StaleAt, string(b), x.CreatedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
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
	x, err := scanSummary(v.db.pool.QueryRow(ctx, `SELECT `+summaryCols+` FROM summaries WHERE tenant_id = $1 AND summary_id = $2`, tenantID, summaryID))
	if errors.Is(err, pgx.ErrNoRows) {
		return compact.Summary{}, fmt.Errorf("get summary %s: %w", summaryID, compact.ErrNotFound)
	}
	if err != nil {
		return compact.Summary{}, fmt.Errorf("get summary %s: %w", summaryID, err)
	}
	return x, nil
}

// List returns a page of the owner's summaries in range order.
func (v *Summaries) List(ctx context.Context, tenantID string, owner compact.Owner, q compact.ListQuery) ([]compact.Summary, error) {
	if q.Limit <= 0 {
		q.Limit = compact.DefaultListLimit
	}
	rows, err := v.db.pool.Query(ctx, `SELECT `+summaryCols+` FROM summaries
		WHERE tenant_id = $1 AND owner_kind = $2 AND owner_id = $3 AND (from_seq, summary_id) > ($4::bigint, $5::text)
		  AND ($6 = '' OR status = $6)
		ORDER BY from_seq, summary_id LIMIT $7`,
		tenantID, string(owner.Kind), owner.ID, q.AfterFromSeq, q.AfterID, string(q.Status), q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (compact.Summary, error) { return scanSummary(r) })
	if err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	return out, nil
}

// MarkStale marks a summary stale unless it is superseded, in one statement.
func (v *Summaries) MarkStale(ctx context.Context, tenantID, summaryID, reason string, at time.Time) (compact.Summary, error) {
	x, err := scanSummary(v.db.pool.QueryRow(ctx, `WITH u AS (
			UPDATE summaries SET status = 'stale', stale_reason = $3, stale_at = $4
			WHERE tenant_id = $1 AND summary_id = $2 AND status <> 'superseded'
			RETURNING `+summaryCols+`
		)
		SELECT `+summaryCols+` FROM u
		UNION ALL
		SELECT `+summaryCols+` FROM summaries WHERE tenant_id = $1 AND summary_id = $2 AND NOT EXISTS (SELECT 1 FROM u)`,
		tenantID, summaryID, reason, at))
	if errors.Is(err, pgx.ErrNoRows) {
		return compact.Summary{}, fmt.Errorf("mark summary %s stale: %w", summaryID, compact.ErrNotFound)
	}
	if err != nil {
		return compact.Summary{}, fmt.Errorf("mark summary %s stale: %w", summaryID, err)
	}
	return x, nil
}

// DeleteOwner deletes every summary of the owner.
func (v *Summaries) DeleteOwner(ctx context.Context, tenantID string, owner compact.Owner) (int, error) {
	tag, err := v.db.pool.Exec(ctx, `DELETE FROM summaries WHERE tenant_id = $1 AND owner_kind = $2 AND owner_id = $3`, tenantID, string(owner.Kind), owner.ID)
	if err != nil {
		return 0, fmt.Errorf("delete summaries of %s %s: %w", owner.Kind, owner.ID, err)
	}
	return int(tag.RowsAffected()), nil
}
