package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// combineTimeout bounds a batch sent on behalf of several callers: it runs
// detached from the cancellation of the caller that sends it (the others
// must not fail because that one gave up), so it needs a bound of its own.
const combineTimeout = 10 * time.Second

// combiner sends the script calls of concurrent callers in one pipeline:
// one round trip, one write and one read on each side for the batch
// instead of one per call. Each script is still its own atomic EVALSHA;
// only the transport is shared. There is no goroutine of its own: the first
// caller to find no batch in flight sends its call and every call queued
// behind it, hands the next batch to the first call queued meanwhile, and
// returns. A caller alone (no batch in flight) sends its call directly with
// its own context, as without the combiner.
type combiner struct {
	c    goredis.UniversalClient
	load func(context.Context) error // puts the scripts back after a NOSCRIPT

	mu    sync.Mutex
	busy  bool // a caller is sending a batch
	queue []*combined
}

// combined is one call in a combiner's queue.
type combined struct {
	ctx  context.Context
	sc   *goredis.Script
	keys []string
	args []any

	val any
	err error
	// wake receives true when val and err are in, false when this call
	// is to send the next batch.
	wake chan bool
}

// run calls sc as sc.Run would, sharing the round trip with concurrent calls.
func (cb *combiner) run(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (any, error) {
	cb.mu.Lock()
	if !cb.busy {
		// No batch in flight (and so none queued: a queue only grows
		// while one is, and is handed on before busy clears).
		cb.busy = true
		cb.mu.Unlock()
		v, err := sc.Run(ctx, cb.c, keys, args...).Result()
		cb.next()
		return v, err
	}
	me := &combined{ctx: ctx, sc: sc, keys: keys, args: args, wake: make(chan bool, 1)}
	cb.queue = append(cb.queue, me)
	cb.mu.Unlock()
	if <-me.wake {
		return me.val, me.err
	}
	// This call's turn: it sends every queued call, itself included.
	cb.mu.Lock()
	batch := cb.queue
	cb.queue = nil
	cb.mu.Unlock()
	cb.send(ctx, batch, me)
	cb.next()
	return me.val, me.err
}

// next hands the turn to the first queued call, or marks none in flight.
func (cb *combiner) next() {
	cb.mu.Lock()
	if len(cb.queue) == 0 {
		cb.busy = false
		cb.mu.Unlock()
		return
	}
	first := cb.queue[0]
	cb.mu.Unlock()
	first.wake <- false
}

// send runs a batch in one pipeline and wakes every call in it but the
// sender's own.
func (cb *combiner) send(ctx context.Context, batch []*combined, me *combined) {
	live := make([]*combined, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err // given up before it was sent: nothing applied
			continue
		}
		live = append(live, c)
	}
	if len(live) > 0 {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), combineTimeout)
		cmds := cb.pipeline(pctx, live)
		for i, c := range live {
			c.val, c.err = cmds[i].Result()
		}
		// Only the calls the server refused for want of the script go
		// again: the others ran, and an append must not run twice.
		var again []*combined
		for _, c := range live {
			if goredis.HasErrorPrefix(c.err, "NOSCRIPT") {
				again = append(again, c)
			}
		}
		if len(again) > 0 && cb.load(pctx) == nil {
			cmds = cb.pipeline(pctx, again)
			for i, c := range again {
				c.val, c.err = cmds[i].Result()
			}
		}
		cancel()
	}
	for _, c := range batch {
		if c != me {
			c.wake <- true
		}
	}
}

func (cb *combiner) pipeline(ctx context.Context, calls []*combined) []*goredis.Cmd {
	cmds := make([]*goredis.Cmd, len(calls))
	// Each command's own error is in its Cmd; the pipeline's is the first of them.
	_, _ = cb.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.sc.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	return cmds
}
