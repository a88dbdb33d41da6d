package tracestore_test

import (
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/store/tracestore"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

// recorder collects every span of the test's tracer provider.
type recorder struct {
	once sync.Once
	rec  *tracetest.SpanRecorder
	tp   *sdktrace.TracerProvider
}

func (r *recorder) init() {
	r.once.Do(func() {
		r.rec = tracetest.NewSpanRecorder()
		r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.rec))
	})
}

func (r *recorder) names() map[string]int {
	out := map[string]int{}
	for _, s := range r.rec.Ended() {
		out[s.Name()]++
	}
	return out
}

// backend is one store holding every kind of row, wrapped, as the suites
// expect of a backend (the ledger suite deletes runs; sessions keep the vault).
type backend struct {
	tracestore.Runs
	tracestore.Ops
	tracestore.Sessions
	tracestore.Vault
}

func wrapAll(tr trace.Tracer) backend {
	m := memstore.New()
	return backend{
		Runs:     tracestore.Runs{Store: m, T: tr},
		Ops:      tracestore.Ops{Store: m, T: tr},
		Sessions: tracestore.Sessions{Store: m, T: tr},
		Vault:    tracestore.Vault{Store: m, T: tr},
	}
}

// The wrappers must be transparent: every conformance suite passes through
// them, and the calls show up as spans.
func TestWrappersPassTheSuitesAndTrace(t *testing.T) {
	var r recorder
	r.init()
	tr := r.tp.Tracer("test")
	t.Run("runs", func(t *testing.T) {
		storetest.RunStoreSuite(t, func(t *testing.T) run.Store { return wrapAll(tr) })
	})
	t.Run("toolop", func(t *testing.T) {
		storetest.ToolopStoreSuite(t, func(t *testing.T) toolop.Store { return wrapAll(tr) })
	})
	t.Run("sessions", func(t *testing.T) {
		storetest.SessionStoreSuite(t, func(t *testing.T) session.Store { return wrapAll(tr) })
	})
	t.Run("vault", func(t *testing.T) {
		storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store { return wrapAll(tr) })
	})
	got := r.names()
	for _, want := range []string{"store.CreateRun", "store.Commit", "store.AcquireLease", "store.Fork",
		"store.PrepareOperation", "store.TransitionOperation", "store.DecideApproval",
		"store.SessionPut", "store.SessionAppend", "store.VaultPut", "store.VaultGet"} {
		if got[want] == 0 {
			t.Errorf("no span %s; got %v", want, got)
		}
	}
}

// The optional patch capability survives wrapping only when the inner store has it.
func TestWrapSessionsKeepsCapabilities(t *testing.T) {
	var r recorder
	r.init()
	_, inner := any(memstore.New()).(session.StatePatcher)
	_, wrapped := tracestore.WrapSessions(memstore.New(), r.tp.Tracer("test")).(session.StatePatcher)
	if inner != wrapped {
		t.Fatalf("StatePatcher: inner %v, wrapped %v", inner, wrapped)
	}
}
