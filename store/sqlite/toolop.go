package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/mementohq/memento/store/internal/ledger"
	"github.com/mementohq/memento/toolop"
)

var _ toolop.Store = (*DB)(nil)

// opLedger names the embedded ledger.Store (the toolop.Store methods of DB)
// with an unexported field.
type opLedger = ledger.Store

// ledgerDialect is the SQLite dialect of the operation ledger: writes go to
// the writer connection, reads to the read pool, and times are integer
// microseconds since the epoch.
type ledgerDialect struct{ db *DB }

func (d ledgerDialect) QueryRow(ctx context.Context, q string, args ...any) ledger.Row {
	return d.db.r.QueryRowContext(ctx, q, args...)
}

func (d ledgerDialect) WriteRow(ctx context.Context, q string, args ...any) ledger.Row {
	return d.db.w.QueryRowContext(ctx, q, args...)
}

func (d ledgerDialect) Query(ctx context.Context, q string, args ...any) (ledger.Rows, error) {
	rows, err := d.db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (ledgerDialect) Placeholder(int) string { return "?" }

func (ledgerDialect) TimeArg(t time.Time) any { return t.UnixMicro() }

func (ledgerDialect) TimeDest(t *time.Time) any { return microsDest{t} }

func (ledgerDialect) NullTimeDest(t **time.Time) any { return nullMicrosDest{t} }

// microsDest scans integer microseconds into a time.
type microsDest struct{ t *time.Time }

func (m microsDest) Scan(src any) error {
	us, ok := src.(int64)
	if !ok {
		return fmt.Errorf("time column holds %T, not integer microseconds", src)
	}
	*m.t = fromMicros(us)
	return nil
}

// nullMicrosDest scans nullable integer microseconds into a time (nil for NULL).
type nullMicrosDest struct{ t **time.Time }

func (m nullMicrosDest) Scan(src any) error {
	if src == nil {
		*m.t = nil
		return nil
	}
	var t time.Time
	if err := (microsDest{&t}).Scan(src); err != nil {
		return err
	}
	*m.t = &t
	return nil
}
