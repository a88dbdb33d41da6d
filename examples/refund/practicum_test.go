package refund_test

// The chapter's practicum, criterion by criterion. Every test runs on the
// embedded backend (SQLite) and on PostgreSQL.
//
//  1. A crash matrix with a real SIGKILL at four points around the refund
//     call: the run resumes at the right step and the refund is applied
//     once. TestCrashMatrix (crash_test.go).
//  2. A random-kill soak of at least 200 SIGKILLs: no order refunded twice,
//     no run lost. TestSoakRandomKills (soak_test.go).
//  3. Two workers on one run cannot both commit one revision.
//     TestTwoWorkersCannotCommitOneRevision (below).
//  4. A lookup that is not authoritative leaves the operation unknown and
//     the run suspended naming it, with no automatic retry.
//     TestNonAuthoritativeLookup (crash_test.go).
//  5. An expired approval is not used after resume, and a changed request
//     digest invalidates an approval. TestExpiredApprovalNotUsedAfterResume,
//     TestChangedRequestDigestInvalidatesApproval (below).
//  6. A stored checkpoint of an older state schema is migrated and resumed;
//     one of an unknown schema is refused. TestFixtureCheckpoints
//     (fixture_test.go).
//  7. Removing a detail from a summary changes neither the durable state
//     nor the operation ledger, and a tampered or gapped summary fails
//     verification. TestDroppedSummaryDetailChangesNoTruth,
//     TestTamperedOrGappedSummaryFailsVerification (below).
//
// And the rest of the practicum's workflow: the long customer dialog read
// through a summary plus its recent messages (TestDialogSummaryFeedsDecision),
// one confirmed long-term preference of the customer with its provenance
// (TestConfirmedPreferenceKeptWithProvenance), and the refund policy
// retrieved with provenance under its ACL (TestPolicyRetrievedWithProvenanceAndACL).

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// policyEngine is a worker whose approvals the refund policy decides.
func (r *rig) policyEngine(owner string) *workflow.Engine {
	return r.engine(owner, workflow.Options{Approver: refund.Policy(15000)}, refund.Options{})
}

// drive runs the order's run to an end and wants it completed, refunded.
func (r *rig) drive(eng *workflow.Engine, orderID string) runState {
	r.t.Helper()
	id := r.start(eng, orderID)
	got, err := eng.Drive(r.t.Context(), id)
	if err != nil || got.Status != run.StatusCompleted {
		r.t.Fatalf("drive %s: %s %q %v", id, got.Status, got.StatusReason, err)
	}
	st := r.state(id)
	if st.Outcome != refund.OutcomeRefunded {
		r.t.Fatalf("%s ended %q", id, st.Outcome)
	}
	return st
}

// holdAt is a hook that stops the worker at point for runID: it reports
// reaching it on the channel and blocks until the worker's context ends.
func holdAt(point, runID string) (workflow.Hooks, chan struct{}) {
	reached := make(chan struct{}, 1)
	return workflow.Hooks{At: func(ctx context.Context, at, id string) {
		if at != point || id != runID {
			return
		}
		reached <- struct{}{}
		<-ctx.Done()
	}}, reached
}

// crashAtPoint drives the run with a worker that is stopped (its context
// cancelled, as a kill ends it) once it reaches point.
func (r *rig) crashAtPoint(orderID, point string) string {
	r.t.Helper()
	id := refund.RunID(orderID)
	hooks, reached := holdAt(point, id)
	eng := r.engine("doomed", workflow.Options{Approver: refund.Policy(15000), Hooks: hooks}, refund.Options{})
	r.start(eng, orderID)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := eng.Drive(ctx, id); done <- err }()
	select {
	case <-reached:
	case err := <-done:
		cancel()
		r.t.Fatalf("%s ended before %s: %v", id, point, err)
	}
	cancel()
	if err := <-done; err == nil {
		r.t.Fatalf("the stopped worker's drive of %s returned no error", id)
	}
	return id
}

