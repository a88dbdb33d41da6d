package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mementohq/memento/store/internal/ledger"
	"github.com/mementohq/memento/toolop"
)

var _ toolop.Store = (*DB)(nil)

// opLedger names the embedded ledger.Store (the toolop.Store methods of DB)
// with an unexported field.
type opLedger = ledger.Store

// ledgerDialect is the PostgreSQL dialect of the operation ledger: times are
// timestamptz, which pgx reads and writes as time.Time.
type ledgerDialect struct{ pool *pgxpool.Pool }

func (d ledgerDialect) QueryRow(ctx context.Context, q string, args ...any) ledger.Row {
	return d.pool.QueryRow(ctx, q, args...)
}

func (d ledgerDialect) WriteRow(ctx context.Context, q string, args ...any) ledger.Row {
	return d.pool.QueryRow(ctx, q, args...)
}

func (d ledgerDialect) Query(ctx context.Context, q string, args ...any) (ledger.Rows, error) {
	rows, err := d.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

func (ledgerDialect) Placeholder(n int) string { return "$" + strconv.Itoa(n) }

func (ledgerDialect) TimeArg(t time.Time) any { return t }

func (ledgerDialect) TimeDest(t *time.Time) any { return t }

func (ledgerDialect) NullTimeDest(t **time.Time) any { return t }

// pgxRows gives pgx.Rows the Close of ledger.Rows.
type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() error {
	r.Rows.Close()
	return nil
}
