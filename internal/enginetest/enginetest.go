// Package enginetest opens engines for the tests of the packages that serve
// one (server, mcp, agent): a fresh data directory and database per test, the
// test PII key, closed at cleanup.
package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/testenv"
)

// Open opens an engine on a fresh database of backend ("sqlite" or
// "postgres") with cfg's other settings; it is closed at cleanup.
func Open(t testing.TB, backend string, cfg memento.Config) *memento.Engine {
	t.Helper()
	// Always a data directory of the test's own: embedded parts (sessions,
	// the PII vault key) live there even when runs are on PostgreSQL.
	cfg.DataDir = t.TempDir()
	if len(cfg.PII.Key) == 0 {
		cfg.PII.Key = testenv.PIIKey // shared backends refuse to start without one
	}
	switch backend {
	case "sqlite":
	case "postgres":
		cfg.PostgresURL = testenv.PostgresURL(t)
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := memento.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open %s engine: %v", backend, err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
	})
	return eng
}
