package memento

import (
	"context"
	"errors"
	"fmt"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/toolop"
)

// DefaultDataDir is where the embedded backend keeps its files unless configured.
const DefaultDataDir = "./memento-data"

// Config says which backends the engine uses. The zero value is the embedded
// default: SQLite in DefaultDataDir.
type Config struct {
	// DataDir holds the embedded SQLite database ("" means DefaultDataDir).
	// It is not opened when PostgresURL is set.
	DataDir string
	// PostgresURL, when set, keeps runs in PostgreSQL instead of SQLite.
	PostgresURL string
	// RedisURL, when set, is the session backend; otherwise sessions live in
	// the embedded SQLite database in DataDir (see engine_sessions.go).
	RedisURL string
	// Sessions tunes session memory (TTLs, caps, sizes); Open sets its Redactor.
	Sessions session.Options
	// PII configures the personal-data redactor (on by default) and its vault.
	PII PIIConfig
	// MaxStateBytes limits a run's state ("0" means run.DefaultMaxStateBytes).
	MaxStateBytes int
	// Registry holds workflow state schemas and migrations (nil means none).
	Registry *run.Registry
}

// Backend names the store that holds runs.
type Backend string

// The backends runs can live on.
const (
	BackendSQLite   Backend = "sqlite"
	BackendPostgres Backend = "postgres"
)

// Engine holds the domain services wired to their stores. Fields are added per
// domain; Open fills them all and Close releases everything Open acquired.
type Engine struct {
	// Runs is the durable run service.
	Runs *run.Service
	// Ops is the operation ledger and approvals, on the same store as Runs.
	Ops *toolop.Service
	// Sessions is session memory, on Redis or the embedded store.
	Sessions *session.Service
	// Vault holds the personal data the redactor replaced by references.
	Vault *pii.Vault

	cfg     Config
	backend Backend
	sqlite  *sqlite.DB
	pg      *postgres.DB
	// sessionBackend names the store that holds sessions.
	sessionBackend Backend
	// closers run in reverse order on Close; pingers must all answer for Ready.
	closers []func() error
	pingers []namedPing
}

type namedPing struct {
	name string
	ping func(context.Context) error
}

// Open connects the backends the config names, applies their schema
// migrations and returns the wired engine. On error nothing stays open.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.MaxStateBytes < 0 {
		return nil, fmt.Errorf("open memento: max state bytes must not be negative")
	}
	if cfg.MaxStateBytes == 0 {
		cfg.MaxStateBytes = run.DefaultMaxStateBytes
	}
	if cfg.Registry == nil {
		cfg.Registry = run.NewRegistry()
	}
	e := &Engine{cfg: cfg}
	var runStore run.Store
	var opStore toolop.Store
	if cfg.PostgresURL != "" {
		db, err := postgres.Open(ctx, cfg.PostgresURL)
		if err != nil {
			return nil, fmt.Errorf("open memento: postgres: %w", err)
		}
		e.pg, e.backend, runStore, opStore = db, BackendPostgres, db, db
		e.closers = append(e.closers, func() error { db.Close(); return nil })
		e.pingers = append(e.pingers, namedPing{"postgres", db.Ping})
	} else {
		if e.cfg.DataDir == "" {
			e.cfg.DataDir = DefaultDataDir
		}
		db, err := sqlite.OpenDir(ctx, e.cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("open memento: sqlite in %s: %w", e.cfg.DataDir, err)
		}
		e.sqlite, e.backend, runStore, opStore = db, BackendSQLite, db, db
		e.closers = append(e.closers, db.Close)
		e.pingers = append(e.pingers, namedPing{"sqlite", db.Ping})
	}
	e.Runs = run.NewService(runStore, run.Options{MaxStateBytes: cfg.MaxStateBytes, Registry: cfg.Registry})
	e.Ops = toolop.NewService(opStore, nil)
	if err := e.openSessions(ctx); err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("open memento: %w", err)
	}
	return e, nil
}

// Config returns the configuration in effect, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Backend names the store that holds runs.
func (e *Engine) Backend() Backend { return e.backend }

// Ready reports whether every backend answers; the error names the first that does not.
func (e *Engine) Ready(ctx context.Context) error {
	for _, p := range e.pingers {
		if err := p.ping(ctx); err != nil {
			return fmt.Errorf("%s not ready: %w", p.name, err)
		}
	}
	return nil
}

// Close releases every backend, last opened first, and reports all failures.
func (e *Engine) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		if err := e.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	e.closers = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close memento: %w", err)
	}
	return nil
}
