package faultstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/faultstore"
	"github.com/mementohq/memento/store/memstore"
	"github.com/mementohq/memento/storetest"
	"github.com/mementohq/memento/toolop"
)

// With no rule the wrappers are the inner store: they pass its suites.
func TestTransparentWithoutRules(t *testing.T) {
	open := func(t *testing.T) faultstore.All { return faultstore.New(1).All(memstore.New()) }
	t.Run("runs", func(t *testing.T) {
		storetest.RunStoreSuite(t, func(t *testing.T) run.Store { return open(t) })
	})
	t.Run("ops", func(t *testing.T) {
		storetest.ToolopStoreSuite(t, func(t *testing.T) toolop.Store { return open(t) })
	})
	t.Run("sessions", func(t *testing.T) {
		storetest.SessionStoreSuite(t, func(t *testing.T) session.Store { return open(t) })
	})
	t.Run("recovery", func(t *testing.T) {
		storetest.RecoverySuite(t, func(t *testing.T) (run.Store, toolop.Store) {
			s := open(t)
			return s, s
		})
	})
	t.Run("vault", func(t *testing.T) {
		storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store { return open(t) })
	})
}

// leased makes a run and leases it, through the wrapper.
func leased(t *testing.T, s run.Store) (run.Run, run.Lease) {
	t.Helper()
	ctx := t.Context()
	r, _, err := s.CreateRun(ctx, run.NewRun{Run: run.Run{TenantID: "t", RunID: "r", WorkflowName: "wf"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "t", "r", "w", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return r, l
}

func commit(s run.Store, ctx context.Context, rev int64, l run.Lease) (run.Run, error) {
	r, _, err := s.Commit(ctx, "t", "r", run.StoreCommit{ExpectedRevision: rev, Owner: l.Owner, Epoch: l.Epoch,
		Event: run.EventInput{EventType: "step"}, State: json.RawMessage(`{"n":1}`), FromStatuses: []run.Status{run.StatusRunning}})
	return r, err
}

func TestFailAppliesNothing(t *testing.T) {
	mem := memstore.New()
	in := faultstore.New(1, faultstore.Rule{Method: "Commit", Action: faultstore.Fail, Times: 1})
	s := in.Runs(mem)
	r, l := leased(t, s)
	got, err := commit(s, t.Context(), r.StateRevision, l)
	if !errors.Is(err, faultstore.ErrInjected) || got.RunID != "" {
		t.Fatalf("first commit: %+v %v, want the injected error and no run", got, err)
	}
	if cur, _ := mem.GetRun(t.Context(), "t", "r"); cur.StateRevision != 1 {
		t.Fatalf("a failed-before commit was applied: revision %d", cur.StateRevision)
	}
	if _, err := commit(s, t.Context(), r.StateRevision, l); err != nil {
		t.Fatalf("second commit (rule spent): %v", err)
	}
	if in.Fired("Commit") != 1 || in.Calls("Commit") != 2 || in.Applied("Commit") != 0 {
		t.Fatalf("fired %d calls %d applied %d", in.Fired("Commit"), in.Calls("Commit"), in.Applied("Commit"))
	}
}

func TestLoseAppliesAndHidesTheAnswer(t *testing.T) {
	mem := memstore.New()
	cause := errors.New("connection reset by peer")
	in := faultstore.New(1, faultstore.Rule{Method: "Commit", Action: faultstore.Lose, Err: cause})
	s := in.Runs(mem)
	r, l := leased(t, s)
	got, err := commit(s, t.Context(), r.StateRevision, l)
	if !errors.Is(err, faultstore.ErrInjected) || !errors.Is(err, cause) || got.RunID != "" {
		t.Fatalf("commit: %+v %v, want the injected error wrapping the cause", got, err)
	}
	if cur, _ := mem.GetRun(t.Context(), "t", "r"); cur.StateRevision != 2 || string(cur.State) != `{"n":1}` {
		t.Fatalf("a lost-answer commit was not applied: %+v", cur)
	}
	// A retry of the same commit is refused by the store: it already happened.
	if _, err := commit(in.Runs(mem), t.Context(), r.StateRevision, l); !errors.Is(err, faultstore.ErrInjected) || in.Applied("Commit") != 1 {
		t.Fatalf("retry: %v, applied %d", err, in.Applied("Commit"))
	}
	if _, err := commit(mem, t.Context(), r.StateRevision, l); !errors.Is(err, run.ErrRevisionConflict) {
		t.Fatalf("retry underneath: %v, want a revision conflict", err)
	}
}

func TestNthAndPredicate(t *testing.T) {
	in := faultstore.New(1, faultstore.Rule{Method: "GetRun", Nth: 3, Action: faultstore.Fail,
		If: func(c faultstore.Call) bool { return c.Args[1] == "r" }})
	s := in.Runs(memstore.New())
	leased(t, s)
	var failed []int
	for i := 1; i <= 5; i++ {
		if _, err := s.GetRun(t.Context(), "t", "other"); errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("call %d on another run fired", i)
		}
		if _, err := s.GetRun(t.Context(), "t", "r"); errors.Is(err, faultstore.ErrInjected) {
			failed = append(failed, i)
		}
	}
	if len(failed) != 1 || failed[0] != 3 {
		t.Fatalf("failed on calls %v, want only the 3rd matching one", failed)
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	pattern := func(seed uint64) []bool {
		in := faultstore.New(seed, faultstore.Rule{Method: "GetRun", Probability: 0.3, Action: faultstore.Fail})
		s := in.Runs(memstore.New())
		var out []bool
		for range 200 {
			_, err := s.GetRun(t.Context(), "t", "r")
			out = append(out, errors.Is(err, faultstore.ErrInjected))
		}
		return out
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	n, same := 0, true
	for i := range a {
		if a[i] {
			n++
		}
		same = same && a[i] == c[i]
	}
	if n < 30 || n > 90 {
		t.Fatalf("%d of 200 calls failed at p=0.3", n)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("one seed, two patterns: call %d", i)
		}
	}
	if same {
		t.Fatal("two seeds drew the same 200 outcomes")
	}
}

func TestDelayEndsWithTheContext(t *testing.T) {
	mem := memstore.New()
	in := faultstore.New(1, faultstore.Rule{Method: "Commit", Action: faultstore.Delay, Delay: time.Hour})
	s := in.Runs(mem)
	r, l := leased(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := commit(s, ctx, r.StateRevision, l); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delayed commit: %v, want the context's deadline", err)
	}
	if cur, _ := mem.GetRun(t.Context(), "t", "r"); cur.StateRevision != 1 {
		t.Fatalf("a commit whose context ended during the delay was applied: revision %d", cur.StateRevision)
	}
	in2 := faultstore.New(1, faultstore.Rule{Method: "Commit", Action: faultstore.Delay, Delay: time.Millisecond})
	if _, err := commit(in2.Runs(mem), t.Context(), r.StateRevision, l); err != nil {
		t.Fatalf("briefly delayed commit: %v", err)
	}
}
