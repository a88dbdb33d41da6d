package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
)

// Session TTLs for the expiry tests: sessionShortTTL expires during the test,
// afterSessionTTL is how long to stay idle for it to have expired.
const (
	sessionShortTTL = 300 * time.Millisecond
	afterSessionTTL = 400 * time.Millisecond
)

// SessionStoreSuite checks that a session.Store honours the contract in
// session/store.go, through session.Service where a rule lives there
// (merge patch, limits, redaction). open is called once per subtest and must
// return a store usable until t's cleanup; subtests use random tenants, so a
// backend may share one database. If the store also implements pii.Store,
// redaction is checked against it.
func SessionStoreSuite(t *testing.T, open func(t *testing.T) session.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s session.Store)
	}{
		{"CreateGetReplace", testSessionCreateGetReplace},
		{"ConditionalPut", testSessionConditionalPut},
		{"Binding", testSessionBinding},
		{"PatchMerge", testSessionPatchMerge},
		{"StalePatchChangesNothing", testSessionStalePatch},
		{"ConcurrentPatches", testSessionConcurrentPatches},
		{"AppendAndCap", testSessionAppendAndCap},
		{"ConcurrentAppends", testSessionConcurrentAppends},
		{"KeyedAppends", testSessionKeyedAppends},
		{"ConcurrentKeyedAppends", testSessionConcurrentKeyedAppends},
		{"MessageQueries", testSessionMessageQueries},
		{"Summary", testSessionSummary},
		{"Close", testSessionClose},
		{"CloseRacingAppends", testSessionCloseRacingAppends},
		{"ListByUser", testSessionListByUser},
		{"ListPages", testSessionListPages},
		{"MessagePages", testSessionMessagePages},
		{"ExpiryEveryReadPath", testSessionExpiry},
		{"SlidingTTL", testSessionSlidingTTL},
		{"Limits", testSessionLimits},
		{"Schema", testSessionSchema},
		{"Redaction", testSessionRedaction},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

// sfx bundles a session store, a service over it and one tenant.
type sfx struct {
	t      *testing.T
	s      session.Store
	svc    *session.Service
	tenant string
}

func newSfx(t *testing.T, s session.Store, o session.Options) *sfx {
	return &sfx{t: t, s: s, svc: session.NewService(s, o), tenant: newTenant()}
}

func (f *sfx) put(sid, user, state string, ttl time.Duration) session.Session {
	f.t.Helper()
	ss, created, err := f.svc.Put(f.t.Context(), f.tenant, sid, session.PutRequest{UserID: user, State: json.RawMessage(state), TTL: ttl})
	if err != nil {
		f.t.Fatalf("put session %s: %v", sid, err)
	}
	if !created {
		f.t.Fatalf("put session %s: created=false for a new session", sid)
	}
	return ss
}

func (f *sfx) get(sid, user string) session.Session {
	f.t.Helper()
	ss, err := f.svc.Get(f.t.Context(), f.tenant, sid, user)
	if err != nil {
		f.t.Fatalf("get session %s: %v", sid, err)
	}
	return ss
}

func (f *sfx) appendN(sid, user string, n int, from int) session.AppendResult {
	f.t.Helper()
	msgs := make([]session.MessageInput, n)
	for i := range msgs {
		msgs[i] = session.MessageInput{Role: "user", Content: fmt.Sprintf("m%d", from+i)}
	}
	res, err := f.svc.Append(f.t.Context(), f.tenant, sid, user, msgs)
	if err != nil {
		f.t.Fatalf("append to %s: %v", sid, err)
	}
	return res
}

func (f *sfx) messages(sid, user string, q session.MessageQuery) []session.Message {
	f.t.Helper()
	ms, err := f.svc.Messages(f.t.Context(), f.tenant, sid, user, q)
	if err != nil {
		f.t.Fatalf("messages of %s: %v", sid, err)
	}
	return ms
}

func contents(ms []session.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

// sameJSON compares two JSON documents by value.
func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("decode %s: %v", want, err)
	}
	return reflect.DeepEqual(a, b)
}

func testSessionCreateGetReplace(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	before := time.Now().Add(-time.Second)
	created := f.put(sid, "u1", `{"current_step":"start","user_choices":{"size":"M"}}`, time.Minute)
	if created.Revision != 1 || created.UserID != "u1" || created.TenantID != f.tenant || created.SessionID != sid {
		t.Fatalf("created session: %+v", created)
	}
	if created.TTL != time.Minute || created.CreatedAt.Before(before) || !created.ExpiresAt.After(created.CreatedAt) {
		t.Fatalf("created session times/ttl: %+v", created)
	}
	got := f.get(sid, "u1")
	if !sameJSON(t, got.State, `{"current_step":"start","user_choices":{"size":"M"}}`) || got.Revision != 1 {
		t.Fatalf("get after create: %+v state %s", got, got.State)
	}
	if !got.CreatedAt.Equal(created.CreatedAt) || !got.ExpiresAt.Equal(created.ExpiresAt) {
		t.Fatalf("get times %v/%v differ from create %v/%v", got.CreatedAt, got.ExpiresAt, created.CreatedAt, created.ExpiresAt)
	}
	f.appendN(sid, "u1", 2, 0)
	rep, isNew, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u1", State: json.RawMessage(`{"current_step":"two"}`), TTL: 2 * time.Minute})
	if err != nil || isNew {
		t.Fatalf("replace: created=%v err=%v", isNew, err)
	}
	if rep.Revision != 2 || !sameJSON(t, rep.State, `{"current_step":"two"}`) || rep.TTL != 2*time.Minute {
		t.Fatalf("replaced session: %+v state %s", rep, rep.State)
	}
	if !rep.CreatedAt.Equal(created.CreatedAt) {
		t.Fatalf("replace changed created_at from %v to %v", created.CreatedAt, rep.CreatedAt)
	}
	if rep.MessageCount != 2 || len(f.messages(sid, "u1", session.MessageQuery{})) != 2 {
		t.Fatalf("replace dropped messages: count %d", rep.MessageCount)
	}
	// An empty state is an empty object.
	sid2 := newID("s")
	empty := f.put(sid2, "u1", ``, 0)
	if !sameJSON(t, empty.State, `{}`) || empty.TTL != session.DefaultTTL {
		t.Fatalf("default state/ttl: %s %v", empty.State, empty.TTL)
	}
}

