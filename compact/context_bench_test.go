package compact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
	for _, id := range []string{"summarised", "plain"} {
		runTurns(b, runs, "t1", id, 2500, func(i int) string {
			p, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("turn %d: %s", i, filler)})
			return string(p)
		})
	}
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
