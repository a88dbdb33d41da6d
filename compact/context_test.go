package compact_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
)

// TestSummaryInContext: a verified summary stands for the older history in
// a built context (tampered summaries are refused by Usable: CompactionSuite).
func TestSummaryInContext(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	runs := run.NewService(st, run.Options{})
	svc := compact.NewService(st.Summaries(), compact.Options{Runs: st, Budget: 150})
	r, _, err := runs.Create(ctx, "t1", run.CreateRequest{RunID: "r1", WorkflowName: "chat", WorkflowVersion: "1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := runs.AcquireLease(ctx, "t1", "r1", "w", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 120; i++ {
		p := fmt.Sprintf(`{"text":"turn %d about the weather in town, day %d"}`, i, i)
		if r, _, err = runs.Commit(ctx, "t1", "r1", run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: json.RawMessage(`{}`),
			Event: run.EventInput{EventType: "turn", Payload: json.RawMessage(p)}}); err != nil {
			t.Fatal(err)
		}
	}
	sum, _, err := svc.Compact(ctx, "t1", compact.RunOwner("r1"), compact.CompactRequest{FromSeq: 1, ToSeq: 100})
	if err != nil {
		t.Fatal(err)
	}
	b := contextbuild.New(contextbuild.Sources{Runs: runs, Summaries: compact.ContextSource{S: svc}})
	res, err := b.Build(ctx, "t1", contextbuild.Request{Model: "gpt-4o", BudgetTokens: 1500, RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Accounting.Parts {
		if p.Kind == contextbuild.KindSummary {
			got = p.SourceIDs
		}
	}
	if len(got) != 1 || got[0] != "summary:"+sum.SummaryID {
		t.Fatalf("summary (%d tokens) part = %v, left out %+v", sum.Tokens, got, res.Accounting.LeftOut)
	}
	covered := false
	for _, lo := range res.Accounting.LeftOut {
		covered = covered || strings.Contains(lo.Reason, "summary")
	}
	if !covered {
		t.Fatalf("left out = %+v, want the summarised events named as covered", res.Accounting.LeftOut)
	}
	// The recent window does not repeat what the summary stands for.
	for _, p := range res.Accounting.Parts {
		for _, id := range p.SourceIDs {
			var seq int
			if _, err := fmt.Sscanf(id, "seq:%d", &seq); p.Kind == contextbuild.KindRecent && err == nil && seq <= 100 {
				t.Fatalf("event %d is in the recent window and in the summary", seq)
			}
		}
	}
	// A budget that holds every event shows them, not their summary.
	whole, err := b.Build(ctx, "t1", contextbuild.Request{Model: "gpt-4o", BudgetTokens: 20000, RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, p := range whole.Accounting.Parts {
		if p.Kind == contextbuild.KindSummary {
			t.Fatalf("a summary beside all the raw events it covers: %+v", whole.Accounting.Parts)
		}
		if p.Kind == contextbuild.KindRecent {
			shown = len(p.SourceIDs)
		}
	}
	if shown != 121 {
		t.Fatalf("%d events shown of 121", shown)
	}
}