func testSessionConditionalPut(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	if _, _, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u", ExpectedRevision: 1}); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("conditional put on a missing session: %v, want ErrPreconditionFailed", err)
	}
	f.put(sid, "u", `{"a":1}`, time.Minute)
	if _, _, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u", State: json.RawMessage(`{"a":2}`), ExpectedRevision: 7}); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("stale conditional put: %v, want ErrPreconditionFailed", err)
	}
	if got := f.get(sid, "u"); got.Revision != 1 || !sameJSON(t, got.State, `{"a":1}`) {
		t.Fatalf("stale put changed the session: %+v %s", got, got.State)
	}
	ss, created, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u", State: json.RawMessage(`{"a":3}`), ExpectedRevision: 1})
	if err != nil || created || ss.Revision != 2 {
		t.Fatalf("conditional put at the right revision: %+v created=%v err=%v", ss, created, err)
	}
}

func testSessionBinding(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "alice", `{"secret":"x"}`, time.Minute)
	f.appendN(sid, "alice", 1, 0)
	other := newSfx(t, s, session.Options{})
	other.tenant = newTenant()
	type call struct {
		name string
		fn   func(tenant, user string) error
	}
	calls := []call{
		{"get", func(tn, u string) error { _, err := f.svc.Get(ctx, tn, sid, u); return err }},
		{"put", func(tn, u string) error {
			_, _, err := f.svc.Put(ctx, tn, sid, session.PutRequest{UserID: u, State: json.RawMessage(`{"stolen":true}`)})
			return err
		}},
		{"patch", func(tn, u string) error {
			_, err := f.svc.Patch(ctx, tn, sid, u, 1, json.RawMessage(`{"stolen":true}`))
			return err
		}},
		{"append", func(tn, u string) error {
			_, err := f.svc.Append(ctx, tn, sid, u, []session.MessageInput{{Role: "user", Content: "hi"}})
			return err
		}},
		{"messages", func(tn, u string) error {
			_, err := f.svc.Messages(ctx, tn, sid, u, session.MessageQuery{})
			return err
		}},
		{"summary", func(tn, u string) error {
			_, err := f.svc.SetSummary(ctx, tn, sid, u, session.Summary{Text: "x"})
			return err
		}},
		{"close", func(tn, u string) error { _, err := f.svc.Close(ctx, tn, sid, u); return err }},
	}
	for _, c := range calls {
		if err := c.fn(f.tenant, "mallory"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s as another user: %v, want ErrNotFound", c.name, err)
		}
	}
	for _, c := range calls {
		if c.name == "put" {
			continue
		}
		if err := c.fn(other.tenant, "alice"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s in another tenant: %v, want ErrNotFound", c.name, err)
		}
	}
	// In another tenant the same id is free: a put there creates a separate session.
	if ss, created, err := f.svc.Put(ctx, other.tenant, sid, session.PutRequest{UserID: "alice", State: json.RawMessage(`{}`)}); err != nil || !created || strings.Contains(string(ss.State), "secret") {
		t.Fatalf("put in another tenant: %+v created=%v err=%v, want a separate new session", ss, created, err)
	}
	got := f.get(sid, "alice")
	if got.Revision != 1 || !sameJSON(t, got.State, `{"secret":"x"}`) || got.MessageCount != 1 || got.Summary != nil {
		t.Fatalf("foreign calls changed the session: %+v %s", got, got.State)
	}
	if list, err := f.svc.ListUser(ctx, f.tenant, "mallory", 10); err != nil || len(list) != 0 {
		t.Fatalf("mallory's list: %v %v", list, err)
	}
}

func testSessionPatchMerge(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{"current_goal":"gift","collected_fields":{"budget":50,"recipient":"sister"},"pending_questions":["age?"]}`, time.Minute)
	ss, err := f.svc.Patch(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"collected_fields":{"budget":80,"recipient":null,"age":30},"pending_questions":null,"current_step":"search"}`))
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	want := `{"current_goal":"gift","collected_fields":{"budget":80,"age":30},"current_step":"search"}`
	if ss.Revision != 2 || !sameJSON(t, ss.State, want) {
		t.Fatalf("patched: rev %d state %s, want rev 2 %s", ss.Revision, ss.State, want)
	}
	if got := f.get(sid, "u"); got.Revision != 2 || !sameJSON(t, got.State, want) {
		t.Fatalf("get after patch: rev %d state %s", got.Revision, got.State)
	}
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 0, json.RawMessage(`{"a":1}`)); !errors.Is(err, session.ErrPreconditionRequired) {
		t.Fatalf("patch without a revision: %v, want ErrPreconditionRequired", err)
	}
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 2, json.RawMessage(`[1]`)); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("non-object patch: %v, want ErrInvalidInput", err)
	}
	if _, err := f.svc.Patch(ctx, f.tenant, newID("missing"), "u", 1, json.RawMessage(`{}`)); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("patch of a missing session: %v, want ErrNotFound", err)
	}
}

func testSessionStalePatch(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{"n":1}`, time.Minute)
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"n":2}`)); err != nil {
		t.Fatalf("patch: %v", err)
	}
	before := f.get(sid, "u")
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"n":3,"x":true}`)); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("stale patch: %v, want ErrPreconditionFailed", err)
	}
	// The store's compare-and-set refuses a stale revision on its own too.
	if _, err := s.SetState(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"n":4}`)); !errors.Is(err, session.ErrPreconditionFailed) {
		t.Fatalf("stale SetState: %v, want ErrPreconditionFailed", err)
	}
	after := f.get(sid, "u")
	if after.Revision != before.Revision || !sameJSON(t, after.State, `{"n":2}`) || !after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Fatalf("stale patch changed the session: %+v %s (before %+v)", after, after.State, before)
	}
}

