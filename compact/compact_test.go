package compact_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/llm/llmtest"
	"github.com/mementohq/memento/llm/openai"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/tokens"
)

func item(seq int64, typ, payload string) compact.Item {
	return compact.Item{Seq: seq, Type: typ, Payload: json.RawMessage(payload)}
}

func TestSourceDigestCanonicalAndFramed(t *testing.T) {
	a := []compact.Item{item(1, "step.completed", `{"b":1,"a":[1.50,"x"]}`)}
	b := []compact.Item{item(1, "step.completed", "{ \"a\" : [1.5, \"x\"],\n \"b\": 1.0 }")}
	da, err := compact.SourceDigest(a)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := compact.SourceDigest(b)
	if da != db {
		t.Fatalf("equivalent payloads digest differently: %s %s", da, db)
	}
	if !strings.HasPrefix(da, "sha256:") || len(da) != len("sha256:")+64 {
		t.Fatalf("digest form %q", da)
	}
	// Every field counts, and framing keeps field boundaries apart.
	variants := [][]compact.Item{
		{item(2, "step.completed", `{"b":1,"a":[1.5,"x"]}`)},
		{item(1, "step.complete", `{"b":1,"a":[1.5,"x"]}`)},
		{{Seq: 1, Type: "step.completed", StepID: "s", Payload: json.RawMessage(`{"b":1,"a":[1.5,"x"]}`)}},
		{{Seq: 1, Type: "step.completed", Attempt: 2, Payload: json.RawMessage(`{"b":1,"a":[1.5,"x"]}`)}},
		{item(1, "step.completed", `{"b":2,"a":[1.5,"x"]}`)},
		{item(1, "ab", `null`)},
		{{Seq: 1, Type: "a", StepID: "b", Payload: json.RawMessage(`null`)}},
		{},
	}
	seen := map[string]int{da: -1}
	for i, v := range variants {
		d, err := compact.SourceDigest(v)
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := seen[d]; dup {
			t.Fatalf("variants %d and %d digest the same", i, j)
		}
		seen[d] = i
	}
	// Absent payload is null.
	x, _ := compact.SourceDigest([]compact.Item{{Seq: 1, Type: "t"}})
	y, _ := compact.SourceDigest([]compact.Item{item(1, "t", `null`)})
	if x != y {
		t.Fatal("absent payload and null differ")
	}
	if _, err := compact.SourceDigest([]compact.Item{item(1, "t", `{"a":`)}); err == nil {
		t.Fatal("invalid JSON digested")
	}
}

func TestScan(t *testing.T) {
	items := []compact.Item{
		{Seq: 1, Type: "user", Text: "The total was $1,200.50 and shipping 15 EUR. Also EUR 30 and 45 dollars, ¥500."},
		{Seq: 2, Type: "user", Text: "I don't want the red one. It is not urgent."},
		item(3, "payment", `{"amount_cents":12050,"currency":"gbp"}`),
		{Seq: 4, Type: "assistant", Text: "Refund started, operation id op_77; approval id ap-9 is pending."},
		item(5, "tool.call", `{"tool_name":"search","call_id":"c1","arguments":{"q":"x"}}`),
		item(6, "tool.result", `{"tool_name":"search","call_id":"c1"}`),
		item(7, "tool.call", `{"tool_name":"email","call_id":"c2"}`),
		{Seq: 8, Type: "assistant", Payload: json.RawMessage(`{"content":"","metadata":{"tool_calls":[{"id":"call_3","function":{"name":"lookup","arguments":"{}"}}]}}`), Text: "calling"},
		{Seq: 9, Type: "tool", Payload: json.RawMessage(`{"content":"ok","metadata":{"tool_call_id":"call_3"}}`), Text: "ok"},
		item(10, "step.completed", `{"amount":1999,"note":"no currency named"}`),
		item(11, "step.completed", `{"value":7,"price":"12"}`), // neither is money without a currency
	}
	c := compact.Scan(items)
	var am []string
	for _, a := range c.Amounts {
		am = append(am, fmt.Sprintf("%s %s @%d", a.Value, a.Currency, a.SourceSeqs[0]))
	}
	want := []string{"1200.50 USD @1", "500 JPY @1", "15 EUR @1", "30 EUR @1", "45 USD @1", "120.50 GBP @3", "1999  @10"}
	if !reflect.DeepEqual(am, want) {
		t.Fatalf("amounts\n got %v\nwant %v", am, want)
	}
	if len(c.Negations) != 2 || c.Negations[0].Cue != "don't" || c.Negations[1].Cue != "not" {
		t.Fatalf("negations %+v", c.Negations)
	}
	if len(c.Operations) != 1 || c.Operations[0].OperationID != "op_77" || len(c.Approvals) != 1 || c.Approvals[0].ApprovalID != "ap-9" {
		t.Fatalf("ids %+v %+v", c.Operations, c.Approvals)
	}
	var pending []string
	for _, p := range c.PendingToolCalls {
		pending = append(pending, p.ToolName+"/"+p.CallID)
	}
	if !reflect.DeepEqual(pending, []string{"email/c2"}) {
		t.Fatalf("pending %v", pending)
	}
}

