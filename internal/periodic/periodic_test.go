package periodic

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunPassesAndReports: a pass runs at once and then every interval, each
// reported with its count or error, and Run returns when ctx ends.
func TestRunPassesAndReports(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var passes atomic.Int32
	boom := errors.New("boom")
	var reports []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, 5*time.Millisecond, func(context.Context) (int, error) {
			if passes.Add(1) == 2 {
				return 0, boom
			}
			return 1, nil
		}, func(n int, err error) {
			reports = append(reports, err)
			if len(reports) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if len(reports) != 3 || reports[0] != nil || !errors.Is(reports[1], boom) || reports[2] != nil {
		t.Fatalf("reports %v, want nil, boom, nil", reports)
	}
}
