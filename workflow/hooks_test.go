package workflow_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/workflow"
)

// The engine calls its hook at each named point of a step that makes a
// call, in order, and a tool reaches it through workflow.At; with no hook,
// workflow.At does nothing.
func TestHooksAtNamedPoints(t *testing.T) {
	var (
		mu     sync.Mutex
		points []string
	)
	hooks := workflow.Hooks{At: func(ctx context.Context, point, runID string) {
		mu.Lock()
		defer mu.Unlock()
		points = append(points, point+"/"+runID)
	}}
	flow := func(p *provider) workflow.Workflow {
		pay := payCall(p, 10, "")
		send := pay.Send
		pay.Send = func(ctx context.Context, key string) (workflow.Reply, error) {
			r, err := send(ctx, key)
			workflow.At(ctx, workflow.FaultAfterSend, "run-h")
			return r, err
		}
		return workflow.Workflow{Name: "h", Version: "1", Steps: []workflow.Step{
			{Name: "pay", Run: func(ctx context.Context, sc *workflow.StepContext) error {
				_, err := sc.Call(ctx, pay)
				return err
			}},
		}}
	}
	ctx := context.Background()
	for _, withHooks := range []bool{true, false} {
		points = nil
		e, p := memEnv(t), newProvider()
		opts := workflow.Options{}
		if withHooks {
			opts.Hooks = hooks
		}
		eng := newEngine(t, e, p, opts, flow(p))
		if _, _, err := eng.Start(ctx, "h", "run-h", nil); err != nil {
			t.Fatal(err)
		}
		if r, err := eng.Drive(ctx, "run-h"); err != nil || r.Status != run.StatusCompleted {
			t.Fatalf("drive: %s %v", r.Status, err)
		}
		want := []string{"before_call/run-h", "after_send/run-h", "after_response/run-h", "after_checkpoint/run-h"}
		if !withHooks {
			want = nil
		}
		if !slices.Equal(points, want) {
			t.Fatalf("hooks=%v: points %v, want %v", withHooks, points, want)
		}
	}
}
