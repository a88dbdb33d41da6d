package memento_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/store/tracestore"
)

// TestOpenBackends: the engine wires runs to the backend the config names,
// is ready, keeps data across a reopen, and closes cleanly.
func TestOpenBackends(t *testing.T) {
	ctx := context.Background()
	for _, backend := range []memento.Backend{memento.BackendSQLite, memento.BackendPostgres} {
		t.Run(string(backend), func(t *testing.T) {
			cfg := memento.Config{DataDir: filepath.Join(t.TempDir(), "data"), MaxStateBytes: 64}
			if backend == memento.BackendPostgres {
				cfg.PostgresURL = testenv.PostgresURL(t)
				cfg.PII.Key = testenv.PIIKey
			}
			eng, err := memento.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if eng.Backend() != backend {
				t.Fatalf("backend %q, want %q", eng.Backend(), backend)
			}
			if err := eng.Ready(ctx); err != nil {
				t.Fatalf("ready: %v", err)
			}
			if _, _, err := eng.Runs.Create(ctx, "t1", run.CreateRequest{RunID: "r1", WorkflowName: "w"}, ""); err != nil {
				t.Fatalf("create: %v", err)
			}
			// The configured state limit reaches the run service.
			big := json.RawMessage(`{"x":"` + strings.Repeat("y", 100) + `"}`)
			if _, _, err := eng.Runs.Create(ctx, "t1", run.CreateRequest{RunID: "r2", WorkflowName: "w", State: big}, ""); err == nil {
				t.Fatal("state over MaxStateBytes accepted")
			}
			if err := eng.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if err := eng.Ready(ctx); err == nil {
				t.Fatal("ready after close")
			}
			again, err := memento.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer again.Close()
			if r, err := again.Runs.Get(ctx, "t1", "r1"); err != nil || r.StateRevision != 1 {
				t.Fatalf("run after reopen: %+v %v", r, err)
			}
		})
	}
}

func TestOpenDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	eng, err := memento.Open(context.Background(), memento.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if got := eng.Config(); got.DataDir != memento.DefaultDataDir || got.MaxStateBytes != run.DefaultMaxStateBytes {
		t.Fatalf("defaults: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "memento-data")); err != nil {
		t.Fatalf("default data directory: %v", err)
	}
}

func TestOpenFailsCleanly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Nothing listens on port 1: the error names PostgreSQL.
	_, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir(), PostgresURL: "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", PII: memento.PIIConfig{Key: testenv.PIIKey}})
	if err == nil || !strings.Contains(err.Error(), "postgres") {
		t.Fatalf("unreachable postgres: %v", err)
	}
	if _, err := memento.Open(ctx, memento.Config{MaxStateBytes: -1}); err == nil {
		t.Fatal("negative MaxStateBytes accepted")
	}
	// A data directory that is a file cannot hold the database.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := memento.Open(ctx, memento.Config{DataDir: file}); err == nil || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("data dir is a file: %v", err)
	}
}

// TestTracerWrapsStoresOnlyWhenSet: without a tracer the services call the
// store itself (tracing off costs nothing); with one, a wrapper.
func TestTracerWrapsStoresOnlyWhenSet(t *testing.T) {
	st := memstore.New()
	stores := memento.Stores{Runs: st, Ops: st, Sessions: st, Vault: st}
	plain, err := memento.New(stores, memento.Options{PII: memento.PIIConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Runs.Store() != run.Store(st) {
		t.Errorf("untraced engine wraps its run store: %T", plain.Runs.Store())
	}
	traced, err := memento.New(stores, memento.Options{PII: memento.PIIConfig{Disabled: true}, Tracer: noop.NewTracerProvider().Tracer("t")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := traced.Runs.Store().(tracestore.Runs); !ok {
		t.Errorf("traced engine's run store is %T, want tracestore.Runs", traced.Runs.Store())
	}
}
