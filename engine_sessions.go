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
	"github.com/mementohq/memento/store/postgres"
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
	// Key (16, 24 or 32 bytes) encrypts vault values at rest, on every
	// backend. Without one, the embedded backend generates and keeps one in
	// DataDir/pii.key; a shared backend (PostgreSQL, Redis) refuses to start,
	// since instances sharing it must share the key.
	Key []byte
}

// EnvPIIKey is the environment variable the command line reads the vault
// key from (64 hex digits).
const EnvPIIKey = "MEMENTO_PII_KEY"

// errNoKey says how to give a vault key; it names no backend.
const errNoKey = "personal-data redaction is on and no vault key is configured: " +
	"make one with `openssl rand -hex 32` and pass it as " + EnvPIIKey + " (Config.PII.Key: the 32 decoded bytes), " +
	"the same on every instance, or turn redaction off"

// ErrNoPIIKey is returned by Open when sessions live on a shared backend
// (PostgreSQL or Redis), and by New, when redaction is on and no vault key
// is configured.
var ErrNoPIIKey = errors.New(errNoKey)

// SessionBackend names the store that holds sessions.
func (e *Engine) SessionBackend() Backend { return e.sessionBackend }

// openSessions builds the session and vault stores: Redis when configured,
// else the runs backend (PostgreSQL, so several instances share sessions,
// or the embedded database). It returns the vault key to use.
func (b *builder) openSessions(ctx context.Context, st *Stores, pg *postgres.DB, lite *sqlite.DB) (Backend, []byte, error) {
	// Open refused a shared backend without a key already.
	key := b.cfg.PII.Key
	switch {
	case b.cfg.RedisURL != "":
		rs, err := redis.Open(ctx, b.cfg.RedisURL, redis.Options{})
		if err != nil {
			return "", nil, fmt.Errorf("sessions: %w", err)
		}
		b.closers = append(b.closers, rs.Close)
		b.pingers = append(b.pingers, namedPing{"redis", rs.Ping})
		st.Sessions, st.Vault = rs, rs
		return BackendRedis, key, nil
	case pg != nil:
		ss := postgres.NewSessionStore(pg, postgres.SessionOptions{})
		// Closers run last-first: the sweeper stops before its pool closes.
		b.closers = append(b.closers, ss.Close)
		st.Sessions, st.Vault = ss, ss
		return BackendPostgres, key, nil
	default:
		ss := sqlite.NewSessionStore(lite, sqlite.SessionOptions{})
		b.closers = append(b.closers, ss.Close)
		st.Sessions, st.Vault = ss, ss
		if !b.cfg.PII.Disabled && len(key) == 0 {
			var err error
			if key, err = loadOrCreateKey(filepath.Join(b.cfg.DataDir, PIIKeyFile)); err != nil {
				return "", nil, fmt.Errorf("sessions: vault key: %w", err)
			}
		}
		return BackendSQLite, key, nil
	}
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