// testSessionConcurrentPatches runs writers that each add their own fields
// under If-Match with a retry loop: no write may be lost.
func testSessionConcurrentPatches(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	sid := newID("s")
	f.put(sid, "u", `{"base":true}`, time.Minute)
	const writers, fieldsEach = 8, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var conflicts sync.Map
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := t.Context()
			for i := range fieldsEach {
				field := fmt.Sprintf("w%d_%d", w, i)
				for attempt := 0; ; attempt++ {
					if attempt > 500 {
						errs <- fmt.Errorf("%s: gave up after %d attempts", field, attempt)
						return
					}
					cur, err := f.svc.Get(ctx, f.tenant, sid, "u")
					if err != nil {
						errs <- fmt.Errorf("%s: get: %w", field, err)
						return
					}
					_, err = f.svc.Patch(ctx, f.tenant, sid, "u", cur.Revision, json.RawMessage(`{"`+field+`":`+fmt.Sprint(w)+`}`))
					if errors.Is(err, session.ErrPreconditionFailed) {
						conflicts.Store(field, true)
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("%s: patch: %w", field, err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := f.get(sid, "u")
	var state map[string]any
	if err := json.Unmarshal(got.State, &state); err != nil {
		t.Fatalf("decode state: %v", err)
	}
	for w := range writers {
		for i := range fieldsEach {
			if _, ok := state[fmt.Sprintf("w%d_%d", w, i)]; !ok {
				t.Errorf("lost update: field w%d_%d missing from %s", w, i, got.State)
			}
		}
	}
	if want := int64(1 + writers*fieldsEach); got.Revision != want {
		t.Fatalf("revision %d, want %d (one per successful patch)", got.Revision, want)
	}
}

func testSessionAppendAndCap(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{MaxMessages: 5})
	sid := newID("s")
	f.put(sid, "u", `{}`, time.Minute)
	r := f.appendN(sid, "u", 3, 1)
	if r.Trimmed != 0 || r.MessageCount != 3 || len(r.Messages) != 3 || r.Messages[0].Seq != 1 || r.Messages[2].Seq != 3 {
		t.Fatalf("first append: %+v", r)
	}
	r = f.appendN(sid, "u", 4, 4)
	if r.Trimmed != 2 || r.MessageCount != 5 || r.Messages[0].Seq != 4 || r.Messages[3].Seq != 7 {
		t.Fatalf("append over the cap: trimmed %d count %d msgs %+v; want trimmed 2, count 5, seqs 4..7", r.Trimmed, r.MessageCount, r.Messages)
	}
	got := contents(f.messages(sid, "u", session.MessageQuery{Limit: 100}))
	if strings.Join(got, ",") != "m3,m4,m5,m6,m7" {
		t.Fatalf("after trimming: %v, want the 5 newest m3..m7 oldest first", got)
	}
	// One batch larger than the cap keeps only its newest messages.
	r = f.appendN(sid, "u", 7, 8)
	if r.Trimmed != 7 || r.MessageCount != 5 {
		t.Fatalf("batch larger than the cap: %+v, want trimmed 7 count 5", r)
	}
	got = contents(f.messages(sid, "u", session.MessageQuery{Limit: 100}))
	if strings.Join(got, ",") != "m10,m11,m12,m13,m14" {
		t.Fatalf("after a large batch: %v", got)
	}
	ss := f.get(sid, "u")
	if ss.MessageCount != 5 || ss.LastSeq != 14 || ss.Revision != 1 {
		t.Fatalf("session after appends: count %d last seq %d revision %d; want 5, 14, 1 (messages do not bump the revision)", ss.MessageCount, ss.LastSeq, ss.Revision)
	}
}

// testSessionConcurrentAppends checks that appends never lose or duplicate
// a seq, and that the cap holds under concurrency.
func testSessionConcurrentAppends(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{MaxMessages: 30})
	sid := newID("s")
	f.put(sid, "u", `{}`, time.Minute)
	const writers, each = 6, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	trimmed := 0
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := f.svc.Append(t.Context(), f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: fmt.Sprintf("w%d-%d", w, i)}})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				trimmed += res.Trimmed
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ms := f.messages(sid, "u", session.MessageQuery{Limit: 1000})
	if len(ms) != 30 || trimmed != writers*each-30 {
		t.Fatalf("%d messages kept, %d trimmed; want 30 and %d", len(ms), trimmed, writers*each-30)
	}
	for i, m := range ms {
		if m.Seq != int64(writers*each-30+i+1) {
			t.Fatalf("message %d has seq %d: seqs must be the newest, consecutive", i, m.Seq)
		}
		if i > 0 && !m.CreatedAt.After(ms[i-1].CreatedAt) {
			t.Fatalf("created_at not strictly increasing at %d: %v then %v", i, ms[i-1].CreatedAt, m.CreatedAt)
		}
	}
}

