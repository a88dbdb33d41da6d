package toolop_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento/toolop"
)

func TestTransitions(t *testing.T) {
	allowed := map[[2]toolop.Status]bool{
		{toolop.StatusPrepared, toolop.StatusStarted}:  true,
		{toolop.StatusStarted, toolop.StatusSucceeded}: true,
		{toolop.StatusStarted, toolop.StatusFailed}:    true,
		{toolop.StatusStarted, toolop.StatusUnknown}:   true,
		{toolop.StatusStarted, toolop.StatusPrepared}:  true,
		{toolop.StatusUnknown, toolop.StatusSucceeded}: true,
		{toolop.StatusUnknown, toolop.StatusFailed}:    true,
		{toolop.StatusUnknown, toolop.StatusPrepared}:  true,
	}
	all := []toolop.Status{toolop.StatusPrepared, toolop.StatusStarted, toolop.StatusSucceeded, toolop.StatusFailed, toolop.StatusUnknown}
	for _, from := range all {
		for _, to := range all {
			if got := toolop.CanTransition(from, to); got != allowed[[2]toolop.Status{from, to}] {
				t.Errorf("%s -> %s: %v", from, to, got)
			}
		}
	}
	// A prepared operation was never sent, so it cannot be in doubt.
	if toolop.CanTransition(toolop.StatusPrepared, toolop.StatusUnknown) {
		t.Fatal("prepared -> unknown")
	}
}

func TestRequestDigestCanonical(t *testing.T) {
	a, _ := toolop.RequestDigest(json.RawMessage(`{"b":1,"a":[1,2]}`))
	b, _ := toolop.RequestDigest(map[string]any{"a": []int{1, 2}, "b": 1})
	c, _ := toolop.RequestDigest(map[string]any{"a": []int{2, 1}, "b": 1})
	if a != b || a == c {
		t.Fatalf("digests: %s %s %s", a, b, c)
	}
	if toolop.ApprovalID("r", "s", a, 0) == toolop.ApprovalID("r", "s", a, 1) || toolop.ApprovalID("r", "s", a, 0) != toolop.ApprovalID("r", "s", a, 0) {
		t.Fatal("approval ids are not stable per generation")
	}
}

func TestControlRoundTrip(t *testing.T) {
	c, found, err := toolop.ReadControl(json.RawMessage(`{"x":1}`))
	if err != nil || found || c.Budget != (toolop.Budget{}) {
		t.Fatalf("no control: %+v %v %v", c, found, err)
	}
	c.Budget.MaxSteps = 3
	c.SetGuard(toolop.ApprovalGuard{StepID: "approve", RequestDigest: "d1"})
	c.SetGuard(toolop.ApprovalGuard{StepID: "approve", RequestDigest: "d2"})
	st, err := toolop.WriteControl(json.RawMessage(`{"x":1}`), c)
	if err != nil {
		t.Fatal(err)
	}
	back, found, err := toolop.ReadControl(st)
	if err != nil || !found || back.Budget.MaxSteps != 3 || len(back.Approvals) != 1 || back.Approvals[0].RequestDigest != "d2" {
		t.Fatalf("round trip: %+v %v %v (%s)", back, found, err, st)
	}
	var top map[string]any
	_ = json.Unmarshal(st, &top)
	if top["x"] != float64(1) {
		t.Fatalf("user state lost: %s", st)
	}
	if _, _, err := toolop.ReadControl(json.RawMessage(`{"_memento":"nope"}`)); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("bad control: %v", err)
	}
}

func TestBudget(t *testing.T) {
	b := toolop.Budget{MaxSteps: 5, MaxTokens: 100, MaxCostMicros: 1000, MaxWallMS: 50}
	if ex := b.Exhausted(toolop.Spend{Steps: 4, Tokens: 99, CostMicros: 999, WallMS: 49}); ex != "" {
		t.Fatalf("exhausted early: %s", ex)
	}
	for s, want := range map[toolop.Spend]string{
		{Steps: 5}:        "steps 5 of 5",
		{Tokens: 100}:     "tokens 100 of 100",
		{CostMicros: 1e3}: "cost 1000 of 1000 micros",
		{WallMS: 60}:      "wall time 60 of 50 ms",
	} {
		if got := b.Exhausted(s); got != want {
			t.Errorf("%+v: %q, want %q", s, got, want)
		}
	}
	if r := (toolop.Budget{MaxTokens: 10}).Remaining(toolop.Spend{Tokens: 4}); r.Tokens != 6 || r.Steps != -1 {
		t.Fatalf("remaining %+v", r)
	}
}

func TestApprovalCheck(t *testing.T) {
	now := time.Now()
	a := toolop.Approval{ApprovalID: "a", RequestDigest: "d", Status: toolop.ApprovalApproved, ExpiresAt: now.Add(time.Minute)}
	if err := a.Check("d", now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mut  func(*toolop.Approval) string
		want error
	}{
		{func(a *toolop.Approval) string { return "other" }, toolop.ErrApprovalDigestMismatch},
		{func(a *toolop.Approval) string { a.ExpiresAt = now; return "d" }, toolop.ErrApprovalExpired},
		{func(a *toolop.Approval) string { a.Status = toolop.ApprovalRejected; return "d" }, toolop.ErrApprovalRejected},
		{func(a *toolop.Approval) string { a.Status = toolop.ApprovalPending; return "d" }, toolop.ErrApprovalPending},
	} {
		c := a
		d := tc.mut(&c)
		if err := c.Check(d, now); !errors.Is(err, tc.want) {
			t.Errorf("check: %v, want %v", err, tc.want)
		}
	}
}
