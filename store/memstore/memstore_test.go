package memstore_test

import (
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

func TestRunStoreSuite(t *testing.T) {
	storetest.RunStoreSuite(t, func(t *testing.T) run.Store { return memstore.New() })
}

func TestToolopStoreSuite(t *testing.T) {
	storetest.ToolopStoreSuite(t, func(t *testing.T) toolop.Store { return memstore.New() })
}

func TestSessionStoreSuite(t *testing.T) {
	storetest.SessionStoreSuite(t, func(t *testing.T) session.Store { return memstore.New() })
}

func TestPIIVaultSuite(t *testing.T) {
	storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store { return memstore.New() })
}

// TestNoAliasing: what a caller passes in or gets back is a copy, so
// changing it later never changes what is stored.
func TestNoAliasing(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	state := []byte(`{"n":1}`)
	r, _, err := s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: "t", RunID: "r", WorkflowName: "wf", State: state}})
	if err != nil {
		t.Fatal(err)
	}
	state[6] = '9'
	r.State[6] = '8'
	got, err := s.GetRun(ctx, "t", "r")
	if err != nil || string(got.State) != `{"n":1}` {
		t.Fatalf("stored state changed through a caller's slice: %s %v", got.State, err)
	}
	ev, _ := s.GetEvent(ctx, "t", "r", 1)
	ev.State[6] = '7'
	ev.Payload[0] = 'x'
	again, _ := s.GetEvent(ctx, "t", "r", 1)
	if string(again.State) != `{"n":1}` || again.Payload[0] != '{' {
		t.Fatalf("stored event changed through a returned one: %s %s", again.State, again.Payload)
	}
	l, err := s.AcquireLease(ctx, "t", "r", "w", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetRun(ctx, "t", "r")
	*got.LeaseExpiresAt = time.Time{}
	got, _ = s.GetRun(ctx, "t", "r")
	if !got.LeaseExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("lease expiry changed through a returned pointer: %v", got.LeaseExpiresAt)
	}

	meta := []byte(`{"k":"v"}`)
	if _, _, err := s.Put(ctx, session.PutParams{TenantID: "t", SessionID: "s", UserID: "u", State: []byte(`{}`), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "t", "s", "u", []session.MessageInput{{Role: "user", Content: "hi", Metadata: meta}}, 10); err != nil {
		t.Fatal(err)
	}
	meta[2] = 'X'
	ms, err := s.Messages(ctx, "t", "s", "u", session.MessageQuery{Limit: 10})
	if err != nil || len(ms) != 1 || string(ms[0].Metadata) != `{"k":"v"}` {
		t.Fatalf("stored metadata changed through the caller's slice: %+v %v", ms, err)
	}

	sealed := []byte("sealed")
	if err := s.PutRecords(ctx, []pii.Record{{TenantID: "t", ID: "p", Sealed: sealed, ExpiresAt: time.Now().Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	sealed[0] = 'X'
	rec, err := s.GetRecord(ctx, "t", "p")
	if err != nil || string(rec.Sealed) != "sealed" {
		t.Fatalf("stored record changed through the caller's slice: %q %v", rec.Sealed, err)
	}
}

func TestRecoverySuite(t *testing.T) {
	storetest.RecoverySuite(t, func(t *testing.T) (run.Store, toolop.Store) {
		s := memstore.New()
		return s, s
	})
}

func TestMemoryStoreSuite(t *testing.T) {
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store { return memstore.New().Memory() })
}

func TestRetrievalStoreSuite(t *testing.T) {
	storetest.RetrievalStoreSuite(t, func(t *testing.T) retrieval.Store { return memstore.New().Retrieval() })
}
