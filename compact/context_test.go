package compact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/tokens"
)

// TestSummaryInContext: a verified summary stands for the older history in
// a built context (tampered summaries are refused by Usable: CompactionSuite).
func TestSummaryInContext(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	runs := run.NewService(st, run.Options{})
	svc := compact.NewService(st.Summaries(), compact.Options{Runs: st, Budget: 150})
	runTurns(t, runs, "t1", "r1", 120, func(i int) string { return fmt.Sprintf(`{"text":"turn %d about the weather in town, day %d"}`, i, i) })
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

// TestSummariesAfterTrim: once a session's cap trims the oldest messages,
// the summaries of what is left still form the chain and stand for their
// ranges in a context (the one over trimmed messages cannot verify); the
// messages before the chain stay raw, not counted as covered.
func TestSummariesAfterTrim(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	ss := session.NewService(st, session.Options{MaxMessages: 20})
	cs := compact.NewService(st.Summaries(), compact.Options{Sessions: st, Budget: 60})
	b := contextbuild.New(contextbuild.Sources{Sessions: ss, Summaries: compact.ContextSource{S: cs}})
	if _, _, err := ss.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	add := func(n, from int) {
		t.Helper()
		var in []session.MessageInput
		for i := range n {
			in = append(in, session.MessageInput{Role: "user", Content: fmt.Sprintf("message %d: the customer talks about refund order %d for 20 EUR and many other long words to fill", from+i, from+i)})
		}
		if _, err := ss.Append(ctx, "t", "s", "u", in); err != nil {
			t.Fatal(err)
		}
	}
	owner := compact.SessionOwner("s", "u")
	counter := tokens.ForModel(cs.Model())
	compactTo := func(to int64) compact.Summary {
		t.Helper()
		sum, _, err := cs.Compact(ctx, "t", owner, compact.CompactRequest{ToSeq: to})
		if err != nil {
			t.Fatalf("compact to %d: %v", to, err)
		}
		return sum
	}
	add(10, 1)
	compactTo(5)
	compactTo(10)
	add(13, 11) // 23 messages, cap 20: 1-3 trimmed
	if first, _, err := cs.Bounds(ctx, "t", owner); err != nil || first != 4 {
		t.Fatalf("first seq %d (%v), want 4", first, err)
	}
	compactTo(15)
	last := compactTo(0)
	if last.Covers != (compact.Range{FromSeq: 16, ToSeq: 23}) {
		t.Fatalf("the next summary covers %s, want 16-23", last.Covers)
	}
	usable, err := cs.Usable(ctx, "t", owner)
	if err != nil {
		t.Fatal(err)
	}
	var ranges []string
	for _, u := range usable {
		ranges = append(ranges, u.Covers.String())
		// A summary that saves nothing has no place in a context: it is
		// shorter than its source.
		source := 0
		for seq := u.Covers.FromSeq; seq <= u.Covers.ToSeq; seq++ {
			source += counter.Count(fmt.Sprintf("message %d: the customer talks about refund order %d for 20 EUR and many other long words to fill", seq, seq))
		}
		if u.Tokens >= source {
			t.Fatalf("summary of %s takes %d tokens, its %d messages %d:\n%s", u.Covers, u.Tokens, u.Covers.ToSeq-u.Covers.FromSeq+1, source, u.Text)
		}
	}
	if strings.Join(ranges, ",") != "[6, 10],[11, 15],[16, 23]" {
		t.Fatalf("usable summaries %v, want [6, 10],[11, 15],[16, 23]", ranges)
	}
	res, err := b.Build(ctx, "t", contextbuild.Request{Model: "gpt-4o", BudgetTokens: 500, SessionID: "s", UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	summaries := 0
	for _, p := range res.Accounting.Parts {
		if p.Kind == contextbuild.KindSummary {
			summaries = len(p.SourceIDs)
		}
	}
	if summaries == 0 {
		t.Fatalf("no summary in the context: parts %+v, left out %+v", res.Accounting.Parts, res.Accounting.LeftOut)
	}
	for _, lo := range res.Accounting.LeftOut {
		if strings.Contains(lo.Reason, "summary") && slices.Contains(lo.SourceIDs, "msg:4") {
			t.Fatalf("message 4 (before the chain) is left out as covered by a summary: %+v", lo)
		}
	}
}

// runTurns creates run id of tenant with n events of type "turn", the
// payload of the i-th (from 0) being payload(i).
func runTurns(tb testing.TB, runs *run.Service, tenant, id string, n int, payload func(i int) string) {
	tb.Helper()
	ctx := context.Background()
	r, _, err := runs.Create(ctx, tenant, run.CreateRequest{RunID: id, WorkflowName: "chat", WorkflowVersion: "1"}, "")
	if err != nil {
		tb.Fatal(err)
	}
	l, err := runs.AcquireLease(ctx, tenant, id, "w", 0, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if r, _, err = runs.Commit(ctx, tenant, id, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: json.RawMessage(`{}`),
			Event: run.EventInput{EventType: "turn", Payload: json.RawMessage(payload(i))}}); err != nil {
			tb.Fatal(err)
		}
	}
}
