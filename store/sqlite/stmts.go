package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	sqlitedrv "modernc.org/sqlite"
)

// stmtCache keeps the long-term memory statements prepared, per pool:
// modernc's driver prepares a statement from its text on every call, and
// that was a third of an add's CPU time (profiled under bench memory).
// database/sql keeps a *sql.Stmt prepared on each connection it ran on.
type stmtCache struct {
	mu sync.Mutex
	m  map[stmtKey]*sql.Stmt
}

type stmtKey struct {
	pool *sql.DB
	sql  string
}

// stmt is q prepared on pool, or nil when preparing failed (the caller
// then runs q unprepared, which reports the same error).
func (db *DB) stmt(ctx context.Context, pool *sql.DB, q string) *sql.Stmt {
	if s := db.cached(pool, q); s != nil {
		return s
	}
	s, err := pool.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	db.stmts.mu.Lock()
	defer db.stmts.mu.Unlock()
	if prev, ok := db.stmts.m[stmtKey{pool, q}]; ok {
		_ = s.Close()
		return prev
	}
	if db.stmts.m == nil {
		db.stmts.m = map[stmtKey]*sql.Stmt{}
	}
	db.stmts.m[stmtKey{pool, q}] = s
	return s
}

func (db *DB) cached(pool *sql.DB, q string) *sql.Stmt {
	db.stmts.mu.Lock()
	defer db.stmts.mu.Unlock()
	return db.stmts.m[stmtKey{pool, q}]
}

func (db *DB) closeStmts() {
	db.stmts.mu.Lock()
	defer db.stmts.mu.Unlock()
	for _, s := range db.stmts.m {
		_ = s.Close()
	}
	db.stmts.m = nil
}

// reader runs queries on the read pool through prepared statements.
type reader struct{ db *DB }

func (r reader) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := r.db.stmt(ctx, r.db.r, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return r.db.r.QueryRowContext(ctx, q, args...)
}

func (r reader) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := r.db.stmt(ctx, r.db.r, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return r.db.r.QueryContext(ctx, q, args...)
}

// wtx is a write transaction whose statements run prepared on the writer.
// A statement not prepared yet runs unprepared and is prepared after the
// transaction: the writer pool's one connection is the transaction's
// until then.
type wtx struct {
	tx     *sql.Tx
	db     *DB
	missed *[]string
}

func (t wtx) prepared(ctx context.Context, q string) *sql.Stmt {
	if s := t.db.cached(t.db.w, q); s != nil {
		return t.tx.StmtContext(ctx, s)
	}
	*t.missed = append(*t.missed, q)
	return nil
}

func (t wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := t.prepared(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t wtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := t.prepared(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t wtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s := t.prepared(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}

// memoryTx runs fn in one write transaction with prepared statements.
func (db *DB) memoryTx(ctx context.Context, fn func(tx wtx) error) error {
	var missed []string
	err := db.writeTx(ctx, func(tx *sql.Tx) error { return fn(wtx{tx: tx, db: db, missed: &missed}) })
	for _, q := range missed {
		db.stmt(ctx, db.w, q)
	}
	return err
}

// isConstraint reports a violated constraint (SQLITE_CONSTRAINT, code 19,
// in the low byte of every extended constraint code).
func isConstraint(err error) bool {
	var e *sqlitedrv.Error
	return errors.As(err, &e) && e.Code()&0xff == 19
}

// isBusy reports a lock another connection holds (SQLITE_BUSY, code 5, in
// the low byte of its extended codes).
func isBusy(err error) bool {
	var e *sqlitedrv.Error
	return errors.As(err, &e) && e.Code()&0xff == 5
}

// rd is the read pool through prepared statements.
func (db *DB) rd() reader { return reader{db} }
