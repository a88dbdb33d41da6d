package bench

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestRunWorkflowSmoke: the workflow benchmark completes workflows through
// the SDK at each concurrency and reports them (no speed is asserted).
func TestRunWorkflowSmoke(t *testing.T) {
	rep, err := RunWorkflow(context.Background(), WorkflowConfig{
		PostgresURL: testPostgresURL(t), Duration: 300 * time.Millisecond, Warmup: -1, Rounds: 1,
		Concurrency: []int{1, 3}, Steps: 4, Peer: PeerConfig{Skip: true}, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.StepsPerWorkflow != 4 || rep.Peer != nil || len(rep.Ratios) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	for _, m := range rep.Results {
		if m.Target != TargetWorkflow || m.OpsPerSec <= 0 {
			t.Fatalf("measurement %+v: no workflow completed", m)
		}
	}
}