// testSessionKeyedAppends: an append retried under its idempotency key
// appends nothing and answers the first one's messages; the key with other
// messages is refused and changes nothing; the cap and a closed session
// are respected, and only the latest MaxAppendKeys keys are remembered.
func testSessionKeyedAppends(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{MaxMessages: 4})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{}`, time.Minute)
	f.appendN(sid, "u", 1, 0)
	msgs := []session.MessageInput{{Role: "user", Content: "pay 42 EUR"}, {Role: "assistant", Content: "done", Metadata: json.RawMessage(`{"tool": "pay"}`)}}
	first, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", msgs, "k-1")
	if err != nil || first.Replayed || len(first.Messages) != 2 || first.Messages[0].Seq != 2 {
		t.Fatalf("first keyed append: %+v %v", first, err)
	}
	// The same messages, metadata spelt with other spacing: a retry.
	retry := []session.MessageInput{msgs[0], {Role: "assistant", Content: "done", Metadata: json.RawMessage(`{"tool":"pay"}`)}}
	again, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", retry, "k-1")
	if err != nil || !again.Replayed || again.Trimmed != 0 || again.MessageCount != 3 {
		t.Fatalf("retried keyed append: %+v %v; want replayed, 3 messages in the session", again, err)
	}
	if len(again.Messages) != 2 || again.Messages[0].Seq != 2 || again.Messages[1].Seq != 3 || again.Messages[1].Content != "done" ||
		!again.Messages[1].CreatedAt.Equal(first.Messages[1].CreatedAt) {
		t.Fatalf("retry answers %+v, want the first append's messages %+v", again.Messages, first.Messages)
	}
	other := []session.MessageInput{{Role: "user", Content: "pay 43 EUR"}}
	if _, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", other, "k-1"); !errors.Is(err, session.ErrIdempotencyMismatch) {
		t.Fatalf("the key with other messages: %v, want ErrIdempotencyMismatch", err)
	}
	if ss := f.get(sid, "u"); ss.LastSeq != 3 || ss.MessageCount != 3 {
		t.Fatalf("after a retry and a mismatch: last seq %d count %d, want 3 and 3 (nothing appended)", ss.LastSeq, ss.MessageCount)
	}
	// Another user's session of the same id and key is not found, not replayed.
	if _, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "v", msgs, "k-1"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("keyed append by another user: %v", err)
	}
	// Once the cap dropped them, a retry answers what is left of them.
	f.appendN(sid, "u", 4, 10)
	gone, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", msgs, "k-1")
	if err != nil || !gone.Replayed || len(gone.Messages) != 0 || gone.MessageCount != 4 {
		t.Fatalf("retry after the cap dropped its messages: %+v %v", gone, err)
	}
	// Only the latest MaxAppendKeys keys are kept: the oldest is forgotten.
	for i := range session.MaxAppendKeys {
		if _, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: fmt.Sprintf("n%d", i)}}, fmt.Sprintf("n-%d", i)); err != nil {
			t.Fatalf("keyed append %d: %v", i, err)
		}
	}
	last := f.get(sid, "u").LastSeq
	if r, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "n1"}}, "n-1"); err != nil || !r.Replayed {
		t.Fatalf("a recent key: %+v %v, want replayed", r, err)
	}
	if r, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", msgs, "k-1"); err != nil || r.Replayed {
		t.Fatalf("a key older than the latest %d: %+v %v, want a new append", session.MaxAppendKeys, r, err)
	}
	if got := f.get(sid, "u").LastSeq; got != last+2 {
		t.Fatalf("last seq %d, want %d", got, last+2)
	}
	// A session closed and created again remembers none of the old keys.
	if _, err := f.svc.Close(ctx, f.tenant, sid, "u"); err != nil {
		t.Fatal(err)
	}
	f.put(sid, "u", `{}`, time.Minute)
	r, err := f.svc.AppendKeyed(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "n1"}}, "n-1")
	if err != nil || r.Replayed || len(r.Messages) != 1 || r.Messages[0].Seq != 1 {
		t.Fatalf("a key of the closed session, in the new one: %+v %v, want a new append at seq 1", r, err)
	}
}

// testSessionConcurrentKeyedAppends: concurrent tries of one keyed append
// append it once; the others replay it.
func testSessionConcurrentKeyedAppends(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	sid := newID("s")
	f.put(sid, "u", `{}`, time.Minute)
	const tries = 8
	var wg sync.WaitGroup
	var replayed, appended atomic.Int32
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.svc.AppendKeyed(t.Context(), f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "once"}}, "same")
			switch {
			case err != nil:
				t.Errorf("keyed append: %v", err)
			case r.Replayed:
				replayed.Add(1)
			default:
				appended.Add(1)
			}
		}()
	}
	wg.Wait()
	if appended.Load() != 1 || replayed.Load() != tries-1 {
		t.Fatalf("%d appended, %d replayed; want 1 and %d", appended.Load(), replayed.Load(), tries-1)
	}
	if ms := f.messages(sid, "u", session.MessageQuery{Limit: 100}); len(ms) != 1 {
		t.Fatalf("%d messages, want 1", len(ms))
	}
}

// testSessionCloseRacingAppends: a close that races appends leaves none of
// their messages behind: the session created again under the id, by
// another user, holds no message of the old one and takes appends.
func testSessionCloseRacingAppends(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	for round := range 10 {
		sid := newID("s")
		f.put(sid, "alice", `{}`, time.Minute)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, err := f.svc.Append(ctx, f.tenant, sid, "alice", []session.MessageInput{{Role: "user", Content: "alice's"}})
				if err != nil && !errors.Is(err, session.ErrNotFound) {
					t.Errorf("append racing a close: %v", err)
				}
			})
		}
		wg.Go(func() {
			if _, err := f.svc.Close(ctx, f.tenant, sid, "alice"); err != nil && !errors.Is(err, session.ErrNotFound) {
				t.Errorf("close racing appends: %v", err)
			}
		})
		wg.Wait()
		_, _ = f.svc.Close(ctx, f.tenant, sid, "alice") // if it ran before the session was written to
		f.put(sid, "bob", `{}`, time.Minute)
		if ms := f.messages(sid, "bob", session.MessageQuery{Limit: 100}); len(ms) != 0 {
			t.Fatalf("round %d: the new session holds %d messages of the closed one: %+v", round, len(ms), ms)
		}
		if res := f.appendN(sid, "bob", 2, 0); res.Messages[0].Seq != 1 {
			t.Fatalf("round %d: bob's first append got seq %d, want 1", round, res.Messages[0].Seq)
		}
	}
}

func testSessionMessageQueries(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{}`, time.Minute)
	res, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{
		{Role: "user", Content: "hello", Metadata: json.RawMessage(`{"lang":"en","n":1}`)},
		{Role: "assistant", Content: "hi, how can I help?"},
	})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	f.appendN(sid, "u", 8, 3)
	all := f.messages(sid, "u", session.MessageQuery{Limit: 100})
	if len(all) != 10 || all[0].Role != "user" || all[0].Content != "hello" || all[1].Role != "assistant" {
		t.Fatalf("all messages: %+v", all)
	}
	if !sameJSON(t, all[0].Metadata, `{"lang":"en","n":1}`) || len(all[1].Metadata) != 0 {
		t.Fatalf("metadata round trip: %s / %s", all[0].Metadata, all[1].Metadata)
	}
	if !all[0].CreatedAt.Equal(res.Messages[0].CreatedAt) || all[0].Seq != res.Messages[0].Seq {
		t.Fatalf("stored message %+v differs from append result %+v", all[0], res.Messages[0])
	}
	latest := contents(f.messages(sid, "u", session.MessageQuery{Limit: 3}))
	if strings.Join(latest, ",") != "m8,m9,m10" {
		t.Fatalf("latest 3: %v", latest)
	}
	since := f.messages(sid, "u", session.MessageQuery{Since: all[6].CreatedAt, Limit: 100})
	if strings.Join(contents(since), ",") != "m8,m9,m10" {
		t.Fatalf("since the 7th message: %v, want the 3 after it", contents(since))
	}
	after := f.messages(sid, "u", session.MessageQuery{AfterSeq: 8, Limit: 1})
	if len(after) != 1 || after[0].Seq != 10 {
		t.Fatalf("after seq 8, limit 1: %+v, want seq 10 (the latest)", after)
	}
	if none := f.messages(sid, "u", session.MessageQuery{AfterSeq: 10}); len(none) != 0 {
		t.Fatalf("after the last seq: %+v", none)
	}
}

