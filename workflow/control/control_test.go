package control_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow/control"
)

func TestControlRoundTrip(t *testing.T) {
	c, found, err := control.Read(json.RawMessage(`{"x":1}`))
	if err != nil || found || c.Budget != (control.Budget{}) {
		t.Fatalf("no control: %+v %v %v", c, found, err)
	}
	c.Budget.MaxSteps = 3
	c.SetGuard(control.ApprovalGuard{StepID: "approve", RequestDigest: "d1"})
	c.SetGuard(control.ApprovalGuard{StepID: "approve", RequestDigest: "d2"})
	st, err := control.Write(json.RawMessage(`{"x":1}`), c)
	if err != nil {
		t.Fatal(err)
	}
	back, found, err := control.Read(st)
	if err != nil || !found || back.Budget.MaxSteps != 3 || len(back.Approvals) != 1 || back.Approvals[0].RequestDigest != "d2" {
		t.Fatalf("round trip: %+v %v %v (%s)", back, found, err, st)
	}
	var top map[string]any
	_ = json.Unmarshal(st, &top)
	if top["x"] != float64(1) {
		t.Fatalf("user state lost: %s", st)
	}
	if _, _, err := control.Read(json.RawMessage(`{"_memento":"nope"}`)); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("bad control: %v", err)
	}
}

func TestBudget(t *testing.T) {
	b := control.Budget{MaxSteps: 5, MaxTokens: 100, MaxCostMicros: 1000, MaxWallMS: 50}
	if ex := b.Exhausted(control.Spend{Steps: 4, Tokens: 99, CostMicros: 999, WallMS: 49}); ex != "" {
		t.Fatalf("exhausted early: %s", ex)
	}
	for s, want := range map[control.Spend]string{
		{Steps: 5}:        "steps 5 of 5",
		{Tokens: 100}:     "tokens 100 of 100",
		{CostMicros: 1e3}: "cost 1000 of 1000 micros",
		{WallMS: 60}:      "wall time 60 of 50 ms",
	} {
		if got := b.Exhausted(s); got != want {
			t.Errorf("%+v: %q, want %q", s, got, want)
		}
	}
	if r := (control.Budget{MaxTokens: 10}).Remaining(control.Spend{Tokens: 4}); r.Tokens != 6 || r.Steps != -1 {
		t.Fatalf("remaining %+v", r)
	}
}

// ReadSplit and WriteTop, the one-parse path of a step, give what Read and
// Write give.
func TestSplitMatchesReadWrite(t *testing.T) {
	state := json.RawMessage(`{"b": [1, 2], "a": {"x": "y"}, "` + control.Key + `": {"attempt": 2}}`)
	top, c, err := control.ReadSplit(state)
	want, found, werr := control.Read(state)
	if err != nil || werr != nil || !found || c.Attempt != want.Attempt || c.Attempt != 2 {
		t.Fatalf("ReadSplit %+v %v, Read %+v %v", c, err, want, werr)
	}
	if _, ok := top["a"]; !ok || len(top) != 3 {
		t.Fatalf("top members: %v", top)
	}
	delete(top, control.Key)
	c.Attempt = 3
	plain, _ := json.Marshal(top)
	wantState, err := control.Write(plain, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := control.WriteTop(top, c)
	if err != nil || string(got) != string(wantState) {
		t.Fatalf("WriteTop %s %v, Write %s", got, err, wantState)
	}
	if _, _, err := control.ReadSplit(json.RawMessage(`[1]`)); !errors.Is(err, toolop.ErrInvalidInput) {
		t.Fatalf("ReadSplit of an array: %v", err)
	}
}