func (r *rig) ledger() []refund.Refund {
	r.t.Helper()
	rs, err := r.pay.Refunds(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return rs
}

// 3. Two workers on one run cannot both commit one revision: racing
// workers commit every step once in a log with no gap, a stale owner's
// commit is refused by the fencing token, and a revision taken once
// cannot be committed again.
func TestTwoWorkersCannotCommitOneRevision(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		w1, w2 := r.policyEngine("w1"), r.policyEngine("w2")
		id := r.start(w1, "order-0001")
		var wg sync.WaitGroup
		for _, eng := range []*workflow.Engine{w1, w2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := eng.Drive(ctx, id)
					if err == nil && got.Status.Terminal() {
						return
					}
					if err != nil && !run.IsConflict(err) {
						t.Errorf("drive: %v", err)
						return
					}
					if cur, _ := r.e.Runs.Get(ctx, "default", id); cur.Status.Terminal() {
						return
					}
					time.Sleep(5 * time.Millisecond) // back off while the other worker holds the lease
				}
			}()
		}
		wg.Wait()
		evs := events(t, r.e, id)
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("event seq %d at position %d: %s", ev.Seq, i, eventSummary(evs))
			}
		}
		for s, n := range countSteps(evs) {
			if n != 1 {
				t.Fatalf("step %s committed %d times: %s", s, n, eventSummary(evs))
			}
		}
		if st := r.state(id); st.Run.Status != run.StatusCompleted || st.Outcome != refund.OutcomeRefunded {
			t.Fatalf("raced run: %s %q", st.Run.Status, st.Outcome)
		}
		if rs := r.ledger(); len(rs) != 1 {
			t.Fatalf("the raced run refunded %d times", len(rs))
		}

		// A stale owner: its lease expired and another worker took the run.
		id2 := r.start(w1, "order-0003")
		old, err := r.e.Runs.AcquireLease(ctx, "default", id2, "sleeper", 0, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // real lease expiry
		res, err := w2.Resume(ctx, id2)
		if err != nil || res.Lease.Epoch <= old.Epoch {
			t.Fatalf("takeover: %+v %v", res.Lease, err)
		}
		cur := res.Run
		commit := func(l run.Lease) error {
			_, _, err := r.e.Runs.Commit(ctx, "default", id2, run.CommitRequest{ExpectedRevision: cur.StateRevision, Lease: l, State: cur.State,
				NextStep: cur.NextStep, Event: run.EventInput{EventType: "operator.noted", Payload: json.RawMessage(`{"note":"checked"}`)}})
			return err
		}
		if err := commit(old); !errors.Is(err, run.ErrLeaseLost) {
			t.Fatalf("stale owner's commit: %v, want %v", err, run.ErrLeaseLost)
		}
		if err := commit(res.Lease); err != nil {
			t.Fatalf("new owner's commit: %v", err)
		}
		if err := commit(res.Lease); !errors.Is(err, run.ErrRevisionConflict) {
			t.Fatalf("second commit of revision %d: %v, want %v", cur.StateRevision+1, err, run.ErrRevisionConflict)
		}
		if err := r.e.Runs.ReleaseLease(ctx, "default", id2, res.Lease); err != nil {
			t.Fatal(err)
		}
		if got, err := w2.Drive(ctx, id2); err != nil || got.Status != run.StatusCompleted {
			t.Fatalf("after the takeover: %s %q %v", got.Status, got.StatusReason, err)
		}
		if rs := r.ledger(); len(rs) != 2 {
			t.Fatalf("ledger holds %d refunds, want one per order", len(rs))
		}
	})
}

