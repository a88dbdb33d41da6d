package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/mementohq/memento/store/internal/ledger"
	migratepkg "github.com/mementohq/memento/store/internal/migrate"
)

// FileName is the database file OpenDir uses inside a data directory.
const FileName = "memento.db"

// busyTimeout bounds how long a connection waits for another process's lock
// (a CLI and a server on one file) before SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// readConns is the size of the read pool; WAL lets readers run beside the writer.
const readConns = 4

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DB is an open embedded database. All writes go through one connection
// whose transactions begin IMMEDIATE, so writers in this process queue in Go
// and writers in other processes wait on busy_timeout instead of failing a
// lock upgrade midway; reads use a small separate pool.
type DB struct {
	w    *sql.DB
	r    *sql.DB
	path string
	now  func() time.Time
	// retention is the position of the retention sweep in progress.
	retention retentionCursor
	opLedger  // the toolop.Store methods
	stmts     stmtCache
}

// OpenDir opens (creating it if needed) the database file FileName in dir.
func OpenDir(ctx context.Context, dir string) (*DB, error) {
	return Open(ctx, filepath.Join(dir, FileName))
}

// Open opens (creating it and its parent directories if needed) the database
// file at path and applies the embedded schema migrations.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite %s: create directory: %w", abs, err)
	}
	// synchronous=FULL: a commit acknowledged to a workflow survives power loss,
	// not only a process crash; durability is what a run store is for.
	common := fmt.Sprintf("_busy_timeout=%d&_foreign_keys=1&_journal_mode=WAL&_synchronous=FULL", busyTimeout.Milliseconds())
	// secure_delete: deleted rows (a forgotten subject's claims, a run past
	// retention) are overwritten with zeros, not left in free space.
	w, err := sql.Open("sqlite", dsn(abs, common+"&_txlock=immediate&_pragma=secure_delete(1)"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db := &DB{w: w, path: abs, now: time.Now}
	db.opLedger = ledger.New(ledgerDialect{db})
	if err := db.prepareFile(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	// The read pool opens after the writer has put the file in WAL mode.
	r, err := sql.Open("sqlite", dsn(abs, common+"&_query_only=1"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	db.r = r
	if err := r.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	return db, nil
}

// prepareFile connects the writer (which puts the file in WAL mode) and
// applies the migrations. Another process opening the same new file at the
// same moment can make that first connection fail with SQLITE_BUSY without
// SQLite waiting on busy_timeout (the switch to WAL and its recovery do
// not), so a busy answer is tried again, for busyTimeout at most.
func (db *DB) prepareFile(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		err := db.w.PingContext(ctx)
		if err == nil {
			err = db.migrate(ctx)
		}
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dsn builds a URI filename; '?', '#' and '%' in the path would otherwise be
// read as URI syntax.
func dsn(path, query string) string {
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + p + "?" + query
}

// Close closes both pools.
func (db *DB) Close() error {
	db.closeStmts()
	var errs []error
	if db.r != nil {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite %s: %w", db.path, err)
	}
	return nil
}

// Ping checks that the database answers on both pools.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", db.path, err)
	}
	if err := db.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", db.path, err)
	}
	return nil
}

// Path is the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// SQL returns the pool every write goes through: one connection, whose
// transactions begin IMMEDIATE. Release rows promptly: while they are open,
// every other write waits.
func (db *DB) SQL() *sql.DB { return db.w }

// writeTx runs fn in one write transaction (BEGIN IMMEDIATE), committing if
// fn returns nil and rolling back otherwise.
func (db *DB) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return ended(ctx, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", ended(ctx, err))
	}
	return nil
}

// ended adds ctx's error to err when ctx ended during the transaction:
// database/sql then rolled it back, and what the transaction saw (a
// finished transaction, a closed statement) does not say why.
func ended(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// nowMicros is the store's clock, truncated to what is stored.
func (db *DB) nowMicros() int64 {
	return db.now().UnixMicro()
}

func fromMicros(us int64) time.Time {
	return time.UnixMicro(us).UTC()
}

// sqliteMigrations is the SQLite dialect of one migration transaction. The
// write transaction (BEGIN IMMEDIATE) is the lock: processes opening one file
// at once serialize on it. Versions were recorded with their ".sql" suffix
// from the start; that form is kept so existing files stay valid.
type sqliteMigrations struct {
	tx  *sql.Tx
	now int64
}

func (m sqliteMigrations) Prepare(ctx context.Context) error {
	_, err := m.tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    TEXT PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`)
	return err
}

func (m sqliteMigrations) Applied(ctx context.Context) ([]string, error) {
	rows, err := m.tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, strings.TrimSuffix(v, ".sql"))
	}
	return out, rows.Err()
}

func (m sqliteMigrations) Exec(ctx context.Context, sql string) error {
	_, err := m.tx.ExecContext(ctx, sql)
	return err
}

func (m sqliteMigrations) Record(ctx context.Context, version string) error {
	_, err := m.tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version+".sql", m.now)
	return err
}

// migrate applies every embedded migration not yet recorded, in one write
// transaction, so a failure leaves nothing half-applied.
func (db *DB) migrate(ctx context.Context) error {
	migs, err := migratepkg.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		return migratepkg.Apply(ctx, sqliteMigrations{tx: tx, now: db.nowMicros()}, migs)
	})
}

// SetClock replaces the store's clock (time.Now) for tests and demos that
// move time; call it before the store is shared.
func (db *DB) SetClock(now func() time.Time) { db.now = now }

// SchemaVersion returns the newest migration applied to the database and
// how many are (Open applies what is missing).
func (db *DB) SchemaVersion(ctx context.Context) (latest string, applied int, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT coalesce(max(version), ''), count(*) FROM schema_migrations`).Scan(&latest, &applied)
	if err != nil {
		return "", 0, fmt.Errorf("read the schema version: %w", err)
	}
	return latest, applied, nil
}
