package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/memory/extract"
	"github.com/mementohq/memento/store/memstore"
)

// TestRulesExtractionThroughPolicy runs the offline extractor through the
// service: a move supersedes, a retraction invalidates, a mood is refused,
// and every message is accounted for.
func TestRulesExtractionThroughPolicy(t *testing.T) {
	ctx := context.Background()
	s := memory.NewService(memstore.New().Memory(), memory.Options{Extractor: extract.Rules{}})
	say := sayer(t, s, "u1")
	first := say("m1", "I live in Paris.")
	if len(first.Items) != 1 || first.Items[0].Outcome != memory.OutcomeAdded {
		t.Fatalf("first = %+v", first.Items)
	}
	moved := say("m2", "I moved to Berlin in May.")
	if len(moved.Items) != 1 || moved.Items[0].Outcome != memory.OutcomeSuperseded || moved.Items[0].Superseded != first.Items[0].MemoryID {
		t.Fatalf("moved = %+v", moved.Items)
	}
	mood := say("m3", "I'm so tired today.")
	for _, it := range mood.Items {
		if it.Outcome != memory.OutcomeRefused || it.Reason == "" {
			t.Fatalf("mood kept: %+v", it)
		}
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"}); len(cs) != 1 || cs[0].Provenance.Extractor != extract.RulesName {
		t.Fatalf("claims = %+v", cs)
	}
	gone := say("m4", "I don't live in Berlin anymore.")
	if len(gone.Items) != 1 || gone.Items[0].Outcome != memory.OutcomeInvalidated {
		t.Fatalf("retraction = %+v", gone.Items)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"}); len(cs) != 0 {
		t.Fatalf("a retracted claim is still served: %+v", cs)
	}
}

// TestRetractionWithdrawsAHeldClaim: a sensitive claim waits for
// confirmation; the user's retraction of it withdraws it, so it can no
// longer be confirmed; a denied favorite retracts it, never kept as
// "not pizza".
func TestRetractionWithdrawsAHeldClaim(t *testing.T) {
	ctx := context.Background()
	s := memory.NewService(memstore.New().Memory(), memory.Options{Extractor: extract.Rules{}})
	say := sayer(t, s, "x2")
	held := say("a", "I am vegetarian.")
	if len(held.Items) != 1 || held.Items[0].Outcome != memory.OutcomeHeld {
		t.Fatalf("vegetarian = %+v", held.Items)
	}
	gone := say("b", "I'm not vegetarian anymore.")
	if len(gone.Items) != 1 || gone.Items[0].Outcome != memory.OutcomeInvalidated || gone.Items[0].MemoryID != held.Items[0].MemoryID {
		t.Fatalf("retraction of the held claim = %+v", gone.Items)
	}
	if hs, _, _ := s.Held(ctx, "t1", memory.Query{SubjectID: "x2"}); len(hs) != 0 {
		t.Fatalf("still held after the user withdrew it: %+v", hs)
	}
	if _, err := s.Confirm(ctx, "t1", held.Items[0].MemoryID); err == nil {
		t.Fatal("a withdrawn claim was confirmed")
	}
	say("c", "My favorite food is pizza.")
	say("d", "My favorite food is not pizza.")
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "x2"}); len(cs) != 0 {
		t.Fatalf("after 'not pizza': %+v, want no favorite food", cs)
	}
}

// TestExtractRefusesABadSourceType: a source type no claim can carry is a
// bad request (ErrInvalidInput), not every candidate refused one by one.
func TestExtractRefusesABadSourceType(t *testing.T) {
	s := memory.NewService(memstore.New().Memory(), memory.Options{Extractor: extract.Rules{}})
	_, err := s.Extract(context.Background(), "t1", memory.ExtractInput{SubjectID: "u1", SourceType: "carrier-pigeon", Messages: []memory.Message{{ID: "m1", Role: "user", Content: "I live in Paris."}}})
	if !errors.Is(err, memory.ErrInvalidInput) {
		t.Fatalf("extract with source_type carrier-pigeon: %v, want ErrInvalidInput", err)
	}
}

// sayer extracts, with apply, what the user of subject says in one message,
// and fails the test on an error or a message nothing reports.
func sayer(t *testing.T, s *memory.Service, subject string) func(id, text string) memory.ExtractResult {
	return func(id, text string) memory.ExtractResult {
		t.Helper()
		r, err := s.Extract(context.Background(), "t1", memory.ExtractInput{SubjectID: subject, Apply: true, Messages: []memory.Message{{ID: id, Role: "user", Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Items)+len(r.Skipped) == 0 {
			t.Fatalf("%q: nothing reported", text)
		}
		return r
	}
}