// 5. An approval that expired while the run was down is not used after
// resume: the resume is refused by the approvals check and nothing is sent;
// a new approval for the same request lets the run finish.
func TestExpiredApprovalNotUsedAfterResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		id := r.crashAtPoint("order-0001", refund.PointBeforeRefund)
		st := r.state(id)
		if st.Run.NextStep != refund.StepRefund {
			t.Fatalf("stopped at %s, want %s", st.Run.NextStep, refund.StepRefund)
		}
		r.clock.Advance(2 * time.Hour) // past the approval's 1h TTL, while the run was down
		eng := r.engine("w2", workflow.Options{}, refund.Options{})
		_, err := eng.Drive(ctx, id)
		got, _ := r.e.Runs.Get(ctx, "default", id)
		if !errors.Is(err, resume.ErrRefused) || got.Status != run.StatusSuspended ||
			!strings.Contains(got.StatusReason, resume.CheckApprovals) || !strings.Contains(got.StatusReason, "expired") {
			t.Fatalf("resume with an expired approval: err %v, run %s %q", err, got.Status, got.StatusReason)
		}
		if rs := r.ledger(); len(rs) != 0 {
			t.Fatalf("refunded under an expired approval: %+v", rs)
		}
		if ops, _ := r.e.Ops.List(ctx, "default", id); len(ops) != 0 {
			t.Fatalf("an operation was prepared under an expired approval: %+v", ops)
		}
		if eng.Ready(ctx, got) {
			t.Fatal("ready before a new approval")
		}
		// A manager approves the same request again.
		digest, err := toolop.RequestDigest(refund.RefundRequest{OrderID: st.Order.OrderID, AmountCents: st.Decision.AmountCents, Currency: st.Order.Currency})
		if err != nil {
			t.Fatal(err)
		}
		a, _, err := r.ops.RequestApproval(ctx, "default", toolop.ApprovalRequest{RunID: id, StepID: refund.StepApprove, RequestDigest: digest, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ops.Decide(ctx, "default", a.ApprovalID, toolop.Decision{Approve: true, By: "manager", Reason: "checked again"}); err != nil {
			t.Fatal(err)
		}
		if got, _ = r.e.Runs.Get(ctx, "default", id); !eng.Ready(ctx, got) {
			t.Fatalf("not ready after a new approval: %q", got.StatusReason)
		}
		if got, err = eng.Drive(ctx, id); err != nil || got.Status != run.StatusCompleted {
			t.Fatalf("after a new approval: %s %q %v", got.Status, got.StatusReason, err)
		}
		if rs := r.ledger(); len(rs) != 1 || rs[0].AmountCents != st.Decision.AmountCents {
			t.Fatalf("ledger: %+v, want the one refund", rs)
		}
	})
}

// 5. An approval covers one request digest: when an operator corrects the
// amount after it was approved, the refund is not sent under the old
// approval; the run waits for an approval of the new request.
func TestChangedRequestDigestInvalidatesApproval(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		id := r.crashAtPoint("order-0001", refund.PointBeforeRefund)
		// The operator halves the refund, through a commit of its own.
		l, err := r.e.Runs.AcquireLease(ctx, "default", id, "operator", 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cur, _ := r.e.Runs.Get(ctx, "default", id)
		var top map[string]json.RawMessage
		if err := json.Unmarshal(cur.State, &top); err != nil {
			t.Fatal(err)
		}
		var d refund.Decision
		_ = json.Unmarshal(top["decision"], &d)
		approved := d.AmountCents
		d.AmountCents /= 2
		top["decision"], _ = json.Marshal(d)
		state, _ := json.Marshal(top)
		if _, _, err := r.e.Runs.Commit(ctx, "default", id, run.CommitRequest{ExpectedRevision: cur.StateRevision, Lease: l, State: state, NextStep: cur.NextStep,
			Event: run.EventInput{EventType: "operator.corrected", Payload: json.RawMessage(`{"field":"decision.amount_cents"}`)}}); err != nil {
			t.Fatal(err)
		}
		if err := r.e.Runs.ReleaseLease(ctx, "default", id, l); err != nil {
			t.Fatal(err)
		}
		eng := r.policyEngine("w2")
		got, err := eng.Drive(ctx, id)
		if err != nil || got.Status != run.StatusSuspended || !strings.Contains(got.StatusReason, "different request digest") {
			t.Fatalf("drive after the correction: %s %q %v; want suspended for a digest mismatch", got.Status, got.StatusReason, err)
		}
		if rs := r.ledger(); len(rs) != 0 {
			t.Fatalf("sent under an approval of another request (%d cents approved): %+v", approved, rs)
		}
		op, err := r.e.Ops.Get(ctx, "default", toolop.OperationID(id, refund.BusinessKey("order-0001")))
		if err != nil || op.Status != toolop.StatusPrepared || op.Attempts != 0 {
			t.Fatalf("operation %+v %v, want prepared and never sent", op, err)
		}
	})
}

