package postgres

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mementohq/memento/store/internal/ledger"
	migratepkg "github.com/mementohq/memento/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the first half of the advisory lock taken while
// migrating; the second half is a hash of the target schema, so instances
// migrating different schemas (tests) do not wait for each other.
const migrationLockKey int32 = 0x4d454d4f // "MEMO"

// DefaultMaxConns is the pool size unless the connection string sets
// pool_max_conns. pgx's default (the number of CPUs, at least 4) is too few:
// a commit mostly waits for its WAL flush, and concurrent commits share one
// flush only if they run on connections of their own.
const DefaultMaxConns = 16

// DefaultStatementTimeout is the statement_timeout of the pool's
// connections unless the connection URL sets one.
const DefaultStatementTimeout = "30s"

// cancelWait is how long a statement whose context was cancelled may take
// to answer the cancel request before its connection is dropped.
const cancelWait = 5 * time.Second

// DB is a PostgreSQL-backed store. It is safe for concurrent use.
type DB struct {
	pool      *pgxpool.Pool
	retention retentionCursor
	opLedger  // the toolop.Store methods
	// commits lets a commit compute its delta and chain in Go (nil: every
	// commit leaves them to SQL, as in a database whose encoding is not
	// UTF8, where jsonb text and octet lengths are not what jsonbText knows).
	commits *commitCache
	// fastCommits counts the commits commitFast made (tests check it is taken).
	fastCommits atomic.Int64
}

// Open connects to PostgreSQL and applies the embedded migrations that are
// not applied yet. Parameters that pgx does not know (such as search_path)
// are sent to the server as runtime parameters of every pooled connection;
// tables are created unqualified, so they land in the first schema of the
// search path. Every connection gets statement_timeout
// DefaultStatementTimeout unless the URL sets one.
func Open(ctx context.Context, connString string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse connection string: %w", err)
	}
	if !strings.Contains(connString, "pool_max_conns") && cfg.MaxConns < DefaultMaxConns {
		cfg.MaxConns = DefaultMaxConns
	}
	// A stuck statement must not hold a pooled connection for ever; the
	// URL may set its own (statement_timeout=5s, or options=-c statement_timeout=5s).
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["statement_timeout"]; !ok && !strings.Contains(rp["options"], "statement_timeout") {
		rp["statement_timeout"] = DefaultStatementTimeout
	}
	// A cancelled context (a request past its deadline, a client gone)
	// asks the server to cancel the statement and waits for its answer,
	// rather than dropping the connection: dropped, a statement goes on
	// and may commit after the caller was told the outcome is unknown and
	// read the row unchanged. Answered, the outcome is known: cancelled
	// (nothing changed) or done. Only a server that does not answer within
	// cancelWait leaves it unknown.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelWait}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db := &DB{pool: pool, opLedger: ledger.New(ledgerDialect{pool})}
	var enc string
	if err := pool.QueryRow(ctx, `SHOW server_encoding`).Scan(&enc); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: read server encoding: %w", err)
	}
	if enc == "UTF8" {
		db.commits = newCommitCache()
	}
	return db, nil
}

// Close closes every connection of the pool.
func (db *DB) Close() { db.pool.Close() }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// Pool returns the connection pool, for the other domains' stores of this
// package and for tests.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// pgMigrations is the PostgreSQL dialect of one migration transaction.
type pgMigrations struct{ tx pgx.Tx }

func (m pgMigrations) Prepare(ctx context.Context) error {
	// A transaction-scoped advisory lock cannot leak into the pool the way a
	// session lock could if the unlock were lost to a cancelled context.
	if _, err := m.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, migrationLockKey); err != nil {
		return fmt.Errorf("take lock: %w", err)
	}
	if _, err := m.tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("create schema_migrations (does the schema of search_path exist?): %w", err)
	}
	return nil
}

func (m pgMigrations) Applied(ctx context.Context) ([]string, error) {
	rows, err := m.tx.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Exec sends the file without arguments: pgx then uses the simple protocol,
// so a file may hold several statements.
func (m pgMigrations) Exec(ctx context.Context, sql string) error {
	_, err := m.tx.Exec(ctx, sql)
	return err
}

func (m pgMigrations) Record(ctx context.Context, version string) error {
	_, err := m.tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, version)
	return err
}

// migrate applies the embedded migrations in one transaction under an
// advisory lock: instances starting together serialize here, and a failure
// leaves nothing half-applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	migs, err := migratepkg.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // no-op after Commit
	if err := migratepkg.Apply(ctx, pgMigrations{tx}, migs); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("apply migrations: commit: %w", err)
	}
	return nil
}

// SchemaVersion returns the newest migration applied to the database and
// how many are (Open applies what is missing).
func (db *DB) SchemaVersion(ctx context.Context) (latest string, applied int, err error) {
	err = db.pool.QueryRow(ctx, `SELECT coalesce(max(version), ''), count(*) FROM schema_migrations`).Scan(&latest, &applied)
	if err != nil {
		return "", 0, fmt.Errorf("read the schema version: %w", err)
	}
	return latest, applied, nil
}
