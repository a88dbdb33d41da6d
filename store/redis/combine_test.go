package redis

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mementohq/memento/internal/testenv"
)

// countPipelines counts the pipelines of more than one command a client sends.
type countPipelines struct{ n *atomic.Int64 }

func (countPipelines) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (countPipelines) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (h countPipelines) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if len(cmds) > 1 {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// incrScript adds one to a counter and returns it; a comment of its own
// makes it a script the server has not seen, so its first EVALSHA fails
// with NOSCRIPT.
func incrScript(t *testing.T) *goredis.Script {
	return goredis.NewScript("-- " + testenv.RandomID(t.Name()) + "\nreturn redis.call('INCR', KEYS[1])")
}

// TestCombinerSharesRoundTripsExactlyOnce: concurrent calls are sent in
// shared pipelines, and every call runs once, its caller getting its own reply.
func TestCombinerSharesRoundTripsExactlyOnce(t *testing.T) {
	rdb, _ := testenv.RedisClient(t)
	prefix := testenv.RandomID("mt-") + ":"
	testenv.CleanupRedisKeys(t, rdb, prefix+"*")
	var pipelines atomic.Int64
	rdb.AddHook(countPipelines{&pipelines})
	sc := incrScript(t)
	cb := &combiner{c: rdb, load: func(ctx context.Context) error { return sc.Load(ctx, rdb).Err() }}
	const workers, each = 24, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := prefix + "{" + strconv.Itoa(w) + "}"
			for i := 1; i <= each; i++ {
				v, err := cb.run(t.Context(), sc, []string{key})
				if err != nil || v != int64(i) {
					t.Errorf("worker %d call %d: %v %v, want %d", w, i, v, err, i)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		if n, err := rdb.Get(t.Context(), prefix+"{"+strconv.Itoa(w)+"}").Int(); err != nil || n != each {
			t.Fatalf("counter %d: %d %v, want %d", w, n, err, each)
		}
	}
	if pipelines.Load() == 0 {
		t.Fatal("no call shared a round trip")
	}
	if cb.busy || len(cb.queue) != 0 {
		t.Fatalf("combiner left busy=%v with %d queued", cb.busy, len(cb.queue))
	}
}

// TestCombinerBatchRunsAgainOnlyWhatLacksTheScript: in a batch, calls the
// server refused with NOSCRIPT go again after the scripts are loaded (once
// each: a call that ran is never sent twice), and a call whose caller gave
// up before the batch went is not sent at all.
func TestCombinerBatchRunsAgainOnlyWhatLacksTheScript(t *testing.T) {
	rdb, _ := testenv.RedisClient(t)
	prefix := testenv.RandomID("mt-") + ":"
	testenv.CleanupRedisKeys(t, rdb, prefix+"*")
	known, unknown := incrScript(t), incrScript(t)
	if err := known.Load(t.Context(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	loads := 0
	cb := &combiner{c: rdb, load: func(ctx context.Context) error { loads++; return unknown.Load(ctx, rdb).Err() }}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	mk := func(ctx context.Context, sc *goredis.Script, key string) *combined {
		return &combined{ctx: ctx, sc: sc, keys: []string{prefix + key}, wake: make(chan bool, 1)}
	}
	batch := []*combined{mk(t.Context(), known, "a"), mk(t.Context(), unknown, "b"), mk(gone, known, "c"), mk(t.Context(), known, "d")}
	cb.send(t.Context(), batch, batch[0])
	if loads != 1 {
		t.Fatalf("scripts loaded %d times, want 1", loads)
	}
	for i, c := range batch {
		if i > 0 {
			if woke := <-c.wake; !woke {
				t.Fatalf("call %d woken to send, want its result", i)
			}
		}
		want := int64(1)
		if c.ctx == gone {
			if c.err == nil {
				t.Fatalf("a call given up before the batch: %v %v", c.val, c.err)
			}
			continue
		}
		if c.err != nil || c.val != want {
			t.Fatalf("call %d: %v %v, want %d", i, c.val, c.err, want)
		}
	}
	for key, want := range map[string]int{"a": 1, "b": 1, "d": 1} {
		if n, err := rdb.Get(t.Context(), prefix+key).Int(); err != nil || n != want {
			t.Fatalf("counter %s: %d %v, want %d", key, n, err, want)
		}
	}
	if n, err := rdb.Exists(t.Context(), prefix+"c").Result(); err != nil || n != 0 {
		t.Fatalf("the call given up ran: %d %v", n, err)
	}
}
