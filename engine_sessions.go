package memento

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/redis"
	"github.com/mementohq/memento/store/sqlite"
)

// BackendRedis is the session backend selected by Config.RedisURL.
const BackendRedis Backend = "redis"

// PIIKeyFile is where the embedded backend keeps the vault key it generated.
const PIIKeyFile = "pii.key"

// PIIConfig configures the redactor and the vault of personal data.
type PIIConfig struct {
	// Disabled stores text as given. Redaction is on unless a deployment opts out.
	Disabled bool
	// Kinds to redact; nil means all (e-mail, phone, card, IBAN).
	Kinds []pii.Kind
	// Retention of vault values; 0 means pii.DefaultRetention.
	Retention time.Duration
	// Key (16, 24 or 32 bytes) encrypts vault values at rest. Without one, the
	// embedded backend generates and keeps one in DataDir/pii.key; with Redis,
	// values are stored unencrypted (Redis has no data directory to keep it).
	Key []byte
}

// SessionBackend names the store that holds sessions.
func (e *Engine) SessionBackend() Backend { return e.sessionBackend }

// sessionStore is what a session backend provides: sessions and the vault.
type sessionStore interface {
	session.Store
	pii.Store
}

// openSessions wires session memory: Redis when configured, else the
// embedded store (in the runs database, or its own file in DataDir when runs
// live in PostgreSQL; several server instances then need Redis to share sessions).
func (e *Engine) openSessions(ctx context.Context) error {
	if e.cfg.DataDir == "" {
		e.cfg.DataDir = DefaultDataDir
	}
	var st sessionStore
	key := e.cfg.PII.Key
	if e.cfg.RedisURL != "" {
		rs, err := redis.Open(ctx, e.cfg.RedisURL, redis.Options{})
		if err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		e.closers = append(e.closers, rs.Close)
		e.pingers = append(e.pingers, namedPing{"redis", rs.Ping})
		st, e.sessionBackend = rs, BackendRedis
	} else {
		db := e.sqlite
		if db == nil {
			var err error
			if db, err = sqlite.OpenDir(ctx, e.cfg.DataDir); err != nil {
				return fmt.Errorf("sessions: sqlite in %s: %w", e.cfg.DataDir, err)
			}
			e.closers = append(e.closers, db.Close)
			e.pingers = append(e.pingers, namedPing{"sqlite", db.Ping})
		}
		ss := sqlite.NewSessionStore(db, sqlite.SessionOptions{})
		// Closers run last-first: the sweeper stops before its database closes.
		e.closers = append(e.closers, ss.Close)
		st, e.sessionBackend = ss, BackendSQLite
		if len(key) == 0 && !e.cfg.PII.Disabled {
			var err error
			if key, err = loadOrCreateKey(filepath.Join(e.cfg.DataDir, PIIKeyFile)); err != nil {
				return fmt.Errorf("sessions: vault key: %w", err)
			}
		}
	}
	vault, err := pii.NewVault(st, pii.VaultOptions{
		Retention: e.cfg.PII.Retention,
		Key:       key,
		Redactor:  pii.NewRedactor(pii.Options{Disabled: e.cfg.PII.Disabled, Kinds: e.cfg.PII.Kinds}),
	})
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	opts := e.cfg.Sessions
	if !e.cfg.PII.Disabled {
		opts.Redactor = vault
	}
	e.Vault = vault
	e.Sessions = session.NewService(st, opts)
	return nil
}

// loadOrCreateKey reads a hex AES-256 key from path, creating it (mode 0600)
// on first use.
func loadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("%s: want 64 hex digits", path)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// Write a temporary file, then link it into place: the link fails if
	// another process got there first, and nobody ever reads a half-written key.
	f, err := os.CreateTemp(filepath.Dir(path), ".pii-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreateKey(path)
		}
		return nil, err
	}
	return key, nil
}