// 7. Removing a detail from the dialog's summary (in the store, keeping its
// id, range and source digest) changes neither the run nor its events,
// operations, approvals or the payments ledger; compact.Verify and the run's
// check of the summary catch it, a rebuild from the messages restores it, and a
// decision made after the change does not rely on it.
func TestDroppedSummaryDetailChangesNoTruth(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		st := r.drive(r.policyEngine("w1"), "order-0001")
		if len(st.Dialog.Summaries) != 1 {
			t.Fatalf("dialog summaries: %+v", st.Dialog)
		}
		sid := st.Dialog.Summaries[0].SummaryID
		if cs, err := refund.VerifyDialog(ctx, r.e.Summaries, "default", st.Dialog); err != nil || !cs[0].OK {
			t.Fatalf("verify before: %+v %v", cs, err)
		}
		before := r.truth(st.Run.RunID)

		r.rewriteSummary(sid, dropDetails)
		r.sameTruth(before, "dropping details from the summary")
		// Coverage and source are intact; the content digest the summary was
		// sealed with, and the one the run kept of what it read, catch the rewrite.
		if v, err := r.e.Summaries.Verify(ctx, "default", sid); err != nil || v.OK || !strings.Contains(v.Reason, "content digest mismatch") {
			t.Fatalf("compact verify of the rewritten summary: %+v %v", v, err)
		}
		cs, err := refund.VerifyDialog(ctx, r.e.Summaries, "default", st.Dialog)
		if err != nil || cs[0].OK || !strings.Contains(cs[0].Reason, "content digest mismatch") {
			t.Fatalf("verify the rewritten summary: %+v %v", cs, err)
		}
		r.sameTruth(before, "verifying the rewritten summary")
		rebuilt, err := r.e.Summaries.Rebuild(ctx, "default", sid, "")
		if err != nil || len(rebuilt.Carried.Amounts) != 1 || rebuilt.Carried.Amounts[0].Value != "89.19" || rebuilt.Supersedes != sid {
			t.Fatalf("rebuild from the messages: %+v %v", rebuilt.Carried, err)
		}
		r.sameTruth(before, "rebuilding the summary")
		if n, err := r.e.Summaries.Forget(ctx, "default", st.Dialog.Owner()); err != nil || n != 2 {
			t.Fatalf("forget the summaries: %d %v", n, err)
		}
		r.sameTruth(before, "deleting the summaries")

		// The same change while a run is about to decide: the decision does
		// not use the lossy summary; it reads that part of the dialog raw
		// and decides as it would have with the intact one.
		id2 := refund.RunID("order-0003")
		var rewritten string
		eng := r.engine("w2", workflow.Options{Approver: refund.Policy(15000), Hooks: workflow.Hooks{At: func(ctx context.Context, at, id string) {
			if at == refund.PointBeforeDecide && id == id2 && rewritten == "" {
				cur := r.state(id2)
				rewritten = cur.Dialog.Summaries[0].SummaryID
				r.rewriteSummary(rewritten, dropDetails)
			}
		}}}, refund.Options{})
		st2 := r.drive(eng, "order-0003")
		dc := st2.Decision.Context
		o2, _ := refund.OrderFor("order-0003")
		if rewritten == "" || len(dc.Summaries) != 0 || !strings.Contains(dc.SummaryFallback, rewritten) || !strings.Contains(dc.SummaryFallback, "content digest mismatch") {
			t.Fatalf("decision context after the rewrite: %+v", dc)
		}
		if st2.Decision.Reason != st.Decision.Reason || dc.ClaimedAmount != refund.FormatCents(o2.AmountCents, o2.Currency) || st2.Decision.AmountCents != o2.AmountCents {
			t.Fatalf("decision with the rewritten summary: %+v; want the reason %q and the claimed amount", st2.Decision, st.Decision.Reason)
		}
		if rs := r.ledger(); len(rs) != 2 {
			t.Fatalf("ledger: %d refunds, want one per order", len(rs))
		}
	})
}

