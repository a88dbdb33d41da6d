package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	mredis "github.com/mementohq/memento/store/redis"
	"github.com/mementohq/memento/storetest"
)

// openStore connects with a random key prefix and deletes every key under
// it when the test ends, so tests of other helpers on the same Redis are
// untouched.
func openStore(t testing.TB) *mredis.Store {
	t.Helper()
	url := testenv.RedisURL(t)
	prefix := testenv.RandomID("mt-") + ":"
	s, err := mredis.Open(t.Context(), url, mredis.Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("open the Redis store at %s: %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	testenv.CleanupRedisKeys(t, s.Client(), prefix+"*") // runs before the close
	return s
}

func TestSessionStoreSuite(t *testing.T) {
	storetest.SessionStoreSuite(t, func(t *testing.T) session.Store { return openStore(t) })
}

func TestPIIVaultSuite(t *testing.T) {
	storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store { return openStore(t) })
}

func keysOf(t *testing.T, s *mredis.Store) []string {
	t.Helper()
	ctx := t.Context()
	var keys []string
	iter := s.Client().Scan(ctx, 0, s.Prefix()+"*", 500).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	return keys
}

// TestKeyLayout checks the hash tags (one cluster slot per session), that
// every key of a session carries a native expiry, and that expiry reclaims
// the keys without any sweep.
func TestKeyLayout(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	svc := session.NewService(s, session.Options{})
	if _, _, err := svc.Put(ctx, "ten:ant{x}", "ses:1", session.PutRequest{UserID: "u", TTL: 300 * time.Millisecond}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := svc.Append(ctx, "ten:ant{x}", "ses:1", "u", []session.MessageInput{{Role: "user", Content: "hi"}}); err != nil {
		t.Fatalf("append: %v", err)
	}
	keys := keysOf(t, s)
	key := s.Prefix() + "{t:ten%3Aant%7Bx%7D:s:ses%3A1}"
	index := s.Prefix() + "{t:ten%3Aant%7Bx%7D:u:u}:ix"
	if len(keys) != 2 || !slices.Contains(keys, key) || !slices.Contains(keys, index) {
		t.Fatalf("keys %v: want the session %s (one key, hash-tagged) and the user index %s", keys, key, index)
	}
	for _, k := range keys {
		ttl, err := s.Client().PTTL(ctx, k).Result()
		// The session expires with its TTL; the user index lives up to
		// max(ttl/2, 1s) longer, by design.
		limit := 300 * time.Millisecond
		if k == index {
			limit = 1302 * time.Millisecond
		}
		if err != nil || ttl <= 0 || ttl > limit {
			t.Fatalf("key %s has ttl %v (err %v), want a native expiry within %v", k, ttl, err, limit)
		}
	}
	if slotOf(key) != slotOf(s.Prefix()+"{t:ten%3Aant%7Bx%7D:s:ses%3A1}:anything") {
		t.Fatal("the hash tag does not decide the slot")
	}
	time.Sleep(400 * time.Millisecond) // real TTL expiry
	if left := keysOf(t, s); len(left) != 1 || left[0] != index {
		t.Fatalf("keys left after expiry: %v, want only the user index (which expires later)", left)
	}
}

// slotOf is the Redis Cluster slot of a key: CRC16 of the hash tag mod 16384.
func slotOf(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// TestRawStorageHoldsReferences reads Redis itself: a message with a card
// number and an e-mail is stored with references only.
func TestRawStorageHoldsReferences(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	vault, _ := pii.NewVault(s, pii.VaultOptions{})
	svc := session.NewService(s, session.Options{Redactor: vault})
	if _, _, err := svc.Put(ctx, "t", "s", session.PutRequest{UserID: "u", State: json.RawMessage(`{"contact":"bob@example.org"}`)}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := svc.Append(ctx, "t", "s", "u", []session.MessageInput{{Role: "user", Content: "pay with 4111 1111 1111 1111, receipt to bob@example.org"}}); err != nil {
		t.Fatalf("append: %v", err)
	}
	all, err := s.Client().HGetAll(ctx, s.Prefix()+"{t:t:s:s}").Result()
	if err != nil {
		t.Fatalf("raw session: %v", err)
	}
	state := all["st"]
	var msgs []string
	for f, v := range all {
		if strings.HasPrefix(f, "#") {
			msgs = append(msgs, v)
		}
	}
	if len(msgs) != 1 || state == "" {
		t.Fatalf("raw session fields: %v", all)
	}
	for _, raw := range []string{"4111 1111 1111 1111", "4111111111111111", "bob@example.org"} {
		if strings.Contains(msgs[0], raw) || strings.Contains(state, raw) {
			t.Fatalf("raw %q in Redis: %q %q", raw, msgs[0], state)
		}
	}
	if !strings.Contains(msgs[0], "pii:card:") || !strings.Contains(msgs[0], "pii:email:") || !strings.Contains(state, "pii:email:") {
		t.Fatalf("references missing in Redis: %q %q", msgs[0], state)
	}
}

// TestIndexToleratesLostMembers checks that listing survives index members
// whose session keys vanished without the index being told (eviction, a
// failed cleanup) and removes them.
func TestIndexToleratesLostMembers(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	svc := session.NewService(s, session.Options{})
	for _, id := range []string{"a", "b"} {
		if _, _, err := svc.Put(ctx, "t", id, session.PutRequest{UserID: "u"}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	if err := s.Client().Del(ctx, s.Prefix()+"{t:t:s:b}").Err(); err != nil {
		t.Fatalf("del: %v", err)
	}
	list, err := svc.ListUser(ctx, "t", "u", 10)
	if err != nil || len(list) != 1 || list[0].SessionID != "a" {
		t.Fatalf("list: %+v %v", list, err)
	}
	members, err := s.Client().ZRange(ctx, s.Prefix()+"{t:t:u:u}:ix", 0, -1).Result()
	if err != nil || len(members) != 1 || members[0] != "a" {
		t.Fatalf("index after listing: %v %v, want [a]", members, err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := mredis.Open(ctx, "redis://127.0.0.1:1/0", mredis.Options{}); err == nil {
		t.Fatal("open of an unreachable Redis succeeded")
	}
	if _, err := mredis.Open(ctx, "http://x", mredis.Options{}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("open of a non-redis URL: %v", err)
	}
}

// TestAppendBeyondLuaUnpack: Lua's unpack refuses more than ~8000 values,
// so an append that writes or trims thousands of fields at once (a batch
// limit raised, or a cap lowered under sessions that hold many messages)
// must still land and trim exactly.
func TestAppendBeyondLuaUnpack(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	if _, _, err := s.Put(ctx, session.PutParams{TenantID: "t", SessionID: "big", UserID: "u", State: json.RawMessage(`{}`), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	batch := make([]session.MessageInput, 5000)
	for i := range batch {
		batch[i] = session.MessageInput{Role: "user", Content: "m"}
	}
	for i := 0; i < 2; i++ {
		res, err := s.Append(ctx, "t", "big", "u", batch, 1_000_000)
		if err != nil {
			t.Fatalf("append batch %d of %d messages: %v", i, len(batch), err)
		}
		if res.MessageCount != (i+1)*len(batch) || res.Trimmed != 0 {
			t.Fatalf("batch %d: %+v", i, res)
		}
	}
	res, err := s.Append(ctx, "t", "big", "u", batch[:1], 100)
	if err != nil {
		t.Fatalf("append under a lowered cap: %v", err)
	}
	if res.MessageCount != 100 || res.Trimmed != 2*len(batch)+1-100 || res.Messages[0].Seq != int64(2*len(batch)+1) {
		t.Fatalf("append under a lowered cap: count %d trimmed %d seq %d", res.MessageCount, res.Trimmed, res.Messages[0].Seq)
	}
	n, err := s.Client().HLen(ctx, s.Prefix()+"{t:t:s:big}").Result()
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Messages(ctx, "t", "big", "u", session.MessageQuery{Limit: 1000})
	if err != nil || len(msgs) != 100 {
		t.Fatalf("messages after the trim: %d %v", len(msgs), err)
	}
	for _, m := range msgs {
		if m.Seq <= int64(2*len(batch)+1-100) {
			t.Fatalf("message %d outlived the trim", m.Seq)
		}
	}
	if n > 100+20 { // the messages plus the record fields
		t.Fatalf("session hash keeps %d fields after the trim", n)
	}
}
