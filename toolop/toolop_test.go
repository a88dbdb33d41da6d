package toolop_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/store/memstore"
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

// TestIdempotencyKey: an operation is sent under a key of its tenant and id
// (two tenants' order-42 runs do not share one); one prepared before keys
// were stored keeps its id as its key, so it is reconciled as it was sent.
func TestIdempotencyKey(t *testing.T) {
	id := toolop.OperationID("order-42", "refund")
	a, b := toolop.SendKey("shop-a", id), toolop.SendKey("shop-b", id)
	if a == b || a == id {
		t.Fatalf("keys %s and %s for operation %s", a, b, id)
	}
	if got := (toolop.Operation{OperationID: id, Key: a}).IdempotencyKey(); got != a {
		t.Fatalf("stored key: %s", got)
	}
	if got := (toolop.Operation{OperationID: id}).IdempotencyKey(); got != id {
		t.Fatalf("an operation without a stored key: %s, want its id", got)
	}
}

// TestInvalidIDsWordedOnce: a bad id is ErrInvalidInput, and its detail
// says so once ("invalid input: step_id is required").
func TestInvalidIDsWordedOnce(t *testing.T) {
	svc := toolop.NewService(memstore.New(), nil)
	ctx := t.Context()
	_, _, err1 := svc.Prepare(ctx, "t1", toolop.PrepareRequest{OperationID: "o", RunID: "r", ToolName: "t", RequestDigest: "d"})
	_, _, err2 := svc.RequestApproval(ctx, "t1", toolop.ApprovalRequest{RunID: "r", RequestDigest: "d", TTL: time.Minute})
	for _, err := range []error{err1, err2} {
		if !errors.Is(err, toolop.ErrInvalidInput) || strings.Count(err.Error(), "invalid input") != 1 || !strings.Contains(err.Error(), "step_id is required") {
			t.Errorf("empty step_id: %v", err)
		}
	}
}