// 7. A tampered or gapped summary fails verification, and verifying it
// changes no source of truth: a dialog message changed behind the store's
// back fails the source digest; a summary superseded by a lossy version
// fails; a summary that leaves a gap after the chain fails.
func TestTamperedOrGappedSummaryFailsVerification(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		st := r.drive(r.policyEngine("w1"), "order-0001")
		ref := st.Dialog
		sum, err := r.e.Summaries.Get(ctx, "default", ref.Summaries[0].SummaryID)
		if err != nil {
			t.Fatal(err)
		}
		before := r.truth(st.Run.RunID)

		// A gap: a summary that starts two seqs after the chain's end.
		gapped := sum
		gapped.SummaryID, gapped.Previous, gapped.Version = "gapped-"+sum.SummaryID[:8], sum.SummaryID, 1
		gapped.Covers = compact.Range{FromSeq: sum.Covers.ToSeq + 2, ToSeq: ref.RawTo}
		items, err := r.e.Summaries.Items(ctx, "default", ref.Owner(), gapped.Covers.FromSeq, gapped.Covers.ToSeq)
		if err != nil {
			t.Fatal(err)
		}
		if gapped.SourceDigest, err = compact.SourceDigest(items); err != nil {
			t.Fatal(err)
		}
		if err := r.e.Summaries.Store().Put(ctx, gapped); err != nil {
			t.Fatal(err)
		}
		if v, err := r.e.Summaries.Verify(ctx, "default", gapped.SummaryID); err != nil || v.OK || !strings.Contains(v.Reason, "gap") {
			t.Fatalf("gapped summary: %+v %v", v, err)
		}
		r.sameTruth(before, "verifying a gapped summary")

		// A lossy version put in its place, as a careless rewrite would.
		lossy := sum
		lossy.SummaryID, lossy.Version, lossy.Supersedes = "lossy-"+sum.SummaryID[:8], 2, sum.SummaryID
		dropDetails(&lossy)
		if err := r.e.Summaries.Store().Put(ctx, lossy); err != nil {
			t.Fatal(err)
		}
		cs, err := refund.VerifyDialog(ctx, r.e.Summaries, "default", ref)
		if err != nil || cs[0].OK || cs[0].Reason == "" {
			t.Fatalf("the run's summary after a lossy version replaced it: %+v %v", cs, err)
		}
		if got, _ := r.e.Summaries.Get(ctx, "default", sum.SummaryID); got.Status != compact.StatusSuperseded {
			t.Fatalf("the replaced summary is %s", got.Status)
		}
		r.sameTruth(before, "replacing the summary by a lossy version")

		// A dialog message changed behind the store's back: the source
		// digest of every summary over it no longer matches.
		if n := r.exec(`UPDATE session_messages SET content = ? WHERE tenant_id = ? AND session_id = ? AND seq = ?`,
			"I paid 8.19 EUR for it.", "default", ref.SessionID, 5); n != 1 {
			t.Fatalf("tamper: %d rows", n)
		}
		v, err := r.e.Summaries.Verify(ctx, "default", lossy.SummaryID)
		if err != nil || v.OK || !strings.Contains(v.Reason, "digest") || v.Checked.DigestMatches == nil || *v.Checked.DigestMatches {
			t.Fatalf("summary over a tampered message: %+v %v", v, err)
		}
		if chain, err := r.e.Summaries.Usable(ctx, "default", ref.Owner()); err != nil || len(chain) != 0 {
			t.Fatalf("usable chain over a tampered message: %d %v", len(chain), err)
		}
		r.sameTruth(before, "verifying summaries over a tampered message")
	})
}