func testSessionSummary(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{"a":1}`, time.Minute)
	f.appendN(sid, "u", 4, 1)
	// A summary through a message that does not exist is refused and
	// leaves the slot empty.
	if _, err := f.svc.SetSummary(ctx, f.tenant, sid, "u", session.Summary{Text: "ahead", ThroughSeq: 5}); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("summary through seq 5 of 4: %v, want ErrInvalidInput", err)
	}
	if got := f.get(sid, "u"); got.Summary != nil {
		t.Fatalf("refused summary stored: %+v", got.Summary)
	}
	ss, err := f.svc.SetSummary(ctx, f.tenant, sid, "u", session.Summary{Text: "user wants a gift", Data: json.RawMessage(`{"budget_eur":50}`), ThroughSeq: 4})
	if err != nil {
		t.Fatalf("set summary: %v", err)
	}
	if ss.Summary == nil || ss.Summary.Text != "user wants a gift" || ss.Summary.ThroughSeq != 4 || ss.Summary.UpdatedAt.IsZero() {
		t.Fatalf("summary in reply: %+v", ss.Summary)
	}
	if ss.Revision != 1 || !sameJSON(t, ss.State, `{"a":1}`) {
		t.Fatalf("summary changed revision or state: %d %s", ss.Revision, ss.State)
	}
	got := f.get(sid, "u")
	if got.Summary == nil || got.Summary.Text != "user wants a gift" || !sameJSON(t, got.Summary.Data, `{"budget_eur":50}`) || !got.Summary.UpdatedAt.Equal(ss.Summary.UpdatedAt) {
		t.Fatalf("summary after get: %+v", got.Summary)
	}
}

func testSessionClose(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{"current_step":"pay","collected_fields":{"order":"A-1"}}`, time.Minute)
	f.appendN(sid, "u", 3, 1)
	final, err := f.svc.Close(ctx, f.tenant, sid, "u")
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	if !sameJSON(t, final.State, `{"current_step":"pay","collected_fields":{"order":"A-1"}}`) || final.MessageCount != 3 || final.Revision != 1 {
		t.Fatalf("final session: %+v %s", final, final.State)
	}
	if _, err := f.svc.Get(ctx, f.tenant, sid, "u"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("get after close: %v", err)
	}
	if _, err := f.svc.Messages(ctx, f.tenant, sid, "u", session.MessageQuery{}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("messages after close: %v", err)
	}
	if _, err := f.svc.Close(ctx, f.tenant, sid, "u"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("second close: %v", err)
	}
	if list, _ := f.svc.ListUser(ctx, f.tenant, "u", 10); len(list) != 0 {
		t.Fatalf("closed session still listed: %+v", list)
	}
	again := f.put(sid, "u", `{}`, time.Minute)
	if again.Revision != 1 || again.MessageCount != 0 || again.LastSeq != 0 {
		t.Fatalf("recreated session carries old data: %+v", again)
	}
	if ms := f.messages(sid, "u", session.MessageQuery{}); len(ms) != 0 {
		t.Fatalf("recreated session has old messages: %+v", ms)
	}
}

func testSessionListByUser(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	a, b, c, short, closed := newID("a"), newID("b"), newID("c"), newID("short"), newID("closed")
	f.put(a, "u", `{}`, time.Minute)
	f.put(b, "u", `{}`, time.Minute)
	f.put(short, "u", `{}`, sessionShortTTL)
	f.put(closed, "u", `{}`, time.Minute)
	f.put(c, "other", `{}`, time.Minute)
	if _, err := f.svc.Close(ctx, f.tenant, closed, "u"); err != nil {
		t.Fatalf("close: %v", err)
	}
	time.Sleep(afterSessionTTL) // real TTL expiry of `short`
	f.appendN(a, "u", 1, 0)     // a becomes the most recently active
	list, err := f.svc.ListUser(ctx, f.tenant, "u", 10)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var ids []string
	for _, ss := range list {
		ids = append(ids, ss.SessionID)
		if ss.UserID != "u" || ss.TenantID != f.tenant {
			t.Fatalf("listed a foreign session: %+v", ss)
		}
	}
	if strings.Join(ids, ",") != a+","+b {
		t.Fatalf("live sessions of u: %v, want [%s %s] (most recently active first)", ids, a, b)
	}
	if one, _ := f.svc.ListUser(ctx, f.tenant, "u", 1); len(one) != 1 || one[0].SessionID != a {
		t.Fatalf("limit 1: %+v", one)
	}
	// The same user id in another tenant sees none of them.
	if list, _ := f.svc.ListUser(ctx, newTenant(), "u", 10); len(list) != 0 {
		t.Fatalf("another tenant lists %+v", list)
	}
	// A session recreated by another user leaves u's list.
	if _, err := f.svc.Close(ctx, f.tenant, b, "u"); err != nil {
		t.Fatalf("close b: %v", err)
	}
	f.put(b, "other", `{}`, time.Minute)
	if list, _ := f.svc.ListUser(ctx, f.tenant, "u", 10); len(list) != 1 || list[0].SessionID != a {
		t.Fatalf("after b changed hands: %+v", list)
	}
}

func testSessionExpiry(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	ss := f.put(sid, "u", `{"a":1}`, sessionShortTTL)
	f.appendN(sid, "u", 2, 0)
	if _, err := f.svc.SetSummary(ctx, f.tenant, sid, "u", session.Summary{Text: "s"}); err != nil {
		t.Fatalf("summary: %v", err)
	}
	time.Sleep(afterSessionTTL) // real TTL expiry, no activity
	checks := map[string]error{}
	_, checks["get"] = f.svc.Get(ctx, f.tenant, sid, "u")
	_, checks["patch"] = f.svc.Patch(ctx, f.tenant, sid, "u", ss.Revision, json.RawMessage(`{"b":2}`))
	_, checks["append"] = f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "late"}})
	_, checks["messages"] = f.svc.Messages(ctx, f.tenant, sid, "u", session.MessageQuery{})
	_, checks["summary"] = f.svc.SetSummary(ctx, f.tenant, sid, "u", session.Summary{Text: "late"})
	_, checks["close"] = f.svc.Close(ctx, f.tenant, sid, "u")
	_, checks["store get"] = s.Get(ctx, f.tenant, sid, "u")
	_, checks["store messages"] = s.Messages(ctx, f.tenant, sid, "u", session.MessageQuery{Limit: 10})
	for name, err := range checks {
		if !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s after expiry: %v, want ErrNotFound", name, err)
		}
	}
	if list, err := f.svc.ListUser(ctx, f.tenant, "u", 10); err != nil || len(list) != 0 {
		t.Errorf("list after expiry: %+v %v", list, err)
	}
	// Putting the id again starts a new session with nothing of the old one.
	again, created, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u2", State: json.RawMessage(`{}`), TTL: time.Minute})
	if err != nil || !created || again.Revision != 1 || again.MessageCount != 0 || again.Summary != nil {
		t.Fatalf("put after expiry: %+v created=%v err=%v", again, created, err)
	}
	if ms := f.messages(sid, "u2", session.MessageQuery{}); len(ms) != 0 {
		t.Fatalf("new session sees expired messages: %+v", ms)
	}
}

func testSessionSlidingTTL(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	// A loaded machine can stall between two calls for longer than a short
	// TTL; a round whose timing went past what it tests proves nothing and
	// runs again with a longer TTL. A wrong answer in time fails at once.
	for ttl := 400 * time.Millisecond; ttl <= 6400*time.Millisecond; ttl *= 4 {
		if slidingTTLRound(t, f, ttl) {
			return
		}
		t.Logf("sliding TTL: the machine stalled past a %v TTL; again with a longer one", ttl)
	}
	t.Fatal("sliding TTL: every round stalled past its TTL")
}

