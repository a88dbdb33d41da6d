package control

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mementohq/memento/toolop"
)

// Key is the reserved top-level key of a run's state under which the
// workflow layer keeps budgets, approval guards, artifact references and tool
// contract versions. Keeping them inside the state means they are committed
// with every step in the same transaction, without changing the run store.
const Key = "_memento"

// Budget holds a run's limits; a zero field means no limit.
type Budget struct {
	MaxSteps      int64 `json:"max_steps,omitempty"`
	MaxTokens     int64 `json:"max_tokens,omitempty"`
	MaxCostMicros int64 `json:"max_cost_micros,omitempty"`
	MaxWallMS     int64 `json:"max_wall_ms,omitempty"`
}

// Spend is what a run used. Cost is in millionths of a currency unit so sums
// are exact; wall time is the time spent executing steps.
type Spend struct {
	Steps      int64 `json:"steps"`
	Tokens     int64 `json:"tokens"`
	CostMicros int64 `json:"cost_micros"`
	WallMS     int64 `json:"wall_ms"`
}

// Add returns s plus o.
func (s Spend) Add(o Spend) Spend {
	return Spend{Steps: s.Steps + o.Steps, Tokens: s.Tokens + o.Tokens, CostMicros: s.CostMicros + o.CostMicros, WallMS: s.WallMS + o.WallMS}
}

// Exhausted names the first limit that spend has reached, or "".
func (b Budget) Exhausted(s Spend) string {
	switch {
	case b.MaxSteps > 0 && s.Steps >= b.MaxSteps:
		return fmt.Sprintf("steps %d of %d", s.Steps, b.MaxSteps)
	case b.MaxTokens > 0 && s.Tokens >= b.MaxTokens:
		return fmt.Sprintf("tokens %d of %d", s.Tokens, b.MaxTokens)
	case b.MaxCostMicros > 0 && s.CostMicros >= b.MaxCostMicros:
		return fmt.Sprintf("cost %d of %d micros", s.CostMicros, b.MaxCostMicros)
	case b.MaxWallMS > 0 && s.WallMS >= b.MaxWallMS:
		return fmt.Sprintf("wall time %d of %d ms", s.WallMS, b.MaxWallMS)
	}
	return ""
}

// Remaining is what is left of each limited dimension (-1 where unlimited).
func (b Budget) Remaining(s Spend) Spend {
	left := func(max, used int64) int64 {
		if max <= 0 {
			return -1
		}
		if used >= max {
			return 0
		}
		return max - used
	}
	return Spend{Steps: left(b.MaxSteps, s.Steps), Tokens: left(b.MaxTokens, s.Tokens), CostMicros: left(b.MaxCostMicros, s.CostMicros), WallMS: left(b.MaxWallMS, s.WallMS)}
}

// ApprovalGuard records that a step's request (by digest) needs an approval
// before it is sent. Once the guarded operation is final the guard is spent.
type ApprovalGuard struct {
	StepID        string `json:"step_id"`
	RequestDigest string `json:"request_digest"`
	OperationID   string `json:"operation_id,omitempty"`
}

// ArtifactRef is a large payload kept outside the state, by URI and digest.
type ArtifactRef struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
}

// Wait says what a suspended run waits for, so a worker knows when to resume it.
type Wait struct {
	Kind        string `json:"kind"` // "approval" or "operation"
	ApprovalID  string `json:"approval_id,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	StepID      string `json:"step_id,omitempty"`
}

// Control is the reserved object a workflow keeps in its run state.
type Record struct {
	Budget    Budget            `json:"budget"`
	Spent     Spend             `json:"spent"`
	Approvals []ApprovalGuard   `json:"approvals,omitempty"`
	Artifacts []ArtifactRef     `json:"artifacts,omitempty"`
	Tools     map[string]string `json:"tools,omitempty"`
	Wait      *Wait             `json:"wait,omitempty"`
	// Attempt counts failed attempts of the run's next step.
	Attempt int `json:"attempt,omitempty"`
}

// Guard returns the approval guard of a step, if any.
func (c *Record) Guard(stepID string) (ApprovalGuard, bool) {
	for _, g := range c.Approvals {
		if g.StepID == stepID {
			return g, true
		}
	}
	return ApprovalGuard{}, false
}

// SetGuard adds or replaces the approval guard of g.StepID.
func (c *Record) SetGuard(g ApprovalGuard) {
	for i := range c.Approvals {
		if c.Approvals[i].StepID == g.StepID {
			c.Approvals[i] = g
			return
		}
	}
	c.Approvals = append(c.Approvals, g)
}

// Read extracts the control object from a run state; a state without
// one yields a zero Control and found=false.
func Read(state json.RawMessage) (c Record, found bool, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(state, &top); err != nil {
		return Record{}, false, fmt.Errorf("%w: state is not a JSON object: %v", toolop.ErrInvalidInput, err)
	}
	return ReadTop(top)
}

// ReadSplit is Read that also returns the state's top-level members, for a
// caller that needs them too (one parse of the state, not two); top is nil
// only when err says the state is not a JSON object.
func ReadSplit(state json.RawMessage) (top map[string]json.RawMessage, c Record, err error) {
	if err := json.Unmarshal(state, &top); err != nil {
		return nil, Record{}, fmt.Errorf("%w: state is not a JSON object: %v", toolop.ErrInvalidInput, err)
	}
	if top == nil { // the state is null
		top = map[string]json.RawMessage{}
	}
	c, _, err = ReadTop(top)
	return top, c, err
}

// ReadTop is Read over a state already split into its top-level members.
func ReadTop(top map[string]json.RawMessage) (c Record, found bool, err error) {
	raw, ok := top[Key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return Record{}, false, nil
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return Record{}, true, fmt.Errorf("%w: state.%s: %v", toolop.ErrInvalidInput, Key, err)
	}
	return c, true, nil
}

// WriteTop encodes the state of the top-level members top with its control
// object set to c: what Write gives for the state top encodes, without
// parsing it again. It sets top[Key].
func WriteTop(top map[string]json.RawMessage, c Record) (json.RawMessage, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode control: %w", err)
	}
	top[Key] = b
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return out, nil
}

// Write returns state with its control object replaced by c.
func Write(state json.RawMessage, c Record) (json.RawMessage, error) {
	top := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(state)) > 0 {
		if err := json.Unmarshal(state, &top); err != nil {
			return nil, fmt.Errorf("%w: state is not a JSON object: %v", toolop.ErrInvalidInput, err)
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode control: %w", err)
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	top[Key] = b
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return out, nil
}
