package faultstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrInjected is wrapped by every error this package makes up.
var ErrInjected = errors.New("injected fault")

// MaxDelay bounds a Delay rule, so a mistyped duration cannot hang a test.
const MaxDelay = 10 * time.Second

// Action is what a rule does to a call it picks.
type Action int

const (
	// Fail returns an error before the call: nothing is applied.
	Fail Action = iota
	// Lose makes the call, then returns an error instead of its answer.
	Lose
	// Delay waits Rule.Delay (at most MaxDelay, or until ctx ends) before the call.
	Delay
)

func (a Action) String() string {
	switch a {
	case Fail:
		return "fail"
	case Lose:
		return "lose"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Call is one store call as a rule sees it: the method name and the
// arguments after the context, in order (for Commit: tenantID, runID, the
// run.StoreCommit).
type Call struct {
	Method string
	Args   []any
}

// Rule picks calls and acts on them.
type Rule struct {
	// Method names the store method ("Commit"); empty matches every method.
	Method string
	// If, when set, must also hold for the call to match. It runs under the
	// injector's lock: it must not call the injector or a wrapped store.
	If func(Call) bool
	// Nth, when > 0, fires only on the Nth matching call (1-based).
	Nth int
	// Times, when > 0, stops the rule after it fired that often.
	Times int
	// Probability, when in (0, 1), fires on a matching call with that
	// chance, drawn from the injector's seeded generator; 0 means always.
	Probability float64
	Action      Action
	// Delay is how long a Delay rule waits.
	Delay time.Duration
	// Err is the error returned (wrapped with ErrInjected); nil makes one up.
	Err error
}

// Injector holds the rules shared by every store it wraps, and counts.
type Injector struct {
	mu      sync.Mutex
	rng     *rand.Rand
	rules   []*ruleState
	calls   map[string]int
	fired   map[string]int
	applied map[string]int
}

type ruleState struct {
	Rule
	matched, fired int
}

// New returns an injector with the rules; seed fixes the probability draws,
// so a failing test can be replayed.
func New(seed uint64, rules ...Rule) *Injector {
	in := &Injector{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		calls: map[string]int{}, fired: map[string]int{}, applied: map[string]int{},
	}
	for _, r := range rules {
		in.Add(r)
	}
	return in
}

// Add appends a rule; the first rule that fires on a call decides it.
func (in *Injector) Add(r Rule) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = append(in.rules, &ruleState{Rule: r})
}

// Calls is how often method was called through the wrappers.
func (in *Injector) Calls(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.calls[method]
}

// Fired is how often a rule acted on a call of method.
func (in *Injector) Fired(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.fired[method]
}

// Applied is how often a Lose rule let a call of method succeed underneath
// before returning its error: writes the caller was told failed.
func (in *Injector) Applied(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.applied[method]
}

// outcome is what inject decided for one call.
type outcome struct {
	in     *Injector
	method string
	before error // return this without calling
	after  error // call, then return this instead
}

// inject decides a call: every wrapped method starts with it.
func (in *Injector) inject(ctx context.Context, method string, args ...any) outcome {
	o := outcome{in: in, method: method}
	r := in.pick(Call{Method: method, Args: args})
	if r == nil {
		return o
	}
	switch r.Action {
	case Fail:
		o.before = in.errFor(r, method, "failed before it ran")
	case Lose:
		o.after = in.errFor(r, method, "ran, but its answer was lost")
	case Delay:
		t := time.NewTimer(min(max(r.Delay, 0), MaxDelay))
		defer t.Stop()
		select {
		case <-ctx.Done():
			o.before = ctx.Err()
		case <-t.C:
		}
	}
	return o
}

func (in *Injector) errFor(r *Rule, method, what string) error {
	if r.Err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInjected, method, r.Err)
	}
	return fmt.Errorf("%w: %s %s", ErrInjected, method, what)
}

func (in *Injector) pick(c Call) *Rule {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls[c.Method]++
	for _, r := range in.rules {
		if (r.Method != "" && r.Method != c.Method) || (r.Times > 0 && r.fired >= r.Times) {
			continue
		}
		if r.If != nil && !r.If(c) {
			continue
		}
		r.matched++
		if r.Nth > 0 && r.matched != r.Nth {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && in.rng.Float64() >= r.Probability {
			continue
		}
		r.fired++
		in.fired[c.Method]++
		rule := r.Rule
		return &rule
	}
	return nil
}

// lost counts a call a Lose rule answered with an error, if it succeeded underneath.
func (o outcome) lost(err error) {
	if err == nil {
		o.in.mu.Lock()
		o.in.applied[o.method]++
		o.in.mu.Unlock()
	}
}

// call1, call2 and call3 run a wrapped call as inject decided: not at all,
// as is, or with its answer replaced by an error. Every wrapped method is
// one of them around the inner call.
func call1(o outcome, f func() error) error {
	if o.before != nil {
		return o.before
	}
	err := f()
	if o.after == nil {
		return err
	}
	o.lost(err)
	return o.after
}

func call2[A any](o outcome, f func() (A, error)) (A, error) {
	var a A
	err := call1(o, func() error {
		var err error
		a, err = f()
		return err
	})
	if o.before != nil || o.after != nil {
		var zero A
		return zero, err
	}
	return a, err
}

func call3[A, B any](o outcome, f func() (A, B, error)) (A, B, error) {
	var (
		a A
		b B
	)
	err := call1(o, func() error {
		var err error
		a, b, err = f()
		return err
	})
	if o.before != nil || o.after != nil {
		var za A
		var zb B
		return za, zb, err
	}
	return a, b, err
}
