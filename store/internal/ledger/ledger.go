// Package ledger is the operation ledger and approvals (toolop.Store) over
// SQL, shared by the SQLite and PostgreSQL stores. The statements, row
// scanning, keyset pages, transition and decision logic and their errors live
// here; each backend supplies only its Dialect (driver, placeholders, how a
// time is stored). Wake-ups are written by the backends' triggers on these
// same statements (UPDATE OF status, INSERT), so they need no code here.
package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mementohq/memento/toolop"
)

// Row is one result row.
type Row interface{ Scan(dest ...any) error }

// Rows is a result set; Next returns false at the end or on an error (Err).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Dialect is what a SQL backend supplies. A missing row is reported by
// Row.Scan as an error matching sql.ErrNoRows (database/sql does, and so
// does pgx.ErrNoRows).
type Dialect interface {
	// QueryRow runs a read-only statement that returns at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// WriteRow runs a statement that changes data and returns at most one
	// row (INSERT or UPDATE ... RETURNING).
	WriteRow(ctx context.Context, query string, args ...any) Row
	// Query runs a read-only statement that returns rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// Placeholder is the text of the n-th (1-based) statement parameter.
	Placeholder(n int) string
	// TimeArg encodes t as a statement argument of a time column.
	TimeArg(t time.Time) any
	// TimeDest is a scan destination that decodes a NOT NULL time column into t.
	TimeDest(t *time.Time) any
	// NullTimeDest is a scan destination that decodes a nullable time column
	// into t (nil for NULL).
	NullTimeDest(t **time.Time) any
}

// Store implements toolop.Store over a Dialect. Its errors say what failed
// and the facts a caller needs, never the ids it was given (toolop.Service
// wraps them with those) nor the backend.
type Store struct{ d Dialect }

// New returns the ledger store over d.
func New(d Dialect) Store { return Store{d: d} }

var _ toolop.Store = Store{}

// bind replaces each ? of q with the dialect's placeholder, in order; a
// dialect whose placeholders are ? keeps q as it is. The statements of this
// package hold no other ? (no string literal has one).
func (s Store) bind(q string) string {
	if s.d.Placeholder(1) == "?" {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for {
		i := strings.IndexByte(q, '?')
		if i < 0 {
			b.WriteString(q)
			return b.String()
		}
		n++
		b.WriteString(q[:i])
		b.WriteString(s.d.Placeholder(n))
		q = q[i+1:]
	}
}

func (s Store) queryRow(ctx context.Context, q string, args ...any) Row {
	return s.d.QueryRow(ctx, s.bind(q), args...)
}

func (s Store) writeRow(ctx context.Context, q string, args ...any) Row {
	return s.d.WriteRow(ctx, s.bind(q), args...)
}

// nullJSON is a nullable text argument: NULL for an absent document. Both
// drivers take a *string (database/sql dereferences it).
func nullJSON(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	v := string(b)
	return &v
}

// insertOrGet finishes an INSERT ... ON CONFLICT DO NOTHING RETURNING whose
// scan gave (inserted, err): when the row existed, nothing was returned and
// the stored one is read with get (created=false).
func insertOrGet[T any](inserted T, err error, get func() (T, error)) (T, bool, error) {
	var zero T
	if err == nil {
		return inserted, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return zero, false, fmt.Errorf("insert: %w", err)
	}
	stored, err := get()
	if err != nil {
		return zero, false, err
	}
	return stored, false, nil
}

// list runs a read of rows and scans each with scan.
func list[T any](ctx context.Context, s Store, q string, args []any, scan func(Row) (T, error)) ([]T, error) {
	rows, err := s.d.Query(ctx, s.bind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("select: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("select: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select: %w", err)
	}
	return out, nil
}

// pageWhere is the keyset condition, order and limit of a page of a run's
// operations or approvals (id names the id column), after the run's
// "tenant_id = ? AND run_id = ?", with all the arguments.
func (s Store) pageWhere(id, tenantID, runID string, p toolop.Page) (string, []any) {
	args := []any{tenantID, runID}
	where := ""
	if p.StepID != "" {
		args = append(args, p.StepID)
		where += ` AND step_id = ?`
	}
	if p.InDoubt {
		// As written in the partial index of operations in doubt.
		where += ` AND status IN ('started', 'unknown')`
	}
	if p.AfterID != "" {
		args = append(args, s.d.TimeArg(p.AfterCreatedAt), p.AfterID)
		where += ` AND (created_at, ` + id + `) > (?, ?)`
	}
	where += ` ORDER BY created_at, ` + id
	if p.Limit > 0 {
		args = append(args, p.Limit)
		where += ` LIMIT ?`
	}
	return where, args
}