// slidingTTLRound is one round of the sliding TTL test; false when it
// could not judge.
func slidingTTLRound(t *testing.T, f *sfx, ttl time.Duration) bool {
	ctx := t.Context()
	sid := newID("s")
	first := f.put(sid, "u", `{}`, ttl)
	time.Sleep(ttl * 5 / 8)
	sent := time.Now()
	res, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "m0"}}) // activity slides the expiry
	if time.Since(first.LastActivityAt) >= ttl {
		return false // the append may have come after the first expiry
	}
	if err != nil {
		t.Fatalf("append %v after the put with a %v ttl: %v", time.Since(first.LastActivityAt), ttl, err)
	}
	if !res.ExpiresAt.After(first.ExpiresAt) {
		t.Fatalf("append did not slide the expiry: %v then %v", first.ExpiresAt, res.ExpiresAt)
	}
	time.Sleep(time.Until(first.ExpiresAt) + ttl/8) // past the first expiry: alive only thanks to the slide
	got, err := f.svc.Get(ctx, f.tenant, sid, "u")
	if err != nil {
		if time.Since(sent) >= ttl {
			return false
		}
		t.Fatalf("get %v after activity with a %v ttl: %v", time.Since(sent), ttl, err)
	}
	if !got.ExpiresAt.Equal(res.ExpiresAt) || got.LastActivityAt.Before(first.LastActivityAt) {
		t.Fatalf("reads must not slide: expiry %v, want %v", got.ExpiresAt, res.ExpiresAt)
	}
	time.Sleep(time.Until(res.ExpiresAt) + ttl/4) // idle past the TTL
	if _, err := f.svc.Get(ctx, f.tenant, sid, "u"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("get after idling past the ttl: %v", err)
	}
	return true
}

func testSessionLimits(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{MaxStateBytes: 200, MaxMessageBytes: 100, MaxAppendBatch: 3})
	ctx := t.Context()
	sid := newID("s")
	big := `{"x":"` + strings.Repeat("a", 250) + `"}`
	if _, _, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u", State: json.RawMessage(big)}); !errors.Is(err, session.ErrStateTooLarge) {
		t.Fatalf("oversized state: %v, want ErrStateTooLarge", err)
	}
	f.put(sid, "u", `{"n":1}`, time.Minute)
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"y":"`+strings.Repeat("b", 195)+`"}`)); !errors.Is(err, session.ErrStateTooLarge) {
		t.Fatalf("patch growing the state past the limit: %v, want ErrStateTooLarge", err)
	}
	if _, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: strings.Repeat("c", 101)}}); !errors.Is(err, session.ErrMessageTooLarge) {
		t.Fatalf("oversized message: %v, want ErrMessageTooLarge", err)
	}
	if _, err := f.svc.Append(ctx, f.tenant, sid, "u", make([]session.MessageInput, 4)); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("batch over the limit: %v, want ErrInvalidInput", err)
	}
	if _, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "a\x00b"}}); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("a NUL in a message: %v, want ErrInvalidInput", err)
	}
	if _, err := f.svc.SetSummary(ctx, f.tenant, sid, "u", session.Summary{Text: "a\x00b"}); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("a NUL in the summary: %v, want ErrInvalidInput", err)
	}
	if _, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "", Content: "x"}}); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("message without a role: %v, want ErrInvalidInput", err)
	}
	for _, meta := range []string{"", "null", "{}", " { } "} {
		if _, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Metadata: json.RawMessage(meta)}}); !errors.Is(err, session.ErrInvalidInput) {
			t.Fatalf("message with neither content nor metadata (%q): %v, want ErrInvalidInput", meta, err)
		}
	}
	if _, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: "user", Content: "x", Metadata: json.RawMessage(`[1]`)}}); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("non-object metadata: %v, want ErrInvalidInput", err)
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"a":`, `{} {}`} {
		if _, _, err := f.svc.Put(ctx, f.tenant, newID("s"), session.PutRequest{UserID: "u", State: json.RawMessage(bad)}); !errors.Is(err, session.ErrInvalidInput) {
			t.Errorf("state %s: %v, want ErrInvalidInput", bad, err)
		}
	}
	for _, id := range []string{"", "a b", "a/b", strings.Repeat("x", session.MaxIDLength+1)} {
		if _, err := f.svc.Get(ctx, f.tenant, id, "u"); !errors.Is(err, session.ErrInvalidInput) {
			t.Errorf("session id %q: %v, want ErrInvalidInput", id, err)
		}
	}
	for _, ttl := range []time.Duration{time.Millisecond, 8 * 24 * time.Hour} {
		if _, _, err := f.svc.Put(ctx, f.tenant, newID("s"), session.PutRequest{UserID: "u", TTL: ttl}); !errors.Is(err, session.ErrInvalidInput) {
			t.Errorf("ttl %v: %v, want ErrInvalidInput", ttl, err)
		}
	}
	if got := f.get(sid, "u"); got.Revision != 1 || got.MessageCount != 0 {
		t.Fatalf("refused writes changed the session: %+v", got)
	}
}

