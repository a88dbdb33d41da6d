package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
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

// messageFields returns the seqs of the message fields a session key holds.
func messageFields(t *testing.T, s *mredis.Store, key string) []int64 {
	t.Helper()
	fields, err := s.Client().HKeys(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("hkeys: %v", err)
	}
	var seqs []int64
	for _, f := range fields {
		if rest, ok := strings.CutPrefix(f, "#"); ok {
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				t.Fatalf("message field %q", f)
			}
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	return seqs
}

// checkWindow asserts that reads see exactly the seqs first..last, that the
// stored message fields are those plus fewer than 16 dropped ones of the
// window's block, and returns how many dropped ones are stored.
func checkWindow(t *testing.T, s *mredis.Store, sid string, first, last int64) int {
	t.Helper()
	ctx := t.Context()
	msgs, err := s.Messages(ctx, "t", sid, "u", session.MessageQuery{Limit: 1000})
	if err != nil {
		t.Fatalf("messages: %v", err)
	}
	if int64(len(msgs)) != last-first+1 || msgs[0].Seq != first || msgs[len(msgs)-1].Seq != last {
		t.Fatalf("messages %d..%d (%d), want %d..%d", msgs[0].Seq, msgs[len(msgs)-1].Seq, len(msgs), first, last)
	}
	// A page cursor below the window finds nothing: dropped is dropped.
	if old, err := s.Messages(ctx, "t", sid, "u", session.MessageQuery{Limit: 1000, BeforeSeq: first}); err != nil || len(old) != 0 {
		t.Fatalf("messages before the window: %d %v", len(old), err)
	}
	seqs := messageFields(t, s, s.Prefix()+"{t:t:s:"+sid+"}")
	blockStart := first - (first-1)%16
	dropped := 0
	for _, q := range seqs {
		switch {
		case q > last || q < blockStart:
			t.Fatalf("stored message field #%d outside %d..%d (window from %d)", q, blockStart, last, first)
		case q < first:
			dropped++
		}
	}
	if len(seqs)-dropped != int(last-first+1) {
		t.Fatalf("%d live message fields stored, want %d", len(seqs)-dropped, last-first+1)
	}
	return dropped
}

// TestAppendDropsFieldsInBlocks: at the cap, the fields of dropped messages
// go sixteen seqs at a time; reads never see them, fewer than 16 are ever
// stored, and all of a block are gone once the window leaves it.
func TestAppendDropsFieldsInBlocks(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	if _, _, err := s.Put(ctx, session.PutParams{TenantID: "t", SessionID: "b", UserID: "u", State: json.RawMessage(`{}`), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	const limit = 20
	sawEmpty, sawDropped := false, false
	for i := int64(1); i <= 100; i++ {
		res, err := s.Append(ctx, "t", "b", "u", []session.MessageInput{{Role: "user", Content: "m" + strconv.FormatInt(i, 10)}}, limit)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		first := max(1, i-limit+1)
		if res.MessageCount != int(i-first+1) || res.Messages[0].Seq != i || res.Trimmed != int(min(1, max(0, i-limit))) {
			t.Fatalf("append %d: %+v", i, res)
		}
		d := checkWindow(t, s, "b", first, i)
		sawEmpty = sawEmpty || (i > limit && d == 0)
		sawDropped = sawDropped || d > 0
	}
	if !sawEmpty || !sawDropped {
		t.Fatalf("dropped fields: some stored %v, all gone at a block start %v", sawDropped, sawEmpty)
	}
	// A batch that moves the window across several blocks leaves none.
	batch := make([]session.MessageInput, 45)
	for i := range batch {
		batch[i] = session.MessageInput{Role: "user", Content: "b"}
	}
	res, err := s.Append(ctx, "t", "b", "u", batch, limit)
	if err != nil || res.Trimmed != 45 || res.MessageCount != limit {
		t.Fatalf("batch: %+v %v", res, err)
	}
	checkWindow(t, s, "b", 145-limit+1, 145)
}

// TestReadsSessionsOfTheOneByOneTrim: a session as the store wrote it
// before dropped fields went in blocks (the same fields, each dropped
// message deleted at once) is read, appended to and trimmed as any other.
func TestReadsSessionsOfTheOneByOneTrim(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	key := s.Prefix() + "{t:t:s:old}"
	now := time.Now()
	us := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMicro(), 10) }
	// Seqs 38..40 live (n=3, ls=40): 1..37 were dropped one by one.
	fields := []any{"u", "u", "a", "app", "st", `{"k":1}`, "r", "2", "n", "3", "ls", "40", "lt", us(-time.Second),
		"ttl", "3600000", "c", us(-time.Hour), "la", us(-time.Second), "x", us(time.Hour - time.Second),
		"ix", strconv.FormatInt(now.Add(2*time.Hour).UnixMilli(), 10), "g", "gen1"}
	for q := 38; q <= 40; q++ {
		fields = append(fields, "#"+strconv.Itoa(q), strconv.Itoa(q)+"|"+us(time.Duration(q-41)*time.Millisecond)+`|{"r":"user","c":"old `+strconv.Itoa(q)+`"}`)
	}
	if err := s.Client().HSet(ctx, key, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().PExpire(ctx, key, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "t", "old", "u")
	if err != nil || got.Revision != 2 || got.MessageCount != 3 || got.LastSeq != 40 || string(got.State) != `{"k":1}` || got.App != "app" {
		t.Fatalf("get: %+v %v", got, err)
	}
	checkWindow(t, s, "old", 38, 40)
	for i := int64(41); i <= 80; i++ {
		res, err := s.Append(ctx, "t", "old", "u", []session.MessageInput{{Role: "user", Content: "new"}}, 3)
		if err != nil || res.Trimmed != 1 || res.MessageCount != 3 || res.Messages[0].Seq != i {
			t.Fatalf("append %d: %+v %v", i, res, err)
		}
		if !res.Messages[0].CreatedAt.After(now.Add(-time.Second)) {
			t.Fatalf("append %d: time %v before the stored last message", i, res.Messages[0].CreatedAt)
		}
		checkWindow(t, s, "old", i-2, i)
	}
	if _, err := s.SetState(ctx, "t", "old", "u", 2, json.RawMessage(`{"k":2}`)); err != nil {
		t.Fatalf("set state: %v", err)
	}
}

// TestReadPastExpiryBeforeTheKeyGoes: Redis expires a key in millisecond
// steps, later than the session's own expiry (microseconds); a read in
// between answers not found, as the scripts do. The key is kept alive here
// well past the session's expiry to make that window wide.
func TestReadPastExpiryBeforeTheKeyGoes(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	if _, _, err := s.Put(ctx, session.PutParams{TenantID: "t", SessionID: "s", UserID: "u", State: []byte(`{}`), TTL: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().PExpire(ctx, s.Prefix()+"{t:t:s:s}", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if _, err := s.Get(ctx, "t", "s", "u"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("read past the session's expiry: %v, want ErrNotFound", err)
	}
}
