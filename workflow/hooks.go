package workflow

import "context"

// Points in a step's life where a test may stop a worker, to SIGKILL it
// right there (the crash matrix). The engine calls Hooks.At at each; tools
// reach theirs through At (PointAfterSend lives in a client).
const (
	FaultBeforeCall      = "before_call"      // operation marked started, request not sent
	FaultAfterSend       = "after_send"       // request written to the wire, no response read
	FaultAfterResponse   = "after_response"   // response received, not yet recorded in the ledger
	FaultAfterCheckpoint = "after_checkpoint" // the step that made the call is committed
)

// Hooks are calls the engine makes at named points, for tests. The zero
// value, what production uses, makes none.
type Hooks struct {
	// At is called with the point's name and the run's id; it may block
	// (until ctx ends, say) to hold the worker at that point.
	At func(ctx context.Context, point, runID string)
}

type hooksKey struct{}

// at runs the engine's hook for a point.
func (e *Engine) at(ctx context.Context, point, runID string) {
	if e.opts.Hooks.At != nil {
		e.opts.Hooks.At(ctx, point, runID)
	}
}

// withHooks lets code the engine calls with ctx (a step, a tool's Send)
// reach the hooks through At.
func (e *Engine) withHooks(ctx context.Context) context.Context {
	if e.opts.Hooks.At == nil {
		return ctx
	}
	return context.WithValue(ctx, hooksKey{}, e.opts.Hooks.At)
}

// At calls the hook of the engine that is running the step ctx belongs to,
// if it has one; otherwise it returns at once. Tools call it for points
// only they can reach.
func At(ctx context.Context, point, runID string) {
	if f, ok := ctx.Value(hooksKey{}).(func(context.Context, string, string)); ok {
		f(ctx, point, runID)
	}
}
