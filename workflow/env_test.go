package workflow_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/store/postgres"
	"github.com/mementohq/memento/store/sqlite"
	"github.com/mementohq/memento/toolop"
)

// env is one backend with the services on top.
type env struct {
	runs *run.Service
	ops  *toolop.Service
}

type backendFn func(t *testing.T) env

// memEnv is the in-memory twin: what the engine's unit tests run on.
func memEnv(t *testing.T) env {
	s := memstore.New()
	return env{runs: run.NewService(s, run.Options{}), ops: toolop.NewService(s, nil)}
}

func sqliteEnv(t *testing.T) env {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memento.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return env{runs: run.NewService(db, run.Options{}), ops: toolop.NewService(db, nil)}
}

func postgresEnv(t *testing.T) env {
	db, err := postgres.Open(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(db.Close) // registered after the schema's cleanup, so it runs first
	return env{runs: run.NewService(db, run.Options{}), ops: toolop.NewService(db, nil)}
}

// withStore runs an engine test on the in-memory twin: these tests are
// about the engine, and every backend passes the same conformance suites.
func withStore(t *testing.T, fn func(t *testing.T, open backendFn)) {
	t.Run("memstore", func(t *testing.T) { fn(t, memEnv) })
}

// eachBackend runs a test on the twin and on both databases, for the tests
// about concurrent workers, where a real store's atomicity is the point.
func eachBackend(t *testing.T, fn func(t *testing.T, open backendFn)) {
	withStore(t, fn)
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteEnv) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresEnv) })
}

// provider stands in for an external system with idempotency keys: it
// applies a request once per key and can answer lookups, authoritatively or not.
type provider struct {
	mu            sync.Mutex
	applied       map[string]int // key -> amount
	sends         int
	failTransport bool // apply, then lose the answer
	authoritative bool
}

func newProvider() *provider { return &provider{applied: map[string]int{}, authoritative: true} }

func (p *provider) send(amount int) func(ctx context.Context, key string) (sendReply, error) {
	return func(ctx context.Context, key string) (sendReply, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.sends++
		if _, ok := p.applied[key]; !ok {
			p.applied[key] = amount
		}
		if p.failTransport {
			return sendReply{}, errTransport
		}
		return sendReply{ref: "ref-" + key}, nil
	}
}

func (p *provider) lookup(ctx context.Context, key string) (toolop.LookupResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.authoritative {
		return toolop.LookupResult{Answer: toolop.NotAuthoritative, Detail: "provider search is down"}, nil
	}
	if _, ok := p.applied[key]; ok {
		return toolop.LookupResult{Answer: toolop.Applied, ExternalRef: "ref-" + key}, nil
	}
	return toolop.LookupResult{Answer: toolop.NotApplied}, nil
}

func (p *provider) counts() (sends, applied int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends, len(p.applied)
}
