package storetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/toolop"
)

// CompactionBackend is one backend's stores for CompactionSuite.
type CompactionBackend struct {
	Runs      run.Store
	Ops       toolop.Store
	Sessions  session.Store
	Summaries compact.Store
	// TamperEvent rewrites the stored payload of one event behind the
	// store's back (an UPDATE in SQL), as corruption or a stray write would.
	// Nil: the suite reads events through a wrapper that alters them.
	TamperEvent func(t *testing.T, tenantID, runID string, seq int64, payload string)
	// Retention is true when Runs.DeleteTerminalBefore also deletes the
	// run's summaries (a backend that keeps both).
	Retention bool
}

// CompactionSuite checks the compaction service over a backend's stores:
// structured items survive, verification catches tampering, gaps and
// overlaps and marks the summary stale, a compactor change rebuilds, and
// nothing done to summaries changes a run or the operation ledger (rule 1).
func CompactionSuite(t *testing.T, open func(t *testing.T) CompactionBackend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f *cfx)
	}{
		{"StructuredFieldsSurvive", testCompactStructured},
		{"ChainContinues", testCompactChain},
		{"TamperedEventFailsVerify", testCompactTamper},
		{"GapFailsVerify", testCompactGap},
		{"OverlapFailsVerify", testCompactOverlap},
		{"RebuildAfterCompactorChange", testCompactRebuild},
		{"SummariesNeverFlowBack", testCompactRuleOne},
		{"SessionMessages", testCompactSession},
		{"Retention", testCompactRetention},
		{"ConcurrentCompactionsOneWins", testCompactConcurrent},
		{"RetriedRangeReturnsIt", testCompactRetried},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			tc.fn(t, newCfx(t, b))
		})
	}
}

// tamperRuns alters the payloads ListEvents returns, for a store that
// cannot be edited behind its back.
type tamperRuns struct {
	run.Store
	mu  sync.Mutex
	alt map[string]string // tenant/run/seq -> payload
}