// The long dialog is read through a summary of its older part and its
// recent messages raw; the summary carries the amount and the negations as
// structure, verifies, and costs the decision fewer tokens than the dialog.
func TestDialogSummaryFeedsDecision(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		st := r.drive(r.policyEngine("w1"), "order-0001")
		ref := st.Dialog
		first, last, err := r.e.Summaries.Bounds(ctx, "default", ref.Owner())
		if err != nil {
			t.Fatal(err)
		}
		if len(ref.Summaries) != 1 || ref.Summaries[0].Covers.FromSeq != first || ref.RawFrom != ref.Summaries[0].Covers.ToSeq+1 || ref.RawTo != last {
			t.Fatalf("dialog %d..%d read as %+v", first, last, ref)
		}
		cs, err := refund.VerifyDialog(ctx, r.e.Summaries, "default", ref)
		if err != nil || len(cs) != 1 || !cs[0].OK {
			t.Fatalf("verify: %+v %v", cs, err)
		}
		sum, _ := r.e.Summaries.Get(ctx, "default", ref.Summaries[0].SummaryID)
		if len(sum.Carried.Amounts) != 1 || sum.Carried.Amounts[0].Value != "89.19" || sum.Carried.Amounts[0].Currency != "EUR" || len(sum.Carried.Negations) == 0 {
			t.Fatalf("summary carries %+v", sum.Carried)
		}
		d := st.Decision
		if d.Context == nil || len(d.Context.Summaries) != 1 || d.Context.Summaries[0] != sum.SummaryID || d.Context.SummaryFallback != "" ||
			d.Context.RawFrom != ref.RawFrom || d.Context.RawTo != ref.RawTo {
			t.Fatalf("decision context: %+v", d.Context)
		}
		// "never arrived" is in the summarised part, "no store credit" in the recent one.
		if d.Reason != "parcel reported lost; the customer declines store credit" || d.Context.ClaimedAmount != "89.19 EUR" || !sum.Covers.Contains(d.Context.ClaimedSeqs[0]) {
			t.Fatalf("decision: %+v %+v", d, d.Context)
		}
		items, err := r.e.Summaries.Items(ctx, "default", ref.Owner(), first, last)
		if err != nil {
			t.Fatal(err)
		}
		raw := 0
		for _, x := range compact.CountItems(refund.DialogModel, items) {
			raw += x.Tokens
		}
		if d.Context.Tokens >= raw {
			t.Fatalf("the decision read %d tokens, the raw dialog is %d", d.Context.Tokens, raw)
		}
		t.Logf("dialog of %d messages (%d tokens raw): summary of %s (%d tokens) + messages %d..%d raw; the decision read %d tokens (policy included)",
			len(items), raw, sum.Covers, sum.Tokens, ref.RawFrom, ref.RawTo, d.Context.Tokens)

		// read_dialog redone after a crash that followed its compaction: the
		// summary made before is the one used, and no second one is made.
		eng := r.policyEngine("w2")
		o4, _ := refund.OrderFor("order-0004")
		if err := refund.OpenDialog(ctx, r.e.Sessions, "default", o4); err != nil {
			t.Fatal(err)
		}
		owner4 := compact.SessionOwner(refund.DialogSession(o4.OrderID), o4.Customer)
		ref4, err := refund.CompactDialog(ctx, r.e.Summaries, "default", owner4.ID, owner4.UserID)
		if err != nil || len(ref4.Summaries) != 1 {
			t.Fatalf("the crashed attempt's compaction: %+v %v", ref4, err)
		}
		pre := ref4.Summaries[0]
		st4 := r.drive(eng, o4.OrderID)
		all, _, err := r.e.Summaries.List(ctx, "default", owner4, "", 100)
		if err != nil || len(all) != 1 || len(st4.Dialog.Summaries) != 1 || st4.Dialog.Summaries[0].SummaryID != pre.SummaryID ||
			len(st4.Decision.Context.Summaries) != 1 || st4.Decision.Context.Summaries[0] != pre.SummaryID {
			t.Fatalf("redone read_dialog: %d summaries (%v), dialog %+v, decision %+v", len(all), err, st4.Dialog, st4.Decision.Context)
		}

		// Session memory expires; a run whose dialog is gone still decides, from the order.
		o3, _ := refund.OrderFor("order-0003")
		if err := refund.OpenDialog(ctx, r.e.Sessions, "default", o3); err != nil {
			t.Fatal(err)
		}
		if _, err := r.e.Sessions.Close(ctx, "default", refund.DialogSession(o3.OrderID), o3.Customer); err != nil {
			t.Fatal(err)
		}
		id3 := refund.RunID(o3.OrderID)
		if _, _, err := eng.Start(ctx, refund.WorkflowName, id3, refund.Input{OrderID: o3.OrderID}); err != nil {
			t.Fatal(err)
		}
		if got, err := eng.Drive(ctx, id3); err != nil || got.Status != run.StatusCompleted {
			t.Fatalf("run without its dialog: %s %q %v", got.Status, got.StatusReason, err)
		}
		if st3 := r.state(id3); len(st3.Dialog.Summaries) != 0 || !strings.Contains(st3.Dialog.Plan, "no dialog") ||
			st3.Decision.Reason != "customer request" || st3.Outcome != refund.OutcomeRefunded {
			t.Fatalf("run without its dialog: %+v %+v", st3.Dialog, st3.Decision)
		}
	})
}

