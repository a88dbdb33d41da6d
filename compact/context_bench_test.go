package compact_test

import (
	"context"
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

// BenchmarkBuildWithSummaries100kTokens measures a context build over a
// ~100k-token run history whose older part is covered by 24 summaries,
// after the first build, against the same build with no summaries (the
// builder's own cost over cached history).
func BenchmarkBuildWithSummaries100kTokens(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	runs := run.NewService(st, run.Options{})
	svc := compact.NewService(st.Summaries(), compact.Options{Runs: st})
	filler := strings.Repeat("we talked about the weather, the garden and the trip to Paris again ", 5)
	mk := func(id string) {
		r, _, err := runs.Create(ctx, "t1", run.CreateRequest{RunID: id, WorkflowName: "chat", WorkflowVersion: "1"}, "")
		if err != nil {
			b.Fatal(err)
		}
		l, err := runs.AcquireLease(ctx, "t1", id, "w", 0, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 2500 {
			p, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("turn %d: %s", i, filler)})
			if r, _, err = runs.Commit(ctx, "t1", id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: json.RawMessage(`{}`),
				Event: run.EventInput{EventType: "turn", Payload: p}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	mk("summarised")
	mk("plain")
	for from := int64(1); from < 2400; from += 100 {
		if _, _, err := svc.Compact(ctx, "t1", compact.RunOwner("summarised"), compact.CompactRequest{FromSeq: from, ToSeq: from + 99}); err != nil {
			b.Fatal(err)
		}
	}
	bld := contextbuild.New(contextbuild.Sources{Runs: runs, Summaries: compact.ContextSource{S: svc}})
	for _, id := range []string{"summarised", "plain"} {
		req := contextbuild.Request{Model: "gpt-4o", BudgetTokens: 8000, RunID: id, Query: "the trip to Paris"}
		if _, err := bld.Build(ctx, "t1", req); err != nil {
			b.Fatal(err)
		}
		b.Run(id, func(b *testing.B) {
			for b.Loop() {
				if _, err := bld.Build(ctx, "t1", req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
