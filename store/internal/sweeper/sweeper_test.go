package sweeper

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPassesRunUntilClose(t *testing.T) {
	var n atomic.Int32
	errs := make(chan error, 100)
	s := Start(5*time.Millisecond, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a pass has no deadline")
		}
		n.Add(1)
		return errors.New("boom")
	}, func(err error) { errs <- err })
	deadline := time.After(5 * time.Second)
	for n.Load() < 3 {
		select {
		case <-deadline:
			t.Fatalf("only %d passes", n.Load())
		case <-time.After(time.Millisecond):
		}
	}
	s.Close()
	after := n.Load()
	time.Sleep(20 * time.Millisecond)
	if n.Load() != after {
		t.Fatalf("passes ran after Close: %d then %d", after, n.Load())
	}
	if len(errs) == 0 {
		t.Fatal("onErr heard of no failed pass")
	}
	s.Close() // twice is fine
}

func TestNegativeIntervalStartsNothing(t *testing.T) {
	var n atomic.Int32
	s := Start(-1, func(context.Context) error { n.Add(1); return nil }, nil)
	time.Sleep(10 * time.Millisecond)
	s.Close()
	if n.Load() != 0 {
		t.Fatalf("%d passes with the sweeper disabled", n.Load())
	}
}
