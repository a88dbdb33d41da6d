package resume_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/workflow/control"
)

func isEvent(eventType string) func(faultstore.Call) bool {
	return func(c faultstore.Call) bool { return c.Args[2].(run.StoreCommit).Event.EventType == eventType }
}

// The resume.verified commit is applied but its answer is lost: the resume
// fails, and the next one settles by re-reading the run: it continues from
// the revision the lost commit made, under a lease that can commit.
func TestResumeAfterLostVerificationCommit(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "Commit", If: isEvent(resume.EventVerified), Action: faultstore.Lose, Times: 1})
	f := setupFaults(t, in)
	ctx := context.Background()
	r := f.newRun(t, "lost", control.Record{})
	if _, err := f.resume("lost"); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("first resume: %v, want the lost answer", err)
	}
	if in.Applied("Commit") != 1 {
		t.Fatalf("the verification commit was not applied underneath (applied %d)", in.Applied("Commit"))
	}
	cur, _ := f.runs.Get(ctx, "t1", "lost")
	if cur.StateRevision != r.StateRevision+1 || cur.LeaseOwner != "" || cur.Status != run.StatusRunning {
		t.Fatalf("after the lost commit: revision %d (was %d), lease %q, %s; want one more event, the lease given back", cur.StateRevision, r.StateRevision, cur.LeaseOwner, cur.Status)
	}
	res, err := f.resume("lost")
	if err != nil {
		t.Fatalf("second resume: %v (checks %+v)", err, res.Checks)
	}
	if res.Run.StateRevision != cur.StateRevision+1 {
		t.Fatalf("second resume continued from revision %d, want %d", res.Run.StateRevision, cur.StateRevision+1)
	}
	evs, err := f.runs.Events(ctx, "t1", "lost", 0, run.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	verified := 0
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		if ev.EventType == resume.EventVerified {
			verified++
		}
	}
	if verified != 2 || int64(len(evs)) != res.Run.StateRevision {
		t.Fatalf("%d events, %d verified, revision %d", len(evs), verified, res.Run.StateRevision)
	}
	// The result is settled: its revision and lease commit.
	if _, _, err := f.runs.Commit(ctx, "t1", "lost", run.CommitRequest{ExpectedRevision: res.Run.StateRevision, Lease: res.Lease,
		State: res.Run.State, NextStep: res.Run.NextStep, Event: run.EventInput{EventType: "step.completed", StepID: "s2"}}); err != nil {
		t.Fatalf("commit after the settled resume: %v", err)
	}
}

// The lease is taken but the answer lost: the resume fails having changed
// only the lease. The same owner's retry gets the same lease back (same
// epoch), while another owner is kept out until it expires.
func TestResumeAfterLostLeaseTake(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "AcquireLease", Action: faultstore.Lose, Times: 1,
		If: func(c faultstore.Call) bool { return c.Args[2] == "w1" }})
	f := setupFaults(t, in)
	ctx := context.Background()
	r := f.newRun(t, "lease", control.Record{})
	res, err := f.resume("lease")
	if !errors.Is(err, faultstore.ErrInjected) || !res.Refused || res.FailedCheck != resume.CheckLease {
		t.Fatalf("first resume: %v %+v, want the lease check to fail on the lost answer", err, res)
	}
	cur, _ := f.runs.Get(ctx, "t1", "lease")
	if cur.LeaseOwner != "w1" || cur.StateRevision != r.StateRevision || cur.Status != run.StatusRunning {
		t.Fatalf("after the lost lease take: %+v; want w1's lease and nothing else changed", cur)
	}
	if _, err := f.v.Resume(ctx, resume.Request{TenantID: "t1", RunID: "lease", Owner: "w2", LeaseTTL: time.Minute}); !errors.Is(err, run.ErrLeaseHeld) {
		t.Fatalf("another owner during the lost lease: %v, want ErrLeaseHeld", err)
	}
	res, err = f.resume("lease")
	if err != nil || res.Lease.Epoch != cur.LeaseEpoch || res.Run.StateRevision != r.StateRevision+1 {
		t.Fatalf("retry: %v lease %+v revision %d; want epoch %d at revision %d", err, res.Lease, res.Run.StateRevision, cur.LeaseEpoch, r.StateRevision+1)
	}
}