// One confirmed preference of the customer is kept long term with its
// provenance (the messages that stated and confirmed it, the run and the
// event that recorded it), and a later refund of the same customer reads
// it back from memory.
func TestConfirmedPreferenceKeptWithProvenance(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		eng := r.policyEngine("w1")
		st := r.drive(eng, "order-0001")
		if st.Candidate == nil || st.Remembered == nil || st.Remembered.Outcome != memory.OutcomeAdded || st.Decision.RefundToSource != refund.SourceDialog {
			t.Fatalf("first refund: candidate %+v remembered %+v decision %+v", st.Candidate, st.Remembered, st.Decision)
		}
		if st.Preference != nil {
			t.Fatalf("a preference was recalled before any was kept: %+v", st.Preference)
		}
		claim, err := r.e.Memory.Get(ctx, "default", st.Remembered.MemoryID)
		if err != nil {
			t.Fatal(err)
		}
		p := claim.Provenance
		wantIDs := []string{strconv.FormatInt(st.Candidate.Seqs[0], 10), strconv.FormatInt(st.Candidate.Seqs[1], 10)}
		if claim.SubjectID != st.Order.Customer || claim.Key != refund.PreferenceKey || string(claim.Value) != `"`+refund.MethodOriginal+`"` || claim.Status != memory.StatusCurrent ||
			p.SourceType != memory.SourceMessage || p.SourceID != st.Dialog.SessionID || p.RunID != st.Run.RunID ||
			p.ValidatedBy != memory.ValidatedUserConfirmed || strings.Join(p.MessageIDs, ",") != strings.Join(wantIDs, ",") {
			t.Fatalf("claim %+v", claim)
		}
		// The provenance points at real things: the messages say it, and the
		// event is the read_dialog commit whose state recorded the candidate.
		msgs, err := r.e.Sessions.Messages(ctx, "default", st.Dialog.SessionID, st.Order.Customer, session.MessageQuery{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		bySeq := map[int64]string{}
		for _, m := range msgs {
			bySeq[m.Seq] = m.Content
		}
		if !strings.Contains(bySeq[st.Candidate.Seqs[0]], "original payment method") || !strings.Contains(bySeq[st.Candidate.Seqs[1]], "remember") {
			t.Fatalf("messages %v: %q / %q", st.Candidate.Seqs, bySeq[st.Candidate.Seqs[0]], bySeq[st.Candidate.Seqs[1]])
		}
		ev, err := r.e.Runs.Store().GetEvent(ctx, "default", st.Run.RunID, p.EventSeq)
		if err != nil || ev.StepID != refund.StepReadDialog || !strings.Contains(string(ev.State), `"preference_candidate"`) {
			t.Fatalf("event %d: %s %v", p.EventSeq, ev.StepID, err)
		}

		// order-0195 is a later order of cust-1 (order-0098 is over the approval limit); its dialog says nothing of the method.
		st2 := r.drive(eng, "order-0195")
		if st2.Order.Customer != st.Order.Customer || st2.Candidate != nil || st2.Remembered != nil {
			t.Fatalf("second refund: customer %s, candidate %+v, remembered %+v", st2.Order.Customer, st2.Candidate, st2.Remembered)
		}
		if st2.Preference == nil || st2.Preference.MemoryID != claim.MemoryID || st2.Preference.Provenance.RunID != st.Run.RunID ||
			st2.Decision.RefundTo != refund.MethodOriginal || st2.Decision.RefundToSource != refund.SourceMemory || st2.Decision.Context.MemoryID != claim.MemoryID {
			t.Fatalf("second refund: preference %+v, decision %+v", st2.Preference, st2.Decision)
		}
		h, err := r.e.Memory.History(ctx, "default", claim.MemoryID)
		if err != nil || len(h) != 1 || h[0].MemoryID != claim.MemoryID || h[0].Provenance.EventSeq != p.EventSeq || h[0].Provenance.ValidatedBy != memory.ValidatedUserConfirmed {
			t.Fatalf("history: %+v %v", h, err)
		}

		// A customer who had the preference forgotten: replaying the dialog
		// that stated it cannot bring it back (the tombstone refuses it),
		// and the refund goes on without keeping it.
		o3, _ := refund.OrderFor("order-0003")
		if _, err := r.e.Memory.Add(ctx, "default", memory.AddInput{SubjectID: o3.Customer, Namespace: refund.PreferenceNamespace, Key: refund.PreferenceKey,
			Value: json.RawMessage(`"` + refund.MethodOriginal + `"`), Provenance: memory.Provenance{SourceType: memory.SourceOperator, SourceID: "desk", ValidatedBy: memory.ValidatedOperator}}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.e.Memory.Forget(ctx, "default", o3.Customer, "", "the customer asked"); err != nil {
			t.Fatal(err)
		}
		st3 := r.drive(eng, o3.OrderID)
		if st3.Candidate == nil || st3.Remembered == nil || st3.Remembered.Outcome != memory.OutcomeRefused || st3.Remembered.MemoryID != "" || st3.Preference != nil {
			t.Fatalf("forgotten customer: candidate %+v remembered %+v preference %+v", st3.Candidate, st3.Remembered, st3.Preference)
		}
		if cs, _, err := r.e.Memory.List(ctx, "default", memory.Query{SubjectID: o3.Customer}); err != nil || len(cs) != 0 {
			t.Fatalf("forgotten customer's memory: %+v %v", cs, err)
		}
	})
}

// The refund policy is retrieved as the agent, under the document's ACL,
// with its provenance in the run; a customer gets no hit; a new version is
// what the next run retrieves, while the earlier snapshot still answers
// with the text the earlier run read; an agent that loses access suspends
// the run instead of deciding without the policy.
func TestPolicyRetrievedWithProvenanceAndACL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := newRig(t, b)
		ctx := t.Context()
		eng := r.policyEngine("w1")
		st := r.drive(eng, "order-0001")
		p := st.Policy
		if p.DocumentID != refund.PolicyDocumentID || p.SourceVersion != "v1" || p.SourceURI != refund.PolicySourceURI ||
			p.ChunkID != retrieval.ChunkID(refund.PolicyDocumentID, 1, 0) || p.SnapshotID == "" || st.Decision.Context.Policy != p {
			t.Fatalf("policy provenance: %+v (decision %+v)", p, st.Decision.Context.Policy)
		}
		snap1, err := r.e.Retrieval.Snapshot(ctx, "default", p.SnapshotID)
		if err != nil || snap1.Principal != refund.AgentPrincipal || len(snap1.Hits) == 0 || snap1.Hits[0].ChunkID != p.ChunkID ||
			retrieval.Digest(snap1.Hits[0].Text) != p.ContentDigest || !strings.Contains(snap1.Hits[0].Text, "refunded in full") {
			t.Fatalf("snapshot %+v %v", snap1, err)
		}
		// The customer may not read the policy.
		cust, err := r.e.Retrieval.Retrieve(ctx, "default", retrieval.RetrieveRequest{Query: refund.PolicyQuery, Principal: "user:" + st.Order.Customer})
		if err != nil || len(cust.Hits) != 0 {
			t.Fatalf("the customer retrieved %+v %v", cust.Hits, err)
		}

		const v2 = "Refund policy, second edition. A parcel reported lost is refunded in full to the original payment method within 30 days."
		if _, err := refund.PutPolicy(ctx, r.e.Retrieval, "default", "v2", v2); err != nil {
			t.Fatal(err)
		}
		st2 := r.drive(eng, "order-0003")
		if p2 := st2.Policy; p2.SourceVersion != "v2" || p2.ChunkID != retrieval.ChunkID(refund.PolicyDocumentID, 2, 0) || p2.ContentDigest == p.ContentDigest {
			t.Fatalf("policy after v2: %+v", p2)
		}
		again, err := r.e.Retrieval.Snapshot(ctx, "default", p.SnapshotID)
		if err != nil || again.Hits[0].Text != snap1.Hits[0].Text || again.Hits[0].SourceVersion != "v1" || again.Hits[0].ContentDigest != p.ContentDigest {
			t.Fatalf("the first run's snapshot after v2: %+v %v", again.Hits, err)
		}

		// Without access the workflow does not decide.
		if _, err := r.e.Retrieval.SetMember(ctx, "default", refund.SupportGroup, refund.AgentPrincipal, false); err != nil {
			t.Fatal(err)
		}
		id3 := r.start(eng, "order-0004")
		got, err := eng.Drive(ctx, id3)
		if err != nil || got.Status != run.StatusSuspended || got.NextStep != refund.StepPolicy || !strings.Contains(got.StatusReason, "no refund policy readable by "+refund.AgentPrincipal) {
			t.Fatalf("without access: %s at %s %q %v", got.Status, got.NextStep, got.StatusReason, err)
		}
		if rs := r.ledger(); len(rs) != 2 {
			t.Fatalf("ledger: %d refunds, want 2", len(rs))
		}
	})
}
