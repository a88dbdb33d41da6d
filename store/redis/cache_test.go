package redis_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/session"
	mredis "github.com/mementohq/memento/store/redis"
	"github.com/mementohq/memento/storetest"
)

// openStores opens n stores on one key prefix, as n server processes
// sharing one Redis would be; each has its own state cache.
func openStores(t *testing.T, n int, o mredis.Options) []*mredis.Store {
	t.Helper()
	url := testenv.RedisURL(t)
	o.Prefix = testenv.RandomID("mt-") + ":"
	out := make([]*mredis.Store, n)
	for i := range out {
		s, err := mredis.Open(t.Context(), url, o)
		if err != nil {
			t.Fatalf("open the Redis store at %s: %v", url, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s
	}
	testenv.CleanupRedisKeys(t, out[0].Client(), o.Prefix+"*")
	return out
}

// TestSessionStoreSuiteWithoutStateCache runs the suite with every patch
// reading the state first (the path a cache miss takes).
func TestSessionStoreSuiteWithoutStateCache(t *testing.T) {
	storetest.SessionStoreSuite(t, func(t *testing.T) session.Store {
		return openStores(t, 1, mredis.Options{StateCacheBytes: -1})[0]
	})
}

// TestPatchAfterRecreateMergesOntoTheNewSession: a process that cached a
// session's state at revision 1 must not merge onto it once another process
// closed the session and created it again, also at revision 1.
func TestPatchAfterRecreateMergesOntoTheNewSession(t *testing.T) {
	st := openStores(t, 2, mredis.Options{})
	a, b := session.NewService(st[0], session.Options{}), session.NewService(st[1], session.Options{})
	ctx := t.Context()
	if _, _, err := a.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: json.RawMessage(`{"old":true}`), TTL: time.Minute}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := b.Close(ctx, "t", "s", "u"); err != nil {
		t.Fatalf("close: %v", err)
	}
	if s, _, err := b.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: json.RawMessage(`{"new":true}`), TTL: time.Minute}); err != nil || s.Revision != 1 {
		t.Fatalf("put again: %+v %v", s, err)
	}
	got, err := a.Patch(ctx, "t", "s", "u", 1, json.RawMessage(`{"p":1}`))
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	raw, err := st[0].Client().HGet(ctx, st[0].Prefix()+"{t:t:s:s}", "st").Result()
	if err != nil {
		t.Fatalf("raw state: %v", err)
	}
	if want := `{"new":true,"p":1}`; string(got.State) != want || raw != want || got.Revision != 2 {
		t.Fatalf("patched rev %d state %s, stored %s; want rev 2 %s", got.Revision, got.State, raw, want)
	}
}

// TestPatchWithAStaleCache: a revision another process moved past is 412
// and changes nothing, although this process cached that revision; the
// current revision then patches.
func TestPatchWithAStaleCache(t *testing.T) {
	st := openStores(t, 2, mredis.Options{})
	a, b := session.NewService(st[0], session.Options{}), session.NewService(st[1], session.Options{})
	ctx := t.Context()
	if _, _, err := a.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: json.RawMessage(`{"n":1}`), TTL: time.Minute}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := b.Patch(ctx, "t", "s", "u", 1, json.RawMessage(`{"n":2}`)); err != nil {
		t.Fatalf("patch by b: %v", err)
	}
	if _, err := a.Patch(ctx, "t", "s", "u", 1, json.RawMessage(`{"n":3,"x":true}`)); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("stale patch by a: %v, want ErrPreconditionFailed", err)
	}
	if cur, err := b.Get(ctx, "t", "s", "u"); err != nil || cur.Revision != 2 || string(cur.State) != `{"n":2}` {
		t.Fatalf("after the stale patch: %+v %v", cur, err)
	}
	got, err := a.Patch(ctx, "t", "s", "u", 2, json.RawMessage(`{"x":true}`))
	if err != nil || got.Revision != 3 || string(got.State) != `{"n":2,"x":true}` {
		t.Fatalf("patch at the current revision: %+v %s %v", got, got.State, err)
	}
	if _, err := a.Patch(ctx, "t", "s", "mallory", 3, json.RawMessage(`{"x":false}`)); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("patch by another user with the cached revision: %v, want ErrNotFound", err)
	}
}