func TestExtractiveBudgetAndCitations(t *testing.T) {
	var items []compact.Item
	for i := int64(1); i <= 60; i++ {
		items = append(items, compact.Item{Seq: i, Type: "user", Text: fmt.Sprintf("On Monday I met Carol Smith at %d Baker Street and we talked for a long while about nothing much.", i)})
	}
	rg := compact.Range{FromSeq: 1, ToSeq: 60}
	for _, budget := range []int{60, 200, 800} {
		d, err := compact.Extractive{}.Compact(context.Background(), compact.Input{Owner: compact.RunOwner("r"), Range: rg, Items: items, Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		n := compact.CountItems("llama-3", []compact.Item{{Text: d.Text}})[0].Tokens
		if n > budget+10 {
			t.Fatalf("budget %d: text has ~%d tokens", budget, n)
		}
		if len(d.Facts) == 0 {
			t.Fatalf("budget %d: no facts", budget)
		}
		for _, f := range d.Facts {
			if len(f.SourceSeqs) != 1 || !rg.Contains(f.SourceSeqs[0]) || !strings.Contains(f.Text, fmt.Sprint(f.SourceSeqs[0])) {
				t.Fatalf("fact %+v cites the wrong seq", f)
			}
		}
	}
}

func TestTrigger(t *testing.T) {
	hist := func(n, each int) []compact.SeqTokens {
		var out []compact.SeqTokens
		for i := 1; i <= n; i++ {
			out = append(out, compact.SeqTokens{Seq: int64(i + 10), Tokens: each})
		}
		return out
	}
	res := compact.Reserves{System: 500, Tools: 1000, Retrieved: 1500, Answer: 1000}
	p, err := compact.Trigger(compact.TriggerInput{Model: "gpt-4o", ContextWindow: 8000, Reserves: res, History: hist(30, 100)})
	if err != nil || p.Compact || p.Budget != 4000 || p.HistoryTokens != 3000 || p.Tokenizer != "o200k_base" || !p.Exact {
		t.Fatalf("fits: %v %+v", err, p)
	}
	p, err = compact.Trigger(compact.TriggerInput{Model: "gpt-4o", ContextWindow: 8000, Reserves: res, SummaryTokens: 500, History: hist(40, 100)})
	if err != nil || !p.Compact {
		t.Fatalf("over: %v %+v", err, p)
	}
	// Keep half of 4000 raw: 20 entries stay, 20 are compacted.
	if p.Range != (compact.Range{FromSeq: 11, ToSeq: 30}) || p.KeptTokens != 2000 {
		t.Fatalf("range %s kept %d", p.Range, p.KeptTokens)
	}
	// Over the budget by the summaries alone: no raw entry to compact helps.
	p, err = compact.Trigger(compact.TriggerInput{Model: "gpt-4o", ContextWindow: 8000, Reserves: res, SummaryTokens: 3900, History: hist(10, 100)})
	if err != nil || p.Compact || p.HistoryTokens != 4900 || p.KeptTokens != 1000 {
		t.Fatalf("summaries over: %v %+v", err, p)
	}
	// One huge entry at the end is never compacted itself.
	h := append(hist(3, 10), compact.SeqTokens{Seq: 99, Tokens: 9000})
	p, err = compact.Trigger(compact.TriggerInput{Model: "llama-3", ContextWindow: 8000, Reserves: res, History: h})
	if err != nil || !p.Compact || p.Range.ToSeq != 13 || p.Exact {
		t.Fatalf("huge last: %v %+v", err, p)
	}
	for _, in := range []compact.TriggerInput{
		{ContextWindow: 4000, Reserves: res},
		{ContextWindow: 0},
		{ContextWindow: 9000, Reserves: compact.Reserves{Tools: -1}},
		{ContextWindow: 9000, History: []compact.SeqTokens{{Seq: 2, Tokens: 1}, {Seq: 2, Tokens: 1}}},
	} {
		if _, err := compact.Trigger(in); !errors.Is(err, compact.ErrInvalidInput) {
			t.Fatalf("%+v: %v", in, err)
		}
	}
}

// llmFixture is a compaction service with the LLM compactor against the fake.
type llmFixture struct {
	srv    *llmtest.Server
	svc    *compact.Service
	store  *memstore.Store
	tenant string
	runID  string
}

func newLLMFixture(t *testing.T, timeout time.Duration) *llmFixture {
	t.Helper()
	srv := llmtest.New(llmtest.Options{})
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Config{BaseURL: srv.URL, Timeout: timeout, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.NewChat(openai.ChatConfig{Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	svc := compact.NewService(st.Summaries(), compact.Options{Runs: st, Compactors: []compact.Compactor{compact.LLM{Chat: ch, Model: "gpt-4o-mini"}}, Default: compact.LLMName})
	f := &llmFixture{srv: srv, svc: svc, store: st, tenant: "t-llm", runID: "r-llm"}
	runs := run.NewService(st, run.Options{})
	ctx := t.Context()
	r, _, err := runs.Create(ctx, f.tenant, run.CreateRequest{RunID: f.runID, WorkflowName: "refund", WorkflowVersion: "1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := runs.AcquireLease(ctx, f.tenant, f.runID, "w", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{
		`{"message":"Alice wants a refund of $120.50 for order 7731."}`,
		`{"operation_id":"op-7731","tool_name":"payments.refund","status":"started"}`,
	} {
		r, _, err = runs.Commit(ctx, f.tenant, f.runID, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l, State: json.RawMessage(`{}`),
			Event: run.EventInput{EventType: "step.completed", StepID: fmt.Sprint("s", i), Attempt: 1, Payload: json.RawMessage(p)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *llmFixture) stored(t *testing.T) int {
	t.Helper()
	l, _, err := f.svc.List(t.Context(), f.tenant, compact.RunOwner(f.runID), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(l)
}

const goodAnswer = `{"facts":[{"text":"Alice wants a refund of 120.50 USD for order 7731","source_seqs":[2]}],
 "open_questions":[],"decisions":[{"code":"refund.started","text":"the refund was started","source_seqs":[3]}],
 "carried":{"pending_tool_calls":[],"approvals":[],"operations":[],
   "amounts":[{"value":"120.50","currency":"USD","text":"$120.50","source_seqs":[2]}],"negations":[]},
 "text":"Alice asked for a 120.50 USD refund of order 7731; the refund operation has started."}`

func TestLLMCompactor(t *testing.T) {
	f := newLLMFixture(t, 5*time.Second)
	f.srv.Reply(llmtest.Reply{Content: goodAnswer})
	s, created, err := f.svc.Compact(t.Context(), f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{})
	if err != nil || !created {
		t.Fatalf("compact: %v %v", err, created)
	}
	if s.Compactor.Name != compact.LLMName || s.Compactor.Model != "gpt-4o-mini" || s.Compactor.PromptVersion == "" {
		t.Fatalf("identity %+v", s.Compactor)
	}
	if s.Usage == nil || s.Usage.TotalTokens == 0 || s.Usage.TotalTokens != s.Usage.PromptTokens+s.Usage.CompletionTokens {
		t.Fatalf("usage %+v", s.Usage)
	}
	if len(s.Facts) != 1 || s.Facts[0].SourceSeqs[0] != 2 || !strings.Contains(s.Text, "order 7731") {
		t.Fatalf("facts %+v text %q", s.Facts, s.Text)
	}
	// The model forgot the operation id and the pending call: the scanner carries them.
	if len(s.Carried.Operations) != 1 || s.Carried.Operations[0].OperationID != "op-7731" || len(s.Carried.PendingToolCalls) != 1 {
		t.Fatalf("carried %+v", s.Carried)
	}
	if len(s.Carried.Amounts) != 1 { // the model's and the scanner's amount are one
		t.Fatalf("amounts %+v", s.Carried.Amounts)
	}
	reqs := f.srv.Requests(llmtest.Chat)
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	var body struct {
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Strict bool            `json:"strict"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ResponseFormat.Type != "json_schema" || !body.ResponseFormat.JSONSchema.Strict || len(body.ResponseFormat.JSONSchema.Schema) < 100 {
		t.Fatalf("response format %+v", body.ResponseFormat)
	}
	if !strings.Contains(body.Messages[1].Content, "[2] step.completed (s0)") {
		t.Fatalf("prompt lacks the entries: %s", body.Messages[1].Content)
	}
	if v, err := f.svc.Verify(t.Context(), f.tenant, s.SummaryID); err != nil || !v.OK {
		t.Fatalf("verify: %v %+v", err, v)
	}
	// The raw tail a context shows after the summaries comes from the same source.
	first, last, err := f.svc.Bounds(t.Context(), f.tenant, compact.RunOwner(f.runID))
	if err != nil || first != 1 || last != 3 {
		t.Fatalf("bounds %d %d %v", first, last, err)
	}
	tail, err := f.svc.Items(t.Context(), f.tenant, compact.RunOwner(f.runID), s.Covers.ToSeq+1, last)
	if err != nil || len(tail) != 0 {
		t.Fatalf("tail after a summary of everything: %v %d", err, len(tail))
	}
	all, err := f.svc.Items(t.Context(), f.tenant, compact.RunOwner(f.runID), 2, 3)
	if err != nil || len(all) != 2 || all[0].Seq != 2 || all[0].Type != "step.completed" {
		t.Fatalf("items: %v %+v", err, all)
	}
}

func TestLLMCompactorRefusesBadAnswers(t *testing.T) {
	bad := []struct{ name, content, finish string }{
		{"not JSON", "Here is your summary: Alice wants a refund.", ""},
		{"truncated", goodAnswer[:80], ""},
		{"missing member", `{"facts":[],"open_questions":[],"decisions":[],"carried":{"pending_tool_calls":[],"approvals":[],"operations":[],"amounts":[],"negations":[]}}`, ""},
		{"unknown member", strings.Replace(goodAnswer, `"open_questions":[]`, `"open_questions":[],"mood":"happy"`, 1), ""},
		{"seq outside the range", strings.Replace(goodAnswer, `"source_seqs":[2]}],`, `"source_seqs":[9]}],`, 1), ""},
		{"no citation", strings.Replace(goodAnswer, `"source_seqs":[3]`, `"source_seqs":[]`, 1), ""},
		{"amount not decimal", strings.Replace(goodAnswer, `"value":"120.50"`, `"value":"$120.50"`, 1), ""},
		{"cut at max tokens", goodAnswer, "length"},
		{"two JSON values", goodAnswer + "{}", ""},
		{"empty text", strings.Replace(goodAnswer, `"text":"Alice asked`, `"text":"","x":"`, 1), ""},
	}
	f := newLLMFixture(t, 5*time.Second)
	for _, b := range bad {
		f.srv.Reply(llmtest.Reply{Content: b.content, FinishReason: b.finish})
		_, _, err := f.svc.Compact(t.Context(), f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{})
		if !errors.Is(err, compact.ErrCompactorFailed) {
			t.Fatalf("%s: %v, want ErrCompactorFailed", b.name, err)
		}
		if n := f.stored(t); n != 0 {
			t.Fatalf("%s: %d summaries stored", b.name, n)
		}
	}
	for _, fault := range []llmtest.Fault{{Kind: llmtest.FaultMalformed}, {Kind: llmtest.FaultWrongShape}, {Kind: llmtest.FaultNoChoices}, llmtest.Status(500, "overloaded")} {
		f.srv.Fail(llmtest.Chat, fault)
		if _, _, err := f.svc.Compact(t.Context(), f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{}); !errors.Is(err, compact.ErrCompactorFailed) {
			t.Fatalf("fault %v: %v", fault.Kind, err)
		}
	}
	if n := f.stored(t); n != 0 {
		t.Fatalf("%d summaries stored after faults", n)
	}
	// The extractive compactor still works beside it.
	if _, _, err := f.svc.Compact(t.Context(), f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{Compactor: compact.ExtractiveName}); err != nil {
		t.Fatal(err)
	}
}

func TestLLMCompactorTimeout(t *testing.T) {
	f := newLLMFixture(t, 150*time.Millisecond)
	f.srv.Fail(llmtest.Chat, llmtest.Slow(10*time.Second))
	start := time.Now()
	_, _, err := f.svc.Compact(t.Context(), f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{})
	if !errors.Is(err, compact.ErrCompactorFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow model: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the timeout did not bound the call")
	}
	if n := f.stored(t); n != 0 {
		t.Fatalf("%d summaries stored after a timeout", n)
	}
	// The caller's own deadline bounds it too.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	f.srv.Fail(llmtest.Chat, llmtest.Slow(10*time.Second))
	if _, _, err := f.svc.Compact(ctx, f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller deadline: %v", err)
	}
}

// editedStore is a summary store whose rows someone edited in place: Get
// returns the summary with edit applied, as a changed row would read.
type editedStore struct {
	compact.Store
	edit func(*compact.Summary)
}

func (e editedStore) Get(ctx context.Context, tenantID, summaryID string) (compact.Summary, error) {
	s, err := e.Store.Get(ctx, tenantID, summaryID)
	if err == nil {
		e.edit(&s)
	}
	return s, err
}

// TestTamperedSummaryFailsVerification: a summary whose stored content
// changed after it was made (a fact dropped, an amount changed, the prose
// rewritten) fails Verify on its content digest, though its range and
// source are intact.
func TestTamperedSummaryFailsVerification(t *testing.T) {
	for name, c := range map[string]struct {
		edit   func(*compact.Summary)
		reason string
	}{
		"fact dropped":   {func(s *compact.Summary) { s.Facts = s.Facts[:0] }, "content digest"},
		"amount changed": {func(s *compact.Summary) { s.Carried.Amounts[0].Value = "12050.00" }, "content digest"},
		"text rewritten": {func(s *compact.Summary) { s.Text = "Nothing was refunded." }, "content digest"},
		"range moved":    {func(s *compact.Summary) { s.Covers.FromSeq++ }, "gap"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newLLMFixture(t, 5*time.Second)
			f.srv.Reply(llmtest.Reply{Content: goodAnswer})
			ctx := t.Context()
			sum, _, err := f.svc.Compact(ctx, f.tenant, compact.RunOwner(f.runID), compact.CompactRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := f.svc.Verify(ctx, f.tenant, sum.SummaryID); err != nil || !v.OK || !compact.Passed(v.Checked.ContentDigestMatches) {
				t.Fatalf("untouched summary: %+v %v", v, err)
			}
			svc := compact.NewService(editedStore{Store: f.store.Summaries(), edit: c.edit}, compact.Options{Runs: f.store})
			v, err := svc.Verify(ctx, f.tenant, sum.SummaryID)
			if err != nil {
				t.Fatal(err)
			}
			if v.OK || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("tampered summary: ok=%v reason %q, want a failure naming %q", v.OK, v.Reason, c.reason)
			}
		})
	}
}

// TestExtractiveShorterThanSource: over chatty messages, where every
// sentence scores as a fact, the summary still saves tokens (it took all
// of them, plus its own lines, up to the default budget).
func TestExtractiveShorterThanSource(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	var items []compact.Item
	source := 0
	for i := 1; i <= 8; i++ {
		text := fmt.Sprintf("I told the agent on Monday that order %d for 20 EUR was late again, and that my sister in Porto waits for it.", 7000+i)
		items = append(items, compact.Item{Seq: int64(i), Type: "user", Text: text})
		source += counter.Count(text)
	}
	d, err := compact.Extractive{}.Compact(t.Context(), compact.Input{Owner: compact.SessionOwner("s", "u"), Range: compact.Range{FromSeq: 1, ToSeq: 8}, Items: items, Counter: counter})
	if err != nil {
		t.Fatal(err)
	}
	if n := counter.Count(d.Text); n >= source || len(d.Facts) == 0 {
		t.Fatalf("summary of %d tokens with %d facts, its source %d tokens:\n%s", n, len(d.Facts), source, d.Text)
	}
}

// TestExtractiveShowsASentenceOnce: a sentence that is both a negation and
// a decision is carried in both structured fields and shown once in the
// text (it was shown as both, and again as a fact: fifty such notes made a
// summary of 3,318 tokens from 1,450).
func TestExtractiveShowsASentenceOnce(t *testing.T) {
	counter := tokens.ForModel("gpt-4o")
	var items []compact.Item
	var sentences []string
	for i := 1; i <= 50; i++ {
		s := fmt.Sprintf("We will not ship order %d before the customer confirms the address, and we decided to hold the refund until Friday.", 7000+i)
		p, _ := json.Marshal(map[string]string{"note": s})
		items = append(items, compact.Item{Seq: int64(i), Type: "note", Payload: p})
		sentences = append(sentences, s)
	}
	d, err := compact.Extractive{}.Compact(t.Context(), compact.Input{Owner: compact.RunOwner("r"), Range: compact.Range{FromSeq: 1, ToSeq: 50}, Items: items, Counter: counter})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Carried.Negations) != 50 || len(d.Decisions) != 50 {
		t.Fatalf("%d negations and %d decisions carried, want 50 of each", len(d.Carried.Negations), len(d.Decisions))
	}
	for _, s := range sentences {
		if n := strings.Count(d.Text, s); n != 1 {
			t.Fatalf("%q is shown %d times in:\n%s", s, n, d.Text)
		}
	}
}
