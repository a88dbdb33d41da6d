package faultstore_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/storetest"
)

func TestMemoryTransparentWithoutRules(t *testing.T) {
	storetest.MemoryStoreSuite(t, func(t *testing.T) memory.Store { return faultstore.New(1).Memory(memstore.New().Memory()) })
}

// A lost insert is applied underneath: the retry meets its own claim.
func TestMemoryLoseApplies(t *testing.T) {
	ctx := t.Context()
	inner := memstore.New().Memory()
	in := faultstore.New(1, faultstore.Rule{Method: "MemoryInsert", Action: faultstore.Lose, Times: 1})
	s := in.Memory(inner)
	now := time.Now()
	c := memory.Claim{MemoryID: "m1", TenantID: "t", SubjectID: "u", Namespace: "ns", Key: "k", Value: json.RawMessage(`1`),
		Text: "one", Status: memory.StatusCurrent, ValidFrom: now, CreatedAt: now, ConfirmedAt: now,
		ValueDigest: memory.ValueDigest("ns", "k", json.RawMessage(`1`))}
	got, err := s.Insert(ctx, memory.InsertParams{Claim: c})
	if !errors.Is(err, faultstore.ErrInjected) || got.MemoryID != "" {
		t.Fatalf("lost insert: %+v %v", got, err)
	}
	if in.Applied("MemoryInsert") != 1 {
		t.Fatalf("applied %d, want 1", in.Applied("MemoryInsert"))
	}
	if _, err := s.Get(ctx, "t", "m1"); err != nil {
		t.Fatalf("the lost insert is not stored: %v", err)
	}
	if _, err := s.Insert(ctx, memory.InsertParams{Claim: c}); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("retry: %v, want the id taken", err)
	}
	if in.Calls("MemoryGet") != 1 || in.Calls("Get") != 0 {
		t.Fatalf("memory calls are not counted under their own names: %d %d", in.Calls("MemoryGet"), in.Calls("Get"))
	}
}