func testSessionSchema(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	schema := `{"type":"object","properties":{"current_step":{"enum":["start","pay"]},"email":{"type":"string"}},"required":["current_step"]}`
	if err := f.svc.RegisterSchema("shop", []byte(schema)); err != nil {
		t.Fatalf("register schema: %v", err)
	}
	sid := newID("s")
	if _, _, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u", App: "shop", State: json.RawMessage(`{"current_step":"fly"}`)}); !errors.Is(err, session.ErrSchemaValidation) {
		t.Fatalf("state violating the schema: %v, want ErrSchemaValidation", err)
	}
	ss, _, err := f.svc.Put(ctx, f.tenant, sid, session.PutRequest{UserID: "u", App: "shop", State: json.RawMessage(`{"current_step":"start"}`)})
	if err != nil || ss.App != "shop" {
		t.Fatalf("valid state: %+v %v", ss, err)
	}
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"current_step":null}`)); !errors.Is(err, session.ErrSchemaValidation) {
		t.Fatalf("patch removing a required field: %v, want ErrSchemaValidation", err)
	}
	if _, err := f.svc.Patch(ctx, f.tenant, sid, "u", 1, json.RawMessage(`{"current_step":"pay"}`)); err != nil {
		t.Fatalf("valid patch: %v", err)
	}
	// Sessions of other apps are not held to it.
	f.put(newID("s"), "u", `{"anything":1}`, time.Minute)
	if err := f.svc.RegisterSchema("bad", []byte(`{"type":`)); err == nil {
		t.Fatal("a malformed schema was accepted")
	}
}

// testSessionRedaction checks that personal data in state, messages and the
// summary is replaced by vault references and that the vault resolves them.
func testSessionRedaction(t *testing.T, s session.Store) {
	vs, ok := s.(pii.Store)
	if !ok {
		t.Fatalf("%T does not implement pii.Store; every session backend keeps the vault", s)
	}
	vault, err := pii.NewVault(vs, pii.VaultOptions{})
	if err != nil {
		t.Fatalf("vault: %v", err)
	}
	f := newSfx(t, s, session.Options{Redactor: vault})
	ctx := t.Context()
	const email, card, iban = "jane.doe@example.com", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00"
	sid := newID("s")
	ss := f.put(sid, "u", `{"collected_fields":{"email":"`+email+`","note":"no pii"},"`+email+`":true}`, time.Minute)
	if strings.Contains(string(ss.State), email) || !strings.Contains(string(ss.State), "no pii") {
		t.Fatalf("state kept the raw e-mail or lost plain text: %s", ss.State)
	}
	res, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{
		Role: "user", Content: "my card is " + card + " and mail " + email,
		Metadata: json.RawMessage(`{"iban":"` + iban + `"}`),
	}})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	stored := f.messages(sid, "u", session.MessageQuery{})
	if len(stored) != 1 {
		t.Fatalf("%d messages", len(stored))
	}
	m := stored[0]
	for _, raw := range []string{email, card, "4111111111111111", iban} {
		if strings.Contains(m.Content, raw) || strings.Contains(string(m.Metadata), raw) || strings.Contains(string(f.get(sid, "u").State), raw) {
			t.Fatalf("raw value %q stored: %q %s", raw, m.Content, m.Metadata)
		}
	}
	if m.Content != res.Messages[0].Content {
		t.Fatalf("append result %q differs from stored %q", res.Messages[0].Content, m.Content)
	}
	fs := pii.Detect(m.Content+" "+string(m.Metadata), pii.AllKinds)
	if len(fs) != 0 {
		t.Fatalf("stored message still has personal data: %+v", fs)
	}
	refs := refPattern(m.Content + " " + string(m.Metadata))
	if len(refs) != 3 {
		t.Fatalf("want 3 references in %q %s, got %v", m.Content, m.Metadata, refs)
	}
	want := map[string]string{"card": card, "email": email, "iban": iban}
	for _, ref := range refs {
		r, err := vault.Resolve(ctx, f.tenant, ref)
		if err != nil {
			t.Fatalf("resolve %s: %v", ref, err)
		}
		if r.Value != want[string(r.Kind)] {
			t.Fatalf("resolve %s = %q, want %q", ref, r.Value, want[string(r.Kind)])
		}
		if _, err := vault.Resolve(ctx, newTenant(), ref); !errors.Is(err, pii.ErrNotFound) {
			t.Fatalf("resolve %s in another tenant: %v, want ErrNotFound", ref, err)
		}
	}
	// A patch with a new value is redacted; existing references stay as they are.
	cur := f.get(sid, "u")
	p, err := f.svc.Patch(ctx, f.tenant, sid, "u", cur.Revision, json.RawMessage(`{"phone":"+33 6 12 34 56 78"}`))
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	if strings.Contains(string(p.State), "+33 6 12 34 56 78") || !strings.Contains(string(p.State), "pii:phone:") {
		t.Fatalf("patched state: %s", p.State)
	}
	for _, ref := range refPattern(string(cur.State)) {
		if !strings.Contains(string(p.State), ref) {
			t.Fatalf("patch rewrote existing reference %s: %s", ref, p.State)
		}
	}
	sum, err := f.svc.SetSummary(ctx, f.tenant, sid, "u", session.Summary{Text: "customer " + email})
	if err != nil || strings.Contains(sum.Summary.Text, email) {
		t.Fatalf("summary: %+v %v", sum.Summary, err)
	}
	// A card number written as a JSON number, and a role that holds an
	// address, are redacted too; a long number that is no card (a time in
	// milliseconds) stays a number.
	cur = f.get(sid, "u")
	p, err = f.svc.Patch(ctx, f.tenant, sid, "u", cur.Revision, json.RawMessage(`{"card_n":4111111111111111,"at_ms":1764770000000}`))
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	if st := string(p.State); strings.Contains(st, "4111111111111111") || !strings.Contains(st, `"card_n":"pii:card:`) || !strings.Contains(st, `"at_ms":1764770000000`) {
		t.Fatalf("patched state with numbers: %s", st)
	}
	if _, err := f.svc.Append(ctx, f.tenant, sid, "u", []session.MessageInput{{Role: email, Content: "hi"}}); err != nil {
		t.Fatalf("append: %v", err)
	}
	for _, m := range f.messages(sid, "u", session.MessageQuery{}) {
		if strings.Contains(m.Role, email) {
			t.Fatalf("role stored raw: %q", m.Role)
		}
	}
}

func refPattern(s string) []string {
	var out []string
	for _, f := range strings.Fields(strings.NewReplacer(`"`, " ", `{`, " ", `}`, " ", `,`, " ").Replace(s)) {
		if _, _, err := pii.ParseRef(strings.Trim(f, ":")); err == nil {
			out = append(out, strings.Trim(f, ":"))
		}
	}
	return out
}

