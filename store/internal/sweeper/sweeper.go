// Package sweeper runs a store's periodic reclaiming pass in a goroutine it
// owns: one pass per interval, each bounded in time, stopped and waited for
// by Close. The session stores of every SQL backend share it.
package sweeper

import (
	"context"
	"sync"
	"time"
)

// Sweeper is a running (or disabled) background pass.
type Sweeper struct {
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// Start runs pass every interval until Close; interval < 0 starts nothing
// (the caller sweeps by hand). Each pass gets at most max(every, 30s), so a
// hung database cannot hold the loop forever. onErr, if set, hears of a
// failed pass (the next one retries).
func Start(every time.Duration, pass func(context.Context) error, onErr func(error)) *Sweeper {
	s := &Sweeper{done: make(chan struct{})}
	if every < 0 {
		close(s.done)
		s.stop = func() {}
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, cancelPass := context.WithTimeout(ctx, max(every, 30*time.Second))
				if err := pass(pctx); err != nil && ctx.Err() == nil && onErr != nil {
					onErr(err)
				}
				cancelPass()
			}
		}
	}()
	return s
}

// Close stops the loop and waits for a pass in progress to end.
func (s *Sweeper) Close() {
	s.once.Do(s.stop)
	<-s.done
}
