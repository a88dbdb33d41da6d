package redis_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mementohq/memento/session"
	mredis "github.com/mementohq/memento/store/redis"
)

// recorder is a go-redis hook that keeps the arguments of every command sent.
type recorder struct {
	mu   sync.Mutex
	cmds [][]any
}

func (r *recorder) add(c goredis.Cmder) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c.Args())
	r.mu.Unlock()
}

func (r *recorder) take() [][]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.cmds
	r.cmds = nil
	return out
}

func (r *recorder) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *recorder) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, c goredis.Cmder) error { r.add(c); return next(ctx, c) }
}

func (r *recorder) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cs []goredis.Cmder) error {
		for _, c := range cs {
			r.add(c)
		}
		return next(ctx, cs)
	}
}

// TestListReadsNoDocuments: listing a user's sessions reads record fields
// only, never a state, a summary or a message, whatever their size.
func TestListReadsNoDocuments(t *testing.T) {
	c, url := testenv.RedisClient(t)
	opts, _ := goredis.ParseURL(url)
	rc := goredis.NewClient(opts)
	t.Cleanup(func() { _ = rc.Close() })
	rec := &recorder{}
	rc.AddHook(rec)
	prefix := testenv.RandomID("mt-") + ":"
	testenv.CleanupRedisKeys(t, c, prefix+"*")
	s := mredis.New(rc, mredis.Options{Prefix: prefix})
	svc := session.NewService(s, session.Options{})
	ctx := t.Context()
	big := `{"blob":"` + strings.Repeat("x", 30<<10) + `"}`
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := svc.Put(ctx, "t", id, session.PutRequest{UserID: "u", State: json.RawMessage(big), TTL: time.Minute}); err != nil {
			t.Fatalf("put: %v", err)
		}
		if _, err := svc.SetSummary(ctx, "t", id, "u", session.Summary{Text: strings.Repeat("y", 30<<10)}); err != nil {
			t.Fatalf("summary: %v", err)
		}
		if _, err := svc.Append(ctx, "t", id, "u", []session.MessageInput{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	rec.take()
	page, next, err := svc.ListUserPage(ctx, "t", "u", "", 2)
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("first page: %d sessions, next %q, %v", len(page), next, err)
	}
	rest, next2, err := svc.ListUserPage(ctx, "t", "u", next, 2)
	if err != nil || len(rest) != 1 || next2 != "" || rest[0].SessionID == page[0].SessionID || rest[0].SessionID == page[1].SessionID {
		t.Fatalf("second page: %+v, next %q, %v", rest, next2, err)
	}
	cmds := rec.take()
	if len(cmds) == 0 {
		t.Fatal("the hook saw no command")
	}
	for _, args := range cmds {
		name := strings.ToLower(args[0].(string))
		if name == "hgetall" || name == "hget" || name == "evalsha" || name == "eval" {
			t.Fatalf("a listing sent %v", args)
		}
		for _, a := range args[1:] {
			if f, ok := a.(string); ok && (f == "st" || f == "sm" || strings.HasPrefix(f, "#")) {
				t.Fatalf("a listing read field %q: %v", f, args)
			}
		}
	}
}
