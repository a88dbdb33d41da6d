package memory_test

import (
	"context"
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
	say := func(id, text string) memory.ExtractResult {
		t.Helper()
		r, err := s.Extract(ctx, "t1", memory.ExtractInput{SubjectID: "u1", Apply: true, Messages: []memory.Message{{ID: id, Role: "user", Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Items)+len(r.Skipped) == 0 {
			t.Fatalf("%q: nothing reported", text)
		}
		return r
	}
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