// testSessionListPages pages through a user's sessions with cursors: every
// live session once, in the listing order, items without documents.
func testSessionListPages(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("p%d-%s", i, newID(""))
		f.put(id, "u", `{"big":"`+strings.Repeat("x", 100)+`"}`, time.Minute)
		if _, err := f.svc.SetSummary(ctx, f.tenant, id, "u", session.Summary{Text: "sum"}); err != nil {
			t.Fatalf("summary: %v", err)
		}
		want = append([]string{id}, want...) // the latest activity comes first
	}
	f.put(newID("foreign"), "other", `{}`, time.Minute)
	// A limit past the maximum is refused, as every list refuses it, not cut.
	if _, _, err := f.svc.ListUserPage(ctx, f.tenant, "u", "", session.MaxListLimit+1); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("sessions limit over the maximum: %v, want ErrInvalidInput", err)
	}
	if _, _, err := f.svc.MessagePage(ctx, f.tenant, want[0], "u", session.MessageQuery{Limit: session.MaxListLimit + 1}, ""); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("messages limit over the maximum: %v, want ErrInvalidInput", err)
	}
	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := f.svc.ListUserPage(ctx, f.tenant, "u", cursor, 3)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if len(page) > 3 {
			t.Fatalf("page %d has %d items, limit 3", pages, len(page))
		}
		for _, ss := range page {
			if ss.State != nil || ss.Summary != nil {
				t.Fatalf("list item carries documents: state %s summary %+v", ss.State, ss.Summary)
			}
			if ss.UserID != "u" || ss.TenantID != f.tenant || ss.Revision != 1 || ss.TTL != time.Minute || ss.ExpiresAt.IsZero() {
				t.Fatalf("list item: %+v", ss)
			}
			got = append(got, ss.SessionID)
		}
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatalf("paging does not end: %v", got)
		}
		cursor = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Fatalf("paged %v in %d pages, want %v in 3", got, pages, want)
	}
	for _, bad := range []string{"nope", "e30", "eyJrIjoibSIsImIiOjF9"} { // garbage, {}, a message cursor
		if _, _, err := f.svc.ListUserPage(ctx, f.tenant, "u", bad, 3); !errors.Is(err, session.ErrInvalidInput) {
			t.Errorf("cursor %q: %v, want ErrInvalidInput", bad, err)
		}
	}
}

// testSessionMessagePages pages from the newest messages to the oldest.
func testSessionMessagePages(t *testing.T, s session.Store) {
	f := newSfx(t, s, session.Options{})
	ctx := t.Context()
	sid := newID("s")
	f.put(sid, "u", `{}`, time.Minute)
	f.appendN(sid, "u", 10, 1)
	var pages [][]string
	cursor := ""
	for len(pages) < 6 {
		ms, next, err := f.svc.MessagePage(ctx, f.tenant, sid, "u", session.MessageQuery{Limit: 4, AfterSeq: 1}, cursor)
		if err != nil {
			t.Fatalf("page %d: %v", len(pages), err)
		}
		pages = append(pages, contents(ms))
		if next == "" {
			break
		}
		cursor = next
	}
	if fmt.Sprint(pages) != "[[m7 m8 m9 m10] [m3 m4 m5 m6] [m2]]" {
		t.Fatalf("pages %v, want the newest four first, down to seq 2 (after_seq 1)", pages)
	}
	if _, _, err := f.svc.MessagePage(ctx, f.tenant, sid, "u", session.MessageQuery{}, "bad!"); !errors.Is(err, session.ErrInvalidInput) {
		t.Fatalf("malformed cursor: %v, want ErrInvalidInput", err)
	}
	if ms, next, err := f.svc.MessagePage(ctx, f.tenant, sid, "u", session.MessageQuery{Limit: 10}, ""); err != nil || len(ms) != 10 || next != "" {
		t.Fatalf("a page holding everything: %d messages, next %q, %v", len(ms), next, err)
	}
}

// PIIVaultSuite checks a pii.Store: tenant scoping, retention expiry and deletion.
func PIIVaultSuite(t *testing.T, open func(t *testing.T) pii.Store) {
	t.Run("ProtectResolve", func(t *testing.T) {
		st := open(t)
		key := []byte("0123456789abcdef0123456789abcdef")
		v, err := pii.NewVault(st, pii.VaultOptions{Key: key})
		if err != nil {
			t.Fatalf("vault: %v", err)
		}
		ctx := t.Context()
		tenant := newTenant()
		out, err := v.Protect(ctx, tenant, []string{"mail a@b.io twice: a@b.io", "nothing here", "card 5500 0000 0000 0004"})
		if err != nil {
			t.Fatalf("protect: %v", err)
		}
		if out[1] != "nothing here" || strings.Contains(out[0], "a@b.io") || strings.Contains(out[2], "5500") {
			t.Fatalf("protected: %q", out)
		}
		refs := refPattern(out[0])
		if len(refs) != 2 || refs[0] != refs[1] {
			t.Fatalf("one value twice in one call must get one reference: %v", refs)
		}
		r, err := v.Resolve(ctx, tenant, refs[0])
		if err != nil || r.Value != "a@b.io" || r.Kind != pii.KindEmail {
			t.Fatalf("resolve: %+v %v", r, err)
		}
		_, id, _ := pii.ParseRef(refs[0])
		rec, err := st.GetRecord(ctx, tenant, id)
		if err != nil || strings.Contains(string(rec.Sealed), "a@b.io") {
			t.Fatalf("raw record with a key configured must be sealed: %q %v", rec.Sealed, err)
		}
		if _, err := st.GetRecord(ctx, newTenant(), id); !errors.Is(err, pii.ErrNotFound) {
			t.Fatalf("record in another tenant: %v", err)
		}
		other, _ := pii.NewVault(st, pii.VaultOptions{Key: []byte("fedcba9876543210fedcba9876543210")})
		if _, err := other.Resolve(ctx, tenant, refs[0]); err == nil {
			t.Fatal("a vault with another key decrypted the value")
		}
		if err := v.Forget(ctx, tenant, refs[0]); err != nil {
			t.Fatalf("forget: %v", err)
		}
		if _, err := v.Resolve(ctx, tenant, refs[0]); !errors.Is(err, pii.ErrNotFound) {
			t.Fatalf("resolve after forget: %v", err)
		}
		if _, err := v.Resolve(ctx, tenant, "pii:email:nope"); !errors.Is(err, pii.ErrInvalidRef) {
			t.Fatalf("malformed ref: %v", err)
		}
	})
	t.Run("Retention", func(t *testing.T) {
		st := open(t)
		v, _ := pii.NewVault(st, pii.VaultOptions{Retention: sessionShortTTL})
		ctx := t.Context()
		tenant := newTenant()
		out, err := v.Protect(ctx, tenant, []string{"x@y.org"})
		if err != nil {
			t.Fatalf("protect: %v", err)
		}
		if _, err := v.Resolve(ctx, tenant, out[0]); err != nil {
			t.Fatalf("resolve before retention ends: %v", err)
		}
		time.Sleep(afterSessionTTL) // real retention expiry
		if _, err := v.Resolve(ctx, tenant, out[0]); !errors.Is(err, pii.ErrNotFound) {
			t.Fatalf("resolve after retention: %v, want ErrNotFound", err)
		}
	})
	t.Run("Disabled", func(t *testing.T) {
		v, _ := pii.NewVault(open(t), pii.VaultOptions{Redactor: pii.NewRedactor(pii.Options{Disabled: true})})
		out, err := v.Protect(t.Context(), newTenant(), []string{"x@y.org"})
		if err != nil || out[0] != "x@y.org" {
			t.Fatalf("disabled redaction changed text: %q %v", out, err)
		}
	})
}