func (s *tamperRuns) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]run.Event, error) {
	evs, err := s.Store.ListEvents(ctx, tenantID, runID, afterSeq, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range evs {
		if p, ok := s.alt[tenantID+"/"+runID+"/"+itoa(e.Seq)]; ok {
			evs[i].Payload = json.RawMessage(p)
		}
	}
	return evs, err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// cfx bundles the services of one compaction test and its tenant.
type cfx struct {
	t      *testing.T
	b      CompactionBackend
	runs   *run.Service
	ops    *toolop.Service
	sum    *compact.Service
	tenant string
	tamper func(runID string, seq int64, payload string)
}

func newCfx(t *testing.T, b CompactionBackend) *cfx {
	f := &cfx{t: t, b: b, runs: run.NewService(b.Runs, run.Options{}), ops: toolop.NewService(b.Ops, nil), tenant: newTenant()}
	src := b.Runs
	if b.TamperEvent != nil {
		f.tamper = func(runID string, seq int64, payload string) { b.TamperEvent(t, f.tenant, runID, seq, payload) }
	} else {
		tr := &tamperRuns{Store: b.Runs, alt: map[string]string{}}
		src = tr
		f.tamper = func(runID string, seq int64, payload string) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.alt[f.tenant+"/"+runID+"/"+itoa(seq)] = payload
		}
	}
	f.sum = compact.NewService(b.Summaries, compact.Options{Runs: src, Sessions: b.Sessions, Compactors: []compact.Compactor{rulesV2{}}})
	return f
}

// rulesV2 is the extractive compactor under another identity, as after a
// change of its rules.
type rulesV2 struct{ compact.Extractive }

func (rulesV2) Identity() compact.Identity {
	return compact.Identity{Name: "extractive-v2", PromptVersion: "rules-v2", SchemaVersion: compact.SchemaVersion}
}

// newRun creates a run and commits one event per payload, returning the run.
func (f *cfx) newRun(payloads ...string) run.Run {
	f.t.Helper()
	ctx := f.t.Context()
	r, _, err := f.runs.Create(ctx, f.tenant, run.CreateRequest{RunID: newID("run"), WorkflowName: "refund", WorkflowVersion: "1", State: json.RawMessage(`{"n":0}`)}, "")
	if err != nil {
		f.t.Fatalf("create run: %v", err)
	}
	l, err := f.runs.AcquireLease(ctx, f.tenant, r.RunID, "worker", 0, time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, p := range payloads {
		r, _, err = f.runs.Commit(ctx, f.tenant, r.RunID, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l,
			Event: run.EventInput{EventType: "step.completed", StepID: "s" + itoa(int64(i+2)), Attempt: 1, Payload: json.RawMessage(p)},
			State: json.RawMessage(`{"n":` + itoa(int64(i+1)) + `}`), NextStep: "next"})
		if err != nil {
			f.t.Fatalf("commit %d: %v", i, err)
		}
	}
	return r
}

func (f *cfx) compact(owner compact.Owner, req compact.CompactRequest) compact.Summary {
	f.t.Helper()
	s, _, err := f.sum.Compact(f.t.Context(), f.tenant, owner, req)
	if err != nil {
		f.t.Fatalf("compact %s %+v: %v", owner.ID, req, err)
	}
	return s
}

func (f *cfx) verify(id string) compact.Verification {
	f.t.Helper()
	v, err := f.sum.Verify(f.t.Context(), f.tenant, id)
	if err != nil {
		f.t.Fatalf("verify %s: %v", id, err)
	}
	return v
}

func (f *cfx) status(id string) compact.Summary {
	f.t.Helper()
	s, err := f.sum.Get(f.t.Context(), f.tenant, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

var refundPayloads = []string{
	`{"message":"Customer Alice Martin asked for a refund of $120.50 on order 7731 placed on 2024-03-02."}`,
	`{"operation_id":"op-refund-7731","tool_name":"payments.refund","amount":120.5,"currency":"usd","status":"started"}`,
	`{"note":"She does not want store credit and will never accept a voucher."}`,
	`{"approval_id":"ap-42","decision":"approved","by":"bob"}`,
	`{"tool_calls":[{"id":"call_9","function":{"name":"notify_customer","arguments":"{\"order\":7731}"}}]}`,
	`{"message":"Shipping fee 15 EUR is no longer charged."}`,
}

func testCompactStructured(t *testing.T, f *cfx) {
	r := f.newRun(refundPayloads...)
	s := f.compact(compact.RunOwner(r.RunID), compact.CompactRequest{})
	if s.Covers != (compact.Range{FromSeq: 1, ToSeq: r.StateRevision}) || s.Previous != "" || s.Version != 1 {
		t.Fatalf("first summary covers %s prev %q v%d", s.Covers, s.Previous, s.Version)
	}
	c := s.Carried
	hasAmount := func(v, cur string, seq int64) bool {
		for _, a := range c.Amounts {
			if a.Value == v && a.Currency == cur && reflect.DeepEqual(a.SourceSeqs, []int64{seq}) {
				return true
			}
		}
		return false
	}
	if !hasAmount("120.50", "USD", 2) || !hasAmount("120.5", "USD", 3) || !hasAmount("15", "EUR", 7) {
		t.Fatalf("amounts: %+v", c.Amounts)
	}
	if len(c.Operations) != 1 || c.Operations[0].OperationID != "op-refund-7731" || c.Operations[0].Status != "started" || c.Operations[0].SourceSeqs[0] != 3 {
		t.Fatalf("operations: %+v", c.Operations)
	}
	if len(c.Approvals) != 1 || c.Approvals[0].ApprovalID != "ap-42" || c.Approvals[0].Status != "approved" {
		t.Fatalf("approvals: %+v", c.Approvals)
	}
	var pending []string
	for _, p := range c.PendingToolCalls {
		pending = append(pending, p.ToolName+"/"+p.CallID)
	}
	if !reflect.DeepEqual(pending, []string{"payments.refund/op-refund-7731", "notify_customer/call_9"}) {
		t.Fatalf("pending tool calls: %v", pending)
	}
	cues := map[string]bool{}
	for _, n := range c.Negations {
		cues[n.Cue] = strings.Contains(n.Text, "never accept") || strings.Contains(n.Text, "no longer charged")
	}
	if len(c.Negations) != 2 || !cues["not"] || !cues["no longer"] {
		t.Fatalf("negations: %+v", c.Negations)
	}
	if len(s.Decisions) == 0 || s.Decisions[0].Code != "approval.approved" {
		t.Fatalf("decisions: %+v", s.Decisions)
	}
	for _, want := range []string{"op-refund-7731", "120.50 USD", "ap-42", "notify_customer"} {
		if !strings.Contains(s.Text, want) {
			t.Fatalf("text lacks %q:\n%s", want, s.Text)
		}
	}
	if s.Tokens <= 0 || s.Tokenizer == "" || !strings.HasPrefix(s.SourceDigest, compact.DigestPrefix) {
		t.Fatalf("tokens %d tokenizer %q digest %q", s.Tokens, s.Tokenizer, s.SourceDigest)
	}
	// The stored summary is what Compact answered.
	got := f.status(s.SummaryID)
	sameSummary(t, got, s)
	if v := f.verify(s.SummaryID); !v.OK || !compact.Passed(v.Checked.DigestMatches) || v.Checked.Items != r.StateRevision {
		t.Fatalf("fresh summary does not verify: %+v", v)
	}
}

func testCompactChain(t *testing.T, f *cfx) {
	ctx := t.Context()
	r := f.newRun(refundPayloads[:3]...)
	owner := compact.RunOwner(r.RunID)
	a := f.compact(owner, compact.CompactRequest{ToSeq: 2})
	if a.Covers != (compact.Range{FromSeq: 1, ToSeq: 2}) {
		t.Fatalf("a covers %s", a.Covers)
	}
	b := f.compact(owner, compact.CompactRequest{})
	if b.Covers != (compact.Range{FromSeq: 3, ToSeq: 4}) || b.Previous != a.SummaryID {
		t.Fatalf("b covers %s prev %q", b.Covers, b.Previous)
	}
	// Nothing left; a range that does not continue the chain; past the log.
	for _, req := range []compact.CompactRequest{{}, {FromSeq: 2, ToSeq: 4}, {FromSeq: 5, ToSeq: 9}, {FromSeq: 1, ToSeq: 3}} {
		if _, _, err := f.sum.Compact(ctx, f.tenant, owner, req); !errors.Is(err, compact.ErrRange) {
			t.Fatalf("compact %+v: %v, want ErrRange", req, err)
		}
	}
	// The same range again: the same summary, not a new one.
	again, created, err := f.sum.Compact(ctx, f.tenant, owner, compact.CompactRequest{FromSeq: 1, ToSeq: 2})
	if err != nil || created || again.SummaryID != a.SummaryID {
		t.Fatalf("same range again: %v created=%v %s", err, created, again.SummaryID)
	}
	if _, _, err := f.sum.Compact(ctx, f.tenant, owner, compact.CompactRequest{Compactor: "nope"}); !errors.Is(err, compact.ErrUnknownCompactor) {
		t.Fatalf("unknown compactor: %v", err)
	}
	if _, _, err := f.sum.Compact(ctx, f.tenant, compact.RunOwner("missing-run"), compact.CompactRequest{}); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	chain, err := f.sum.Usable(ctx, f.tenant, owner)
	if err != nil || len(chain) != 2 || chain[0].SummaryID != a.SummaryID || chain[1].SummaryID != b.SummaryID {
		t.Fatalf("usable chain: %v %d", err, len(chain))
	}
	for _, s := range chain {
		if v := f.verify(s.SummaryID); !v.OK {
			t.Fatalf("%s: %s", s.SummaryID, v.Reason)
		}
	}
	// Another tenant sees none of it.
	if _, err := f.sum.Get(ctx, newTenant(), a.SummaryID); !errors.Is(err, compact.ErrNotFound) {
		t.Fatalf("get from another tenant: %v", err)
	}
	page, next, err := f.sum.List(ctx, f.tenant, owner, "", 1)
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("list page 1: %v %d %q", err, len(page), next)
	}
	page2, next2, err := f.sum.List(ctx, f.tenant, owner, next, 1)
	if err != nil || len(page2) != 1 || page2[0].SummaryID != b.SummaryID || next2 != "" {
		t.Fatalf("list page 2: %v %d %q", err, len(page2), next2)
	}
	// A forged cursor whose id holds NUL or is empty is refused before
	// the store (PostgreSQL answered it with an internal error).
	for _, forged := range []string{`{"f":0,"i":"\u0000"}`, `{"f":0,"i":""}`} {
		_, _, err := f.sum.List(ctx, f.tenant, owner, base64.RawURLEncoding.EncodeToString([]byte(forged)), 1)
		if !errors.Is(err, compact.ErrInvalidInput) {
			t.Fatalf("forged cursor %q: %v, want ErrInvalidInput", forged, err)
		}
	}
}

func testCompactTamper(t *testing.T, f *cfx) {
	ctx := t.Context()
	r := f.newRun(refundPayloads...)
	owner := compact.RunOwner(r.RunID)
	a := f.compact(owner, compact.CompactRequest{ToSeq: 4})
	b := f.compact(owner, compact.CompactRequest{})
	if v := f.verify(a.SummaryID); !v.OK {
		t.Fatalf("before tampering: %s", v.Reason)
	}
	// Re-spacing and re-ordering a payload is not a change: the digest is
	// over canonical JSON.
	f.tamper(r.RunID, 3, `{ "status":"started", "currency":"usd","amount":120.50,"tool_name":"payments.refund","operation_id":"op-refund-7731" }`)
	if v := f.verify(a.SummaryID); !v.OK {
		t.Fatalf("an equivalent payload fails verification: %s", v.Reason)
	}
	f.tamper(r.RunID, 3, `{"operation_id":"op-refund-7731","tool_name":"payments.refund","amount":1205,"currency":"usd","status":"started"}`)
	v := f.verify(a.SummaryID)
	if v.OK || !strings.Contains(v.Reason, "digest") || v.Checked.DigestMatches == nil || *v.Checked.DigestMatches || v.Checked.ContentDigestMatches != nil || v.Status != compact.StatusStale {
		t.Fatalf("tampered range verifies: %+v", v)
	}
	st := f.status(a.SummaryID)
	if st.Status != compact.StatusStale || st.StaleReason != v.Reason || st.StaleAt == nil {
		t.Fatalf("tampered summary is %s %q", st.Status, st.StaleReason)
	}
	// Stale is never used, even if the event is put back.
	chain, err := f.sum.Usable(ctx, f.tenant, owner)
	if err != nil || len(chain) != 0 {
		t.Fatalf("usable after tampering: %v %d", err, len(chain))
	}
	// The other summary is untouched and still verifies.
	if v := f.verify(b.SummaryID); !v.OK {
		t.Fatalf("untampered summary: %s", v.Reason)
	}
	// A rebuild from today's events replaces it and the chain is whole again.
	n, err := f.sum.RebuildOwner(ctx, f.tenant, owner, "")
	if err != nil || len(n) != 1 || n[0].Supersedes != a.SummaryID || n[0].Version != 2 {
		t.Fatalf("rebuild: %v %+v", err, n)
	}
	chain, err = f.sum.Usable(ctx, f.tenant, owner)
	if err != nil || len(chain) != 2 || chain[0].SummaryID != n[0].SummaryID {
		t.Fatalf("usable after rebuild: %v %d", err, len(chain))
	}
	// Asking for a stale summary's range again, as Verify says, rebuilds it
	// though a later summary follows it (it used to be refused as out of
	// the chain's order); another end of range is refused.
	f.tamper(r.RunID, 2, `{"note":"changed again"}`)
	if v := f.verify(n[0].SummaryID); v.OK {
		t.Fatal("tampered again, still verifies")
	}
	if _, _, err := f.sum.Compact(ctx, f.tenant, owner, compact.CompactRequest{FromSeq: 1, ToSeq: 3}); !errors.Is(err, compact.ErrRange) {
		t.Fatalf("rebuild of a stale range with another end: %v, want ErrRange", err)
	}
	again, created, err := f.sum.Compact(ctx, f.tenant, owner, compact.CompactRequest{FromSeq: 1})
	if err != nil || !created || again.Supersedes != n[0].SummaryID || again.Version != 3 || again.Covers != a.Covers || again.Previous != "" {
		t.Fatalf("compact over a stale range: %v %v %+v", err, created, again)
	}
	if chain, err = f.sum.Usable(ctx, f.tenant, owner); err != nil || len(chain) != 2 || chain[0].SummaryID != again.SummaryID {
		t.Fatalf("usable after the second rebuild: %v %d", err, len(chain))
	}
}

// putRaw stores a summary built by hand, as a broken writer would.
func (f *cfx) putRaw(owner compact.Owner, from, to int64, prev string) compact.Summary {
	f.t.Helper()
	x := fullSummary(f.tenant, owner, from, to)
	x.Previous = prev
	items, err := compact.RunSource{Store: f.b.Runs}.Items(f.t.Context(), f.tenant, owner, from, to)
	if err != nil {
		f.t.Fatal(err)
	}
	if x.SourceDigest, err = compact.SourceDigest(items); err != nil {
		f.t.Fatal(err)
	}
	if err := compact.Seal(&x); err != nil {
		f.t.Fatal(err)
	}
	return mustPut(f.t, f.b.Summaries, x)
}

func testCompactGap(t *testing.T, f *cfx) {
	r := f.newRun(refundPayloads...)
	owner := compact.RunOwner(r.RunID)
	a := f.putRaw(owner, 1, 3, "")
	b := f.putRaw(owner, 5, 7, a.SummaryID) // seq 4 is covered by nothing
	v := f.verify(b.SummaryID)
	if v.OK || !strings.Contains(v.Reason, "gap") || v.Checked.Previous != a.SummaryID {
		t.Fatalf("gapped chain verifies: %+v", v)
	}
	if st := f.status(b.SummaryID); st.Status != compact.StatusStale {
		t.Fatalf("gapped summary is %s", st.Status)
	}
	// b is stale now, so a has no current next summary: it still verifies.
	if v := f.verify(a.SummaryID); !v.OK {
		t.Fatalf("a: %+v", v)
	}
	// A first summary that does not start at the log's start is a gap too.
	r2 := f.newRun(refundPayloads[:3]...)
	c := f.putRaw(compact.RunOwner(r2.RunID), 2, 3, "")
	if v := f.verify(c.SummaryID); v.OK || !strings.Contains(v.Reason, "gap") {
		t.Fatalf("chain starting at 2 verifies: %+v", v)
	}
	// And a next summary that does not start right after.
	r3 := f.newRun(refundPayloads[:4]...)
	o3 := compact.RunOwner(r3.RunID)
	d := f.putRaw(o3, 1, 2, "")
	f.putRaw(o3, 4, 5, "")
	if v := f.verify(d.SummaryID); v.OK || !strings.Contains(v.Reason, "gap") {
		t.Fatalf("summary followed by a hole verifies: %+v", v)
	}
	// The chain a context may use stops before the hole.
	chain, err := f.sum.Chain(t.Context(), f.tenant, owner)
	if err != nil || len(chain) != 1 || chain[0].SummaryID != a.SummaryID {
		t.Fatalf("chain: %v %d", err, len(chain))
	}
}

func testCompactOverlap(t *testing.T, f *cfx) {
	r := f.newRun(refundPayloads...)
	owner := compact.RunOwner(r.RunID)
	a := f.putRaw(owner, 1, 4, "")
	b := f.putRaw(owner, 3, 6, a.SummaryID)
	v := f.verify(b.SummaryID)
	if v.OK || !strings.Contains(v.Reason, "overlap") {
		t.Fatalf("overlapping chain verifies: %+v", v)
	}
	if st := f.status(b.SummaryID); st.Status != compact.StatusStale {
		t.Fatalf("overlapping summary is %s", st.Status)
	}
	// Without a chain link, another current summary over the same seqs is an overlap too.
	r2 := f.newRun(refundPayloads...)
	o2 := compact.RunOwner(r2.RunID)
	c := f.putRaw(o2, 1, 5, "")
	d := f.putRaw(o2, 4, 7, c.SummaryID)
	_ = d
	v = f.verify(c.SummaryID)
	if v.OK || !strings.Contains(v.Reason, "overlap") || len(v.Checked.Overlaps) != 1 {
		t.Fatalf("summary overlapped by another verifies: %+v", v)
	}
}

func testCompactRebuild(t *testing.T, f *cfx) {
	ctx := t.Context()
	r := f.newRun(refundPayloads...)
	owner := compact.RunOwner(r.RunID)
	a := f.compact(owner, compact.CompactRequest{ToSeq: 3})
	b := f.compact(owner, compact.CompactRequest{})
	// The compactor changed: rebuild everything made by the old identity.
	n, err := f.sum.RebuildOwner(ctx, f.tenant, owner, "extractive-v2")
	if err != nil || len(n) != 2 {
		t.Fatalf("rebuild owner: %v %d", err, len(n))
	}
	for i, old := range []compact.Summary{a, b} {
		x := n[i]
		if x.Covers != old.Covers || x.Version != 2 || x.Supersedes != old.SummaryID || x.Compactor.PromptVersion != "rules-v2" || x.SourceDigest != old.SourceDigest {
			t.Fatalf("rebuilt %d: %+v", i, x)
		}
		if st := f.status(old.SummaryID); st.Status != compact.StatusSuperseded {
			t.Fatalf("old %d is %s", i, st.Status)
		}
		if v := f.verify(x.SummaryID); !v.OK {
			t.Fatalf("rebuilt %d: %s", i, v.Reason)
		}
		if v := f.verify(old.SummaryID); v.OK {
			t.Fatalf("superseded %d verifies OK", i)
		}
		if i == 0 && (len(x.Carried.Operations) != 1 || x.Carried.Operations[0].OperationID != "op-refund-7731") {
			t.Fatal("rebuild lost the operation id")
		}
	}
	// Nothing left to rebuild; a rebuild of a superseded one is refused.
	if again, err := f.sum.RebuildOwner(ctx, f.tenant, owner, "extractive-v2"); err != nil || len(again) != 0 {
		t.Fatalf("second rebuild: %v %d", err, len(again))
	}
	if _, err := f.sum.Rebuild(ctx, f.tenant, a.SummaryID, ""); !errors.Is(err, compact.ErrRange) {
		t.Fatalf("rebuild of a superseded summary: %v", err)
	}
	// Asking for a range with another compactor rebuilds it too.
	x, created, err := f.sum.Compact(ctx, f.tenant, owner, compact.CompactRequest{FromSeq: 1, ToSeq: 3, Compactor: compact.ExtractiveName})
	if err != nil || !created || x.Version != 3 || x.Supersedes != n[0].SummaryID {
		t.Fatalf("compact with another compactor: %v %v %+v", err, created, x)
	}
	chain, err := f.sum.Usable(ctx, f.tenant, owner)
	if err != nil || len(chain) != 2 || chain[0].SummaryID != x.SummaryID || chain[1].SummaryID != n[1].SummaryID {
		t.Fatalf("usable chain after rebuilds: %v %d", err, len(chain))
	}
}

// truth is everything a source of truth holds about one run.
type truth struct {
	Run       run.Run
	Events    []run.Event
	Ops       []toolop.Operation
	Approvals []toolop.Approval
}

func (f *cfx) truth(runID string) truth {
	f.t.Helper()
	ctx := f.t.Context()
	r, err := f.b.Runs.GetRun(ctx, f.tenant, runID)
	if err != nil {
		f.t.Fatal(err)
	}
	var evs []run.Event
	for seq := int64(1); seq <= r.StateRevision; seq++ {
		e, err := f.b.Runs.GetEvent(ctx, f.tenant, runID, seq)
		if err != nil {
			f.t.Fatal(err)
		}
		evs = append(evs, e)
	}
	ops, err := f.b.Ops.ListOperations(ctx, f.tenant, runID, toolop.Page{})
	if err != nil {
		f.t.Fatal(err)
	}
	aps, err := f.b.Ops.ListApprovals(ctx, f.tenant, runID, toolop.Page{})
	if err != nil {
		f.t.Fatal(err)
	}
	return truth{r, evs, ops, aps}
}

func (f *cfx) sameTruth(before truth, what string) {
	f.t.Helper()
	after := f.truth(before.Run.RunID)
	b, _ := json.Marshal(before)
	a, _ := json.Marshal(after)
	if string(a) != string(b) || !reflect.DeepEqual(before.Run.Spent, after.Run.Spent) || before.Run.Chain != after.Run.Chain {
		f.t.Fatalf("%s changed a source of truth:\nbefore %s\nafter  %s", what, b, a)
	}
	for i := range before.Events {
		if before.Events[i].Chain != after.Events[i].Chain || string(before.Events[i].State) != string(after.Events[i].State) {
			f.t.Fatalf("%s changed event %d", what, before.Events[i].Seq)
		}
	}
}

func testCompactRuleOne(t *testing.T, f *cfx) {
	ctx := t.Context()
	r := f.newRun(refundPayloads...)
	if _, _, err := f.ops.Prepare(ctx, f.tenant, toolop.PrepareRequest{OperationID: "op-refund-7731", RunID: r.RunID, StepID: "s3", ToolName: "payments.refund", RequestDigest: "d1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ops.Start(ctx, f.tenant, "op-refund-7731"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.ops.RequestApproval(ctx, f.tenant, toolop.ApprovalRequest{ApprovalID: "ap-42", RunID: r.RunID, StepID: "s5", RequestDigest: "d2", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	owner := compact.RunOwner(r.RunID)
	before := f.truth(r.RunID)

	s := f.compact(owner, compact.CompactRequest{})
	f.sameTruth(before, "compacting")

	// Remove a detail from the summary (the operation id and the amount),
	// as a lossy rewrite would: a new version with less in it.
	lossy := s
	lossy.SummaryID, lossy.Version, lossy.Supersedes = "lossy-"+randHex(4), 2, s.SummaryID
	lossy.Carried.Operations, lossy.Carried.Amounts = nil, nil
	lossy.Facts = lossy.Facts[:1]
	lossy.Text = "The refund was cancelled."
	if err := compact.Seal(&lossy); err != nil { // a compactor's own output, sealed as the service seals
		t.Fatal(err)
	}
	mustPut(t, f.b.Summaries, lossy)
	if v := f.verify(lossy.SummaryID); !v.OK {
		// Verification checks coverage and source, not content: the
		// rewritten summary still covers intact events.
		t.Fatalf("lossy summary: %s", v.Reason)
	}
	f.sameTruth(before, "rewriting the summary")
	// The ledger still says what happened; the summary's claim changed nothing.
	op, err := f.ops.Get(ctx, f.tenant, "op-refund-7731")
	if err != nil || op.Status != toolop.StatusStarted {
		t.Fatalf("operation after rewriting the summary: %v %s", err, op.Status)
	}
	if _, err := f.b.Summaries.MarkStale(ctx, f.tenant, lossy.SummaryID, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	f.sameTruth(before, "marking the summary stale")
	if _, err := f.sum.RebuildOwner(ctx, f.tenant, owner, ""); err != nil {
		t.Fatal(err)
	}
	f.sameTruth(before, "rebuilding")
	if n, err := f.sum.Forget(ctx, f.tenant, owner); err != nil || n != 3 {
		t.Fatalf("forget: %d %v", n, err)
	}
	f.sameTruth(before, "deleting the summaries")
}

func testCompactSession(t *testing.T, f *cfx) {
	if f.b.Sessions == nil {
		t.Fatal("the backend gave no session store")
	}
	ctx := t.Context()
	ssvc := session.NewService(f.b.Sessions, session.Options{})
	sid, user := newID("s"), "u-"+randHex(3)
	if _, _, err := ssvc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: user, State: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	msgs := []session.MessageInput{
		{Role: "user", Content: "Hi, I'm Dana. I moved to Lisbon in March 2023."},
		{Role: "assistant", Content: "Welcome, Dana! What can I do for you?"},
		{Role: "user", Content: "I no longer eat meat. Please book the 120 EUR tasting menu for Friday."},
		{Role: "assistant", Content: "Done: operation id op-book-55 is pending confirmation."},
	}
	if _, err := ssvc.Append(ctx, f.tenant, sid, user, msgs); err != nil {
		t.Fatal(err)
	}
	owner := compact.SessionOwner(sid, user)
	s := f.compact(owner, compact.CompactRequest{})
	if s.Covers != (compact.Range{FromSeq: 1, ToSeq: 4}) {
		t.Fatalf("covers %s", s.Covers)
	}
	if len(s.Carried.Amounts) != 1 || s.Carried.Amounts[0].Value != "120" || s.Carried.Amounts[0].Currency != "EUR" {
		t.Fatalf("amounts %+v", s.Carried.Amounts)
	}
	if len(s.Carried.Operations) != 1 || s.Carried.Operations[0].OperationID != "op-book-55" {
		t.Fatalf("operations %+v", s.Carried.Operations)
	}
	if len(s.Carried.Negations) != 1 || s.Carried.Negations[0].Cue != "no longer" || s.Carried.Negations[0].SourceSeqs[0] != 3 {
		t.Fatalf("negations %+v", s.Carried.Negations)
	}
	if len(s.OpenQuestions) != 1 || s.OpenQuestions[0].SourceSeqs[0] != 2 {
		t.Fatalf("questions %+v", s.OpenQuestions)
	}
	found := false
	for _, fc := range s.Facts {
		if strings.Contains(fc.Text, "Lisbon") && fc.SourceSeqs[0] == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("the Lisbon fact is missing: %+v", s.Facts)
	}
	if v := f.verify(s.SummaryID); !v.OK {
		t.Fatalf("session summary: %s", v.Reason)
	}
	// Another user of the same session id sees nothing.
	if l, _, err := f.sum.List(ctx, f.tenant, compact.SessionOwner(sid, "intruder"), "", 0); err != nil || len(l) != 0 {
		t.Fatalf("list as another user: %v %d", err, len(l))
	}
	if l, _, err := f.sum.List(ctx, f.tenant, owner, "", 0); err != nil || len(l) != 1 {
		t.Fatalf("list as the user: %v %d", err, len(l))
	}
	if _, _, err := f.sum.Compact(ctx, f.tenant, compact.SessionOwner(sid, "intruder"), compact.CompactRequest{}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("compact as another user: %v", err)
	}
	// Closing the session makes its summary fail.
	if _, err := ssvc.Close(ctx, f.tenant, sid, user); err != nil {
		t.Fatal(err)
	}
	if v := f.verify(s.SummaryID); v.OK || !strings.Contains(v.Reason, "gone") {
		t.Fatalf("summary of a closed session: %+v", v)
	}
}

func testCompactRetention(t *testing.T, f *cfx) {
	ctx := t.Context()
	r := f.newRun(refundPayloads[:2]...)
	s := f.compact(compact.RunOwner(r.RunID), compact.CompactRequest{})
	keep := f.newRun(refundPayloads[:2]...)
	k := f.compact(compact.RunOwner(keep.RunID), compact.CompactRequest{})
	l, err := f.runs.AcquireLease(ctx, f.tenant, r.RunID, "worker", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.runs.Commit(ctx, f.tenant, r.RunID, run.CommitRequest{ExpectedRevision: r.StateRevision, Lease: l,
		Event: run.EventInput{EventType: "step.completed", StepID: "end", Attempt: 1}, State: json.RawMessage(`{}`), Status: run.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if !f.b.Retention {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.b.Runs.GetRun(ctx, f.tenant, r.RunID); errors.Is(err, run.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("retention did not delete the finished run")
		}
		if _, err := f.b.Runs.DeleteTerminalBefore(ctx, time.Now().Add(time.Hour), 100); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.b.Summaries.Get(ctx, f.tenant, s.SummaryID); !errors.Is(err, compact.ErrNotFound) {
		t.Fatalf("summary of a deleted run: %v", err)
	}
	if _, err := f.b.Summaries.Get(ctx, f.tenant, k.SummaryID); err != nil {
		t.Fatalf("summary of a kept run: %v", err)
	}
}

func testCompactConcurrent(t *testing.T, f *cfx) {
	r := f.newRun(refundPayloads...)
	owner := compact.RunOwner(r.RunID)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, _, errs[i] = f.sum.Compact(t.Context(), f.tenant, owner, compact.CompactRequest{}) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, compact.ErrRange):
			t.Fatalf("a losing compaction: %v, want ErrRange", err)
		}
	}
	// The log does not grow meanwhile, so exactly one range exists to win.
	if won != 1 {
		t.Fatalf("%d compactions won", won)
	}
	chain, err := f.sum.Usable(t.Context(), f.tenant, owner)
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := f.sum.List(t.Context(), f.tenant, owner, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != len(all) || len(all) != won {
		t.Fatalf("%d won, %d stored, %d usable", won, len(all), len(chain))
	}
}

// testCompactRetried: a request for a range the chain already ends at (a
// retry, or the same request from several clients at once) returns the
// summary of that range, created once, instead of refusing the range.
func testCompactRetried(t *testing.T, f *cfx) {
	r := f.newRun(refundPayloads...)
	owner := compact.RunOwner(r.RunID)
	const n = 8
	var wg sync.WaitGroup
	sums := make([]compact.Summary, n)
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			sums[i], created[i], errs[i] = f.sum.Compact(t.Context(), f.tenant, owner, compact.CompactRequest{ToSeq: 3})
		})
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d for the range the others asked: %v", i, errs[i])
		}
		if sums[i].SummaryID != sums[0].SummaryID || sums[i].Covers != (compact.Range{FromSeq: 1, ToSeq: 3}) {
			t.Fatalf("request %d got %s over %s, request 0 %s", i, sums[i].SummaryID, sums[i].Covers, sums[0].SummaryID)
		}
		if created[i] {
			made++
		}
	}
	if made != 1 {
		t.Fatalf("%d requests say they made the summary", made)
	}
	again, c, err := f.sum.Compact(t.Context(), f.tenant, owner, compact.CompactRequest{ToSeq: 3})
	if err != nil || c || again.SummaryID != sums[0].SummaryID {
		t.Fatalf("the range asked again: %s created %v, %v", again.SummaryID, c, err)
	}
	// A range past the chain's end is a new summary, as before.
	next, c, err := f.sum.Compact(t.Context(), f.tenant, owner, compact.CompactRequest{ToSeq: 4})
	if err != nil || !c || next.Covers != (compact.Range{FromSeq: 4, ToSeq: 4}) {
		t.Fatalf("the next range: %s created %v, %v", next.Covers, c, err)
	}
	if _, _, err := f.sum.Compact(t.Context(), f.tenant, owner, compact.CompactRequest{ToSeq: 2}); !errors.Is(err, compact.ErrRange) {
		t.Fatalf("a to_seq inside the chain: %v, want ErrRange", err)
	}
}
