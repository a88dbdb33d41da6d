package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
)

// MemoryStoreSuite checks that a memory.Store honours the contract in
// memory/store.go. open is called once per subtest and must return a store
// usable until t's cleanup; subtests use random tenants, so a backend may
// share one database.
func MemoryStoreSuite(t *testing.T, open func(t *testing.T) memory.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s memory.Store)
	}{
		{"InsertGet", testMemInsertGet},
		{"Supersede", testMemSupersede},
		{"OneCurrentPerKey", testMemOneCurrent},
		{"ConcurrentInsertsOneWins", testMemConcurrentInserts},
		{"ConcurrentSupersedesOneWins", testMemConcurrentSupersedes},
		{"TombstoneBlocksInsert", testMemTombstone},
		{"TombstoneLegacyDigest", testMemTombstoneLegacy},
		{"ListFilters", testMemListFilters},
		{"ListAsOf", testMemListAsOf},
		{"ListPages", testMemListPages},
		{"Transitions", testMemTransitions},
		{"Refresh", testMemRefresh},
		{"Forget", testMemForget},
		{"SearchText", testMemSearchText},
		{"SearchPastExpiredHits", testMemSearchPastExpired},
		{"Vectors", testMemVectors},
		{"SubjectVersion", testMemSubjectVersion},
		{"Changes", testMemChanges},
		{"Namespaces", testMemNamespaces},
		{"Unconsented", testMemUnconsented},
		{"PersonalRefusesUnconsented", testMemPersonalRefusesUnconsented},
		{"TenantIsolation", testMemTenantIsolation},
		{"InsertBatch", testMemInsertBatch},
		{"ChangesAndGet", testMemChangesAndGet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

// mfx bundles a memory store, one tenant and one subject, and a clock that
// moves one millisecond per claim so creation order is the order of writes.
type mfx struct {
	t       *testing.T
	s       memory.Store
	tenant  string
	subject string
	base    time.Time
	n       int
}

func newMfx(t *testing.T, s memory.Store) *mfx {
	return &mfx{t: t, s: s, tenant: newTenant(), subject: newID("subj"),
		base: time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)}
}

// other is a fixture on the same store for another subject of the tenant.
func (f *mfx) other() *mfx {
	return &mfx{t: f.t, s: f.s, tenant: f.tenant, subject: newID("subj"), base: f.base, n: f.n + 1000}
}

// otherTenant is a fixture for the same subject id in another tenant.
func (f *mfx) otherTenant() *mfx {
	return &mfx{t: f.t, s: f.s, tenant: newTenant(), subject: f.subject, base: f.base, n: f.n + 2000}
}

func (f *mfx) tick() time.Time {
	f.n++
	return f.base.Add(time.Duration(f.n) * time.Millisecond)
}

// claim builds a current claim; value is JSON.
func (f *mfx) claim(ns, key, value, text string) memory.Claim {
	at := f.tick()
	return memory.Claim{
		MemoryID: newID("mem"), TenantID: f.tenant, SubjectID: f.subject,
		Namespace: ns, Key: key, Value: json.RawMessage(value), SchemaVersion: 1,
		Text: text, Category: "preference",
		Provenance: memory.Provenance{SourceType: memory.SourceMessage, SourceID: "msg-1", RunID: "run-1",
			EventSeq: 3, MessageIDs: []string{"m1", "m2"}, ValidatedBy: memory.ValidatedUserStated, Extractor: "rules/1"},
		Confidence: 0.9, ValidFrom: at, Status: memory.StatusCurrent, ConsentBasis: "contract",
		ValueDigest: memory.ValueDigest(ns, key, json.RawMessage(value)),
		CreatedAt:   at, ConfirmedAt: at,
	}
}

func (f *mfx) insert(c memory.Claim, supersede string, vec *memory.Vector) memory.Claim {
	f.t.Helper()
	got, err := f.s.Insert(f.t.Context(), memory.InsertParams{Claim: c, Supersede: supersede, SupersededAt: c.ValidFrom, Vector: vec})
	if err != nil {
		f.t.Fatalf("insert %s %s/%s: %v", c.MemoryID, c.Namespace, c.Key, err)
	}
	return got
}

func (f *mfx) add(ns, key, value, text string) memory.Claim {
	f.t.Helper()
	return f.insert(f.claim(ns, key, value, text), "", nil)
}

func (f *mfx) get(id string) memory.Claim {
	f.t.Helper()
	c, err := f.s.Get(f.t.Context(), f.tenant, id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return c
}

func (f *mfx) version() int64 {
	f.t.Helper()
	v, err := f.s.SubjectVersion(f.t.Context(), f.tenant, f.subject)
	if err != nil {
		f.t.Fatalf("subject version: %v", err)
	}
	return v
}

func (f *mfx) projections() int {
	f.t.Helper()
	n, err := f.s.ProjectionRows(f.t.Context(), f.tenant, f.subject)
	if err != nil {
		f.t.Fatalf("projection rows: %v", err)
	}
	return n
}

func (f *mfx) list(q memory.ListQuery) []memory.Claim {
	f.t.Helper()
	q.TenantID, q.SubjectID = f.tenant, f.subject
	cs, err := f.s.List(f.t.Context(), q)
	if err != nil {
		f.t.Fatalf("list %+v: %v", q, err)
	}
	return cs
}

func (f *mfx) search(ns string, limit int, terms ...string) []memory.Scored {
	f.t.Helper()
	hits, err := f.s.SearchText(f.t.Context(), memory.TextQuery{TenantID: f.tenant, SubjectID: f.subject,
		Namespace: ns, Terms: terms, Limit: limit, Now: time.Now()})
	if err != nil {
		f.t.Fatalf("search %v: %v", terms, err)
	}
	return hits
}

func vec(model string, vals ...float32) *memory.Vector {
	return &memory.Vector{Model: model, Values: vals}
}

func ids(cs []memory.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.MemoryID
	}
	return out
}

func hitIDs(hs []memory.Scored) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.MemoryID
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func timePtrEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// checkClaim fails t unless got is want as stored (values compared as JSON,
// times as instants, Version not compared).
func checkClaim(t *testing.T, got, want memory.Claim) {
	t.Helper()
	var gv, wv any
	if err := json.Unmarshal(got.Value, &gv); err != nil {
		t.Fatalf("claim %s: stored value %q is not JSON: %v", got.MemoryID, got.Value, err)
	}
	_ = json.Unmarshal(want.Value, &wv)
	g, w := got, want
	g.Value, w.Value, g.Version, w.Version = nil, nil, 0, 0
	for _, p := range []struct {
		name string
		ok   bool
	}{
		{"value", reflect.DeepEqual(gv, wv)},
		{"valid_from", g.ValidFrom.Equal(w.ValidFrom)},
		{"created_at", g.CreatedAt.Equal(w.CreatedAt)},
		{"confirmed_at", g.ConfirmedAt.Equal(w.ConfirmedAt)},
		{"expires_at", timePtrEqual(g.ExpiresAt, w.ExpiresAt)},
		{"invalidated_at", timePtrEqual(g.InvalidatedAt, w.InvalidatedAt)},
		{"superseded_at", timePtrEqual(g.SupersededAt, w.SupersededAt)},
		{"provenance", reflect.DeepEqual(g.Provenance, w.Provenance)},
	} {
		if !p.ok {
			t.Fatalf("claim %s: %s differs:\n got %+v\nwant %+v", got.MemoryID, p.name, got, want)
		}
	}
	g.ValidFrom, g.CreatedAt, g.ConfirmedAt, g.ExpiresAt, g.InvalidatedAt, g.SupersededAt = time.Time{}, time.Time{}, time.Time{}, nil, nil, nil
	w.ValidFrom, w.CreatedAt, w.ConfirmedAt, w.ExpiresAt, w.InvalidatedAt, w.SupersededAt = time.Time{}, time.Time{}, time.Time{}, nil, nil, nil
	g.Provenance, w.Provenance = memory.Provenance{}, memory.Provenance{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("claim %s differs:\n got %+v\nwant %+v", got.MemoryID, got, want)
	}
}

func testMemInsertGet(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	c := f.claim("prefs", "food.diet", `{"diet": "vegetarian", "strict": true}`, "diet: vegetarian")
	exp := f.base.Add(48 * time.Hour)
	c.ExpiresAt = &exp
	got := f.insert(c, "", nil)
	if got.Version <= 0 {
		t.Fatalf("inserted claim has version %d", got.Version)
	}
	checkClaim(t, got, c)
	checkClaim(t, f.get(c.MemoryID), c)
	// Insert answers the claim as a read gives it back, version included.
	if g := f.get(c.MemoryID); !reflect.DeepEqual(g, got) {
		t.Fatalf("insert answered %+v, a read gives %+v", got, g)
	}

	// Every status can be inserted and read back.
	held := f.claim("prefs", "health.allergy", `"peanuts"`, "allergy: peanuts")
	held.Status = memory.StatusHeld
	held.Category = "health"
	held.Provenance = memory.Provenance{SourceType: memory.SourceUser, SourceID: "form", ValidatedBy: memory.ValidatedUserConfirmed}
	f.insert(held, "", nil)
	checkClaim(t, f.get(held.MemoryID), held)

	_, err := s.Get(ctx, f.tenant, newID("mem"))
	wantErr(t, err, memory.ErrNotFound, "get a missing claim")
	_, err = s.Insert(ctx, memory.InsertParams{Claim: c})
	wantErr(t, err, memory.ErrConflict, "insert a taken memory id")

	many, err := s.GetMany(ctx, f.tenant, []string{c.MemoryID, newID("mem"), held.MemoryID})
	if err != nil || !sameSet(ids(many), []string{c.MemoryID, held.MemoryID}) {
		t.Fatalf("get many: %v %v", ids(many), err)
	}
	none, err := s.GetMany(ctx, f.tenant, nil)
	if err != nil || len(none) != 0 {
		t.Fatalf("get many of nothing: %v %v", none, err)
	}
}

func testMemSupersede(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	old := f.insert(f.claim("prefs", "lang", `"Russian"`, "language: Russian"), "", vec("m1", 1, 0))
	if n := f.projections(); n != 2 {
		t.Fatalf("one current claim with a vector has %d projection rows, want 2", n)
	}
	nc := f.claim("prefs", "lang", `"French"`, "language: French")
	got := f.insert(nc, old.MemoryID, vec("m1", 0, 1))
	if got.Status != memory.StatusCurrent || got.Supersedes != old.MemoryID {
		t.Fatalf("new claim: status %s supersedes %q", got.Status, got.Supersedes)
	}
	if g := f.get(nc.MemoryID); !reflect.DeepEqual(g, got) {
		t.Fatalf("superseding insert answered %+v, a read gives %+v", got, g)
	}
	prev := f.get(old.MemoryID)
	if prev.Status != memory.StatusSuperseded || prev.SupersededBy != nc.MemoryID ||
		prev.SupersededAt == nil || !prev.SupersededAt.Equal(nc.ValidFrom) {
		t.Fatalf("superseded claim: %+v", prev)
	}
	if string(prev.Value) != `"Russian"` || prev.Text != "language: Russian" {
		t.Fatalf("superseding changed the old claim's content: %s %q", prev.Value, prev.Text)
	}
	if n := f.projections(); n != 2 {
		t.Fatalf("after supersession %d projection rows, want 2 (the old claim's are gone)", n)
	}
	if hits := f.search("", 10, "russian"); len(hits) != 0 {
		t.Fatalf("a superseded claim is still searchable: %v", hits)
	}
	vs, _, err := s.Vectors(ctx, f.tenant, f.subject, "m1", 0)
	if err != nil || len(vs) != 1 || vs[0].MemoryID != nc.MemoryID {
		t.Fatalf("vectors after supersession: %+v %v", vs, err)
	}

	// Only a current claim of the subject can be superseded.
	_, err = s.Insert(ctx, memory.InsertParams{Claim: f.claim("prefs", "lang", `"German"`, "German"), Supersede: old.MemoryID})
	wantErr(t, err, memory.ErrConflict, "supersede a superseded claim")
	_, err = s.Insert(ctx, memory.InsertParams{Claim: f.claim("prefs", "lang", `"German"`, "German"), Supersede: newID("mem")})
	wantErr(t, err, memory.ErrConflict, "supersede a missing claim")
	if cur := f.list(memory.ListQuery{Statuses: []memory.Status{memory.StatusCurrent}}); !slices.Equal(ids(cur), []string{nc.MemoryID}) {
		t.Fatalf("refused supersessions changed the current claims: %v", ids(cur))
	}
}

func testMemOneCurrent(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	first := f.add("prefs", "city", `"Lyon"`, "city: Lyon")
	_, err := s.Insert(ctx, memory.InsertParams{Claim: f.claim("prefs", "city", `"Paris"`, "city: Paris")})
	wantErr(t, err, memory.ErrConflict, "a second current claim for the key")
	// Other namespaces, keys, subjects and statuses are not the same slot.
	f.add("work", "city", `"Paris"`, "city: Paris")
	f.add("prefs", "town", `"Paris"`, "town: Paris")
	f.other().add("prefs", "city", `"Paris"`, "city: Paris")
	held := f.claim("prefs", "city", `"Nice"`, "city: Nice")
	held.Status = memory.StatusHeld
	f.insert(held, "", nil)
	cur := f.list(memory.ListQuery{Namespace: "prefs", Key: "city", Statuses: []memory.Status{memory.StatusCurrent}})
	if !slices.Equal(ids(cur), []string{first.MemoryID}) {
		t.Fatalf("current claims for prefs/city: %v", ids(cur))
	}
}

func testMemConcurrentInserts(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	const n = 8
	claims := make([]memory.Claim, n)
	for i := range claims {
		claims[i] = f.claim("prefs", "color", fmt.Sprintf(`"c%d"`, i), fmt.Sprintf("color c%d", i))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Insert(t.Context(), memory.InsertParams{Claim: claims[i], Vector: vec("m", float32(i))})
		}()
	}
	wg.Wait()
	won := oneWinner(t, errs, "insert for one key")
	cur := f.list(memory.ListQuery{Statuses: []memory.Status{memory.StatusCurrent}})
	if !slices.Equal(ids(cur), []string{claims[won].MemoryID}) {
		t.Fatalf("current claims %v, want only the winner %s", ids(cur), claims[won].MemoryID)
	}
	if all := f.list(memory.ListQuery{}); len(all) != 1 {
		t.Fatalf("losers left claims behind: %v", ids(all))
	}
	if p := f.projections(); p != 2 {
		t.Fatalf("%d projection rows after the race, want the winner's 2", p)
	}
}

func testMemConcurrentSupersedes(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	base := f.add("prefs", "color", `"red"`, "color red")
	const n = 6
	claims := make([]memory.Claim, n)
	for i := range claims {
		claims[i] = f.claim("prefs", "color", fmt.Sprintf(`"c%d"`, i), fmt.Sprintf("color c%d", i))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Insert(t.Context(), memory.InsertParams{Claim: claims[i], Supersede: base.MemoryID, SupersededAt: claims[i].ValidFrom})
		}()
	}
	wg.Wait()
	won := oneWinner(t, errs, "supersession of one claim")
	if got := f.get(base.MemoryID); got.SupersededBy != claims[won].MemoryID {
		t.Fatalf("superseded by %q, want the winner %s", got.SupersededBy, claims[won].MemoryID)
	}
	cur := f.list(memory.ListQuery{Statuses: []memory.Status{memory.StatusCurrent}})
	if !slices.Equal(ids(cur), []string{claims[won].MemoryID}) {
		t.Fatalf("current claims %v, want only the winner", ids(cur))
	}
}

func testMemTombstone(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	c := f.add("prefs", "lang", `"Russian"`, "language: Russian")
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject,
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, f.tenant, c.MemoryID)
	wantErr(t, err, memory.ErrNotFound, "get a forgotten claim")
	// The same fact, however spelled, is refused in any status.
	again := f.claim("prefs", "lang", `" russian "`, "language: russian")
	_, err = s.Insert(ctx, memory.InsertParams{Claim: again})
	wantErr(t, err, memory.ErrTombstoned, "insert a forgotten fact")
	again.Status = memory.StatusHeld
	again.MemoryID = newID("mem")
	_, err = s.Insert(ctx, memory.InsertParams{Claim: again})
	wantErr(t, err, memory.ErrTombstoned, "insert a forgotten fact as held")
	if all := f.list(memory.ListQuery{}); len(all) != 0 {
		t.Fatalf("refused inserts left claims: %v", ids(all))
	}
	// Another value for the key, or the fact for another subject or tenant, is new.
	f.add("prefs", "lang", `"French"`, "language: French")
	f.other().add("prefs", "lang", `"Russian"`, "language: Russian")
	f.otherTenant().add("prefs", "lang", `"Russian"`, "language: Russian")
}

// testMemTombstoneLegacy: a tombstone written when digests were unkeyed
// blocks a claim whose keyed digest comes with the unkeyed one
// (InsertParams.LegacyDigest), and only the fact it names.
func testMemTombstoneLegacy(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	f.add("prefs", "pin", `"4242"`, "pin: 4242")
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject,
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	keyed := f.claim("prefs", "pin", `"4242"`, "pin: 4242")
	keyed.ValueDigest = "k1:" + fmt.Sprintf("%064x", 0xab)
	_, err := s.Insert(ctx, memory.InsertParams{Claim: keyed, LegacyDigest: memory.ValueDigest("prefs", "pin", json.RawMessage(`"4242"`))})
	wantErr(t, err, memory.ErrTombstoned, "insert a forgotten fact under a keyed digest")
	other := f.claim("prefs", "pin", `"1111"`, "pin: 1111")
	other.ValueDigest = "k1:" + fmt.Sprintf("%064x", 0xcd)
	if _, err := s.Insert(ctx, memory.InsertParams{Claim: other, LegacyDigest: memory.ValueDigest("prefs", "pin", json.RawMessage(`"1111"`))}); err != nil {
		t.Fatalf("another value under a keyed digest: %v", err)
	}
}

// testMemInsertBatch: a store that implements memory.BatchInserter stores
// a batch as Insert stores each claim (rows, projections, versions), and
// a batch with one refused claim (a second current claim of a key, a
// tombstoned fact) stores none of it.
func testMemInsertBatch(t *testing.T, s memory.Store) {
	bi, ok := s.(memory.BatchInserter)
	if !ok {
		return // an optional interface: nothing to hold this store to
	}
	f := newMfx(t, s)
	ctx := t.Context()
	old := f.add("prefs", "city", `"Lyon"`, "city: Lyon")
	v0 := f.version()
	a, b, c := f.claim("prefs", "lang", `"Russian"`, "language: Russian"), f.claim("prefs", "tea", `"green"`, "tea: green"),
		f.claim("prefs", "city", `"Oslo"`, "city: Oslo")
	got, err := bi.InsertBatch(ctx, []memory.InsertParams{
		{Claim: a, Vector: vec("m", 1, 0)}, {Claim: b}, {Claim: c, Supersede: old.MemoryID, SupersededAt: c.ValidFrom, Vector: vec("m", 0, 1)},
	})
	if err != nil {
		t.Fatalf("insert batch: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("insert batch returned %d claims, want 3", len(got))
	}
	for i, want := range []memory.Claim{a, b, c} {
		checkClaim(t, f.get(want.MemoryID), got[i])
		if got[i].Version <= v0 {
			t.Fatalf("claim %d written at version %d, not after %d", i, got[i].Version, v0)
		}
	}
	if f.version() != v0+3 {
		t.Fatalf("subject version %d after a batch of 3 from %d", f.version(), v0)
	}
	if st := f.get(old.MemoryID).Status; st != memory.StatusSuperseded {
		t.Fatalf("the superseded claim is %s", st)
	}
	if cur := f.list(memory.ListQuery{Statuses: []memory.Status{memory.StatusCurrent}}); !sameSet(ids(cur), []string{a.MemoryID, b.MemoryID, c.MemoryID}) {
		t.Fatalf("current after the batch: %v", ids(cur))
	}
	if hits := f.search("", 10, "oslo"); len(hits) != 1 || hits[0].MemoryID != c.MemoryID {
		t.Fatalf("full text of the batch: %v", hitIDs(hits))
	}
	if vs, _, err := s.Vectors(ctx, f.tenant, f.subject, "m", 0); err != nil || len(vs) != 2 {
		t.Fatalf("vectors of the batch: %d, %v", len(vs), err)
	}
	// One refusal stores nothing of its batch.
	rows, v1 := f.projections(), f.version()
	d, dup := f.claim("prefs", "food", `"pasta"`, "food: pasta"), f.claim("prefs", "lang", `"French"`, "language: French")
	_, err = bi.InsertBatch(ctx, []memory.InsertParams{{Claim: d}, {Claim: dup}})
	wantErr(t, err, memory.ErrConflict, "a batch with a second current claim of a key")
	if _, err := s.Get(ctx, f.tenant, d.MemoryID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("a refused batch stored its first claim: %v", err)
	}
	if f.projections() != rows || f.version() != v1 {
		t.Fatalf("a refused batch moved projections %d -> %d, version %d -> %d", rows, f.projections(), v1, f.version())
	}
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject, Namespace: "prefs",
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	e, gone := f.claim("prefs", "food", `"pasta"`, "food: pasta"), f.claim("prefs", "tea", `"green"`, "tea: green")
	_, err = bi.InsertBatch(ctx, []memory.InsertParams{{Claim: e}, {Claim: gone}})
	wantErr(t, err, memory.ErrTombstoned, "a batch with a forgotten fact")
	if all := f.list(memory.ListQuery{}); len(all) != 0 {
		t.Fatalf("a refused batch after forget left claims: %v", ids(all))
	}
}

// testMemChangesAndGet: a store that implements memory.ChangesGetter
// answers what Changes and GetMany answer, after writes too, and with no
// ids asked.
func testMemChangesAndGet(t *testing.T, s memory.Store) {
	cg, ok := s.(memory.ChangesGetter)
	if !ok {
		return // an optional interface: nothing to hold this store to
	}
	f := newMfx(t, s)
	ctx := t.Context()
	a := f.insert(f.claim("prefs", "lang", `"Russian"`, "language: Russian"), "", vec("m", 1, 0))
	b := f.add("prefs", "tea", `"green"`, "tea: green")
	check := func(after int64, asked []string) memory.Changes {
		t.Helper()
		ch, cs, err := cg.ChangesAndGet(ctx, f.tenant, f.subject, "m", after, asked)
		if err != nil {
			t.Fatalf("changes and get after %d: %v", after, err)
		}
		want, err := s.Changes(ctx, f.tenant, f.subject, "m", after)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Version != want.Version || ch.Forgotten != want.Forgotten || len(ch.Claims) != len(want.Claims) || len(ch.Vectors) != len(want.Vectors) {
			t.Fatalf("changes after %d: %+v, Changes says %+v", after, ch, want)
		}
		wantCs, err := s.GetMany(ctx, f.tenant, asked)
		if err != nil {
			t.Fatal(err)
		}
		if !sameSet(ids(cs), ids(wantCs)) {
			t.Fatalf("rows of %v: %v, GetMany says %v", asked, ids(cs), ids(wantCs))
		}
		for _, c := range cs {
			for _, w := range wantCs {
				if w.MemoryID == c.MemoryID {
					checkClaim(t, c, w)
				}
			}
		}
		return ch
	}
	all := check(0, []string{a.MemoryID, b.MemoryID, "missing"})
	if len(all.Claims) != 2 || len(all.Vectors) != 1 {
		t.Fatalf("changes from 0: %d claims, %d vectors", len(all.Claims), len(all.Vectors))
	}
	if ch := check(all.Version, []string{b.MemoryID}); len(ch.Claims) != 0 || ch.Version != all.Version {
		t.Fatalf("no change since %d: %+v", all.Version, ch)
	}
	c := f.insert(f.claim("prefs", "tea", `"black"`, "tea: black"), b.MemoryID, nil)
	if ch := check(all.Version, []string{b.MemoryID, c.MemoryID}); len(ch.Claims) != 2 || ch.Version <= all.Version {
		t.Fatalf("after a supersede: %+v", ch)
	}
	check(all.Version, nil)
}

func testMemListFilters(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	now := time.Now()
	a := f.add("a", "k1", `"v1"`, "one")
	b := f.add("a", "k2", `"v2"`, "two")
	expC := f.claim("b", "k1", `"v3"`, "three")
	past := now.Add(-time.Minute).UTC().Truncate(time.Microsecond)
	expC.ExpiresAt = &past
	c := f.insert(expC, "", nil)
	futD := f.claim("b", "k2", `"v4"`, "four")
	future := now.Add(time.Hour).UTC().Truncate(time.Microsecond)
	futD.ExpiresAt = &future
	futD.SchemaVersion = 3
	d := f.insert(futD, "", nil)
	heldE := f.claim("a", "k3", `"v5"`, "five")
	heldE.Status = memory.StatusHeld
	e := f.insert(heldE, "", nil)
	g := f.insert(f.claim("a", "k1", `"v6"`, "six"), a.MemoryID, nil) // supersedes a
	inv, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: b.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.tick(), Reason: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	f.other().add("a", "k9", `"x"`, "other subject")
	f.otherTenant().add("a", "k9", `"x"`, "other tenant")

	cur := memory.StatusCurrent
	for _, tc := range []struct {
		name string
		q    memory.ListQuery
		want []memory.Claim
	}{
		{"all", memory.ListQuery{}, []memory.Claim{a, b, c, d, e, g}},
		{"namespace", memory.ListQuery{Namespace: "b"}, []memory.Claim{c, d}},
		{"key", memory.ListQuery{Key: "k1"}, []memory.Claim{a, c, g}},
		{"namespace and key", memory.ListQuery{Namespace: "a", Key: "k1"}, []memory.Claim{a, g}},
		{"statuses", memory.ListQuery{Statuses: []memory.Status{memory.StatusHeld, memory.StatusInvalidated}}, []memory.Claim{inv, e}},
		{"current", memory.ListQuery{Statuses: []memory.Status{cur}}, []memory.Claim{c, d, g}},
		{"live now", memory.ListQuery{LiveAt: &now}, []memory.Claim{d, g}},
		{"live now in b", memory.ListQuery{LiveAt: &now, Namespace: "b"}, []memory.Claim{d}},
		{"max schema version", memory.ListQuery{MaxSchemaVersion: 2, LiveAt: &now}, []memory.Claim{g}},
		{"limit", memory.ListQuery{Limit: 2}, []memory.Claim{a, b}},
	} {
		got := f.list(tc.q)
		if !slices.Equal(ids(got), ids(tc.want)) {
			t.Errorf("%s: got %v, want %v", tc.name, ids(got), ids(tc.want))
		}
	}
	_, err = s.List(ctx, memory.ListQuery{TenantID: f.tenant})
	wantErr(t, err, memory.ErrInvalidInput, "list without a subject")
}

func testMemListAsOf(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	c1 := f.claim("prefs", "city", `"Lyon"`, "Lyon")
	c1.ValidFrom = f.base.Add(-10 * time.Hour)
	f.insert(c1, "", nil)
	c2 := f.claim("prefs", "city", `"Paris"`, "Paris")
	c2.ValidFrom = f.base.Add(-5 * time.Hour)
	f.insert(c2, c1.MemoryID, nil) // Paris from -5h
	held := f.claim("prefs", "food", `"fish"`, "fish")
	held.ValidFrom = f.base.Add(-10 * time.Hour)
	held.Status = memory.StatusHeld
	f.insert(held, "", nil)
	job := f.claim("prefs", "job", `"baker"`, "baker")
	job.ValidFrom = f.base.Add(-8 * time.Hour)
	f.insert(job, "", nil)
	if _, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: job.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.base.Add(-2 * time.Hour), Reason: "quit"}); err != nil {
		t.Fatal(err)
	}
	pet := f.claim("prefs", "pet", `"cat"`, "cat")
	pet.ValidFrom = f.base.Add(-9 * time.Hour)
	expired := f.base.Add(-3 * time.Hour)
	pet.ExpiresAt = &expired
	f.insert(pet, "", nil)

	for _, tc := range []struct {
		at   time.Time
		want []string
	}{
		{f.base.Add(-11 * time.Hour), nil},
		{f.base.Add(-9 * time.Hour), []string{c1.MemoryID, pet.MemoryID}},               // the job starts at -8h
		{f.base.Add(-5 * time.Hour), []string{c2.MemoryID, job.MemoryID, pet.MemoryID}}, // Lyon ends as Paris starts
		{f.base.Add(-3 * time.Hour), []string{c2.MemoryID, job.MemoryID}},
		{f.base.Add(-1 * time.Hour), []string{c2.MemoryID}},
	} {
		at := tc.at
		got := f.list(memory.ListQuery{LiveAt: &at, AsOf: true})
		if !sameSet(ids(got), tc.want) {
			t.Errorf("as of %s: got %v, want %v", at.Sub(f.base), ids(got), tc.want)
		}
	}
}

func testMemListPages(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	same := f.tick()
	for i := range 7 {
		c := f.claim("ns", fmt.Sprintf("k%d", i), `1`, "x")
		if i >= 2 && i < 5 { // three claims share one creation time: the id breaks the tie
			c.CreatedAt = same
		}
		f.insert(c, "", nil)
	}
	all := f.list(memory.ListQuery{})
	want := ids(all)
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		if c.CreatedAt.Before(p.CreatedAt) || (c.CreatedAt.Equal(p.CreatedAt) && c.MemoryID <= p.MemoryID) {
			t.Fatalf("list not ordered by (created_at, memory_id): %v then %v", p, c)
		}
	}
	var got []string
	q := memory.ListQuery{Limit: 2}
	for range 10 {
		page := f.list(q)
		if len(page) == 0 {
			break
		}
		got = append(got, ids(page)...)
		last := page[len(page)-1]
		q.AfterCreated, q.AfterID = last.CreatedAt, last.MemoryID
	}
	if !slices.Equal(got, want) || len(got) != 7 {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
}

func testMemTransitions(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	cur := f.add("prefs", "diet", `"vegan"`, "diet vegan")
	h := f.claim("prefs", "diet", `"vegetarian"`, "diet vegetarian")
	h.Status = memory.StatusHeld
	f.insert(h, "", nil)
	if n := f.projections(); n != 1 {
		t.Fatalf("a held claim has projection rows: %d rows, want the current claim's 1", n)
	}
	held := []memory.Status{memory.StatusHeld}

	// Confirming while another claim is current for the key needs Supersede.
	_, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: h.MemoryID, From: held, To: memory.StatusCurrent, At: f.tick()})
	wantErr(t, err, memory.ErrConflict, "confirm beside a current claim")
	if got := f.get(h.MemoryID); got.Status != memory.StatusHeld {
		t.Fatalf("a refused transition changed the claim: %s", got.Status)
	}

	at := f.tick()
	got, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: h.MemoryID, From: held,
		To: memory.StatusCurrent, At: at, Supersede: cur.MemoryID, SupersededAt: at, Vector: vec("m", 1, 2, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != memory.StatusCurrent || got.Supersedes != cur.MemoryID {
		t.Fatalf("confirmed claim: %+v", got)
	}
	old := f.get(cur.MemoryID)
	if old.Status != memory.StatusSuperseded || old.SupersededBy != h.MemoryID || !timePtrEqual(old.SupersededAt, &at) {
		t.Fatalf("claim superseded by the confirmation: %+v", old)
	}
	if hits := f.search("", 10, "vegetarian"); !slices.Equal(hitIDs(hits), []string{h.MemoryID}) {
		t.Fatalf("confirmed claim not searchable: %v", hits)
	}
	vs, _, err := s.Vectors(ctx, f.tenant, f.subject, "m", 0)
	if err != nil || len(vs) != 1 || vs[0].MemoryID != h.MemoryID || !slices.Equal(vs[0].Values, []float32{1, 2, 3}) {
		t.Fatalf("confirmed claim's vector: %+v %v", vs, err)
	}
	if n := f.projections(); n != 2 {
		t.Fatalf("%d projection rows, want the confirmed claim's 2", n)
	}

	// Leaving current takes the projection rows away.
	inv := f.tick()
	got, err = s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: h.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: inv, Reason: "user said it is wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != memory.StatusInvalidated || !timePtrEqual(got.InvalidatedAt, &inv) || got.InvalidationReason != "user said it is wrong" {
		t.Fatalf("invalidated claim: %+v", got)
	}
	checkClaim(t, f.get(h.MemoryID), got)
	if n := f.projections(); n != 0 {
		t.Fatalf("%d projection rows after invalidation, want 0", n)
	}
	if hits := f.search("", 10, "vegetarian"); len(hits) != 0 {
		t.Fatalf("invalidated claim still searchable: %v", hits)
	}

	// Wrong from-status and missing claims.
	_, err = s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: h.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.tick()})
	wantErr(t, err, memory.ErrConflict, "invalidate an invalidated claim")
	_, err = s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: newID("mem"),
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.tick()})
	wantErr(t, err, memory.ErrNotFound, "transition a missing claim")

	// A held claim can be rejected.
	r := f.claim("prefs", "mood", `"sad"`, "mood sad")
	r.Status = memory.StatusHeld
	f.insert(r, "", nil)
	got, err = s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: r.MemoryID, From: held, To: memory.StatusRejected, At: f.tick()})
	if err != nil || got.Status != memory.StatusRejected {
		t.Fatalf("reject: %+v %v", got, err)
	}
	if hits := f.search("", 10, "sad"); len(hits) != 0 {
		t.Fatalf("rejected claim searchable: %v", hits)
	}
}

func testMemRefresh(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	c := f.add("prefs", "tea", `"green"`, "tea green")
	v0 := f.version()
	at := f.tick()
	got, err := s.Refresh(ctx, f.tenant, c.MemoryID, at)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ConfirmedAt.Equal(at) || got.Confirmations != c.Confirmations+1 {
		t.Fatalf("refreshed claim: confirmed %v x%d", got.ConfirmedAt, got.Confirmations)
	}
	got, err = s.Refresh(ctx, f.tenant, c.MemoryID, f.tick())
	if err != nil || got.Confirmations != c.Confirmations+2 {
		t.Fatalf("second refresh: %+v %v", got, err)
	}
	if checkClaim(t, f.get(c.MemoryID), got); f.version() <= v0 {
		t.Fatalf("refresh did not move the subject version from %d", v0)
	}
	f.insert(f.claim("prefs", "tea", `"black"`, "tea black"), c.MemoryID, nil)
	_, err = s.Refresh(ctx, f.tenant, c.MemoryID, f.tick())
	wantErr(t, err, memory.ErrConflict, "refresh a superseded claim")
	_, err = s.Refresh(ctx, f.tenant, newID("mem"), f.tick())
	wantErr(t, err, memory.ErrNotFound, "refresh a missing claim")
}

func testMemForget(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	// Namespace a: four claims, three distinct facts (v1 comes back after v2).
	a1 := f.insert(f.claim("a", "k1", `"v1"`, "alpha one"), "", vec("m", 1))
	a2 := f.insert(f.claim("a", "k1", `"v2"`, "alpha two"), a1.MemoryID, vec("m", 2))
	a3 := f.insert(f.claim("a", "k1", `"V1"`, "alpha one again"), a2.MemoryID, vec("m", 3))
	held := f.claim("a", "k2", `"v3"`, "alpha three")
	held.Status = memory.StatusHeld
	f.insert(held, "", nil)
	// Namespace b: one claim whose key and value repeat a's (another fact).
	b1 := f.insert(f.claim("b", "k1", `"v1"`, "beta one"), "", vec("m", 4))
	other := f.other()
	oc := other.insert(other.claim("a", "k1", `"v1"`, "alpha one"), "", vec("m", 5))
	ot := f.otherTenant()
	tc := ot.insert(ot.claim("a", "k1", `"v1"`, "alpha one"), "", vec("m", 6))
	if n := f.projections(); n != 4 {
		t.Fatalf("%d projection rows before forgetting, want 4", n)
	}
	v0 := f.version()

	at := f.tick()
	rec, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject, Namespace: "a",
		Record: memory.ForgetRecord{ForgetID: newID("fg"), Reason: "user asked", CreatedAt: at}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Claims != 4 || rec.Tombstones != 3 || rec.Namespace != "a" || rec.TenantID != f.tenant ||
		rec.SubjectID != f.subject || rec.Reason != "user asked" || !rec.CreatedAt.Equal(at) {
		t.Fatalf("forget record: %+v, want 4 claims and 3 tombstones", rec)
	}
	if n := f.projections(); n != 2 {
		t.Fatalf("%d projection rows after forgetting a, want b's 2", n)
	}
	for _, id := range []string{a1.MemoryID, a2.MemoryID, a3.MemoryID, held.MemoryID} {
		_, err := s.Get(ctx, f.tenant, id)
		wantErr(t, err, memory.ErrNotFound, "get a forgotten claim")
	}
	if got := f.list(memory.ListQuery{}); !slices.Equal(ids(got), []string{b1.MemoryID}) {
		t.Fatalf("claims left: %v, want b's", ids(got))
	}
	ts, err := s.Tombstones(ctx, f.tenant, f.subject)
	if err != nil || len(ts) != 3 {
		t.Fatalf("tombstones: %+v %v", ts, err)
	}
	digests := map[string]bool{}
	for _, tb := range ts {
		if tb.TenantID != f.tenant || tb.SubjectID != f.subject || tb.Namespace != "a" || !tb.CreatedAt.Equal(at) {
			t.Fatalf("tombstone: %+v", tb)
		}
		digests[tb.Key+" "+tb.ValueDigest] = true
	}
	for _, c := range []memory.Claim{a1, a2, held} {
		if !digests[c.Key+" "+c.ValueDigest] {
			t.Fatalf("no tombstone for %s/%s %s", c.Namespace, c.Key, c.Value)
		}
	}
	if f.version() <= v0 {
		t.Fatal("forget did not move the subject version")
	}

	rec, err = s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject,
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}})
	if err != nil || rec.Claims != 1 || rec.Tombstones != 1 || rec.Namespace != "" {
		t.Fatalf("forget everything: %+v %v", rec, err)
	}
	if n := f.projections(); n != 0 {
		t.Fatalf("%d projection rows after forgetting everything, want 0", n)
	}
	if got := f.list(memory.ListQuery{}); len(got) != 0 {
		t.Fatalf("claims left: %v", ids(got))
	}
	if ts, _ := s.Tombstones(ctx, f.tenant, f.subject); len(ts) != 4 {
		t.Fatalf("%d tombstones, want 4", len(ts))
	}
	if hits := f.search("", 10, "alpha", "beta"); len(hits) != 0 {
		t.Fatalf("forgotten claims searchable: %v", hits)
	}
	// Forgetting nothing writes a record of nothing; a record without id or
	// time gets both.
	v1 := f.version()
	rec, err = s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject})
	if err != nil || rec.Claims != 0 || rec.Tombstones != 0 || rec.ForgetID == "" || rec.CreatedAt.IsZero() {
		t.Fatalf("forget again: %+v %v", rec, err)
	}
	if f.version() != v1 {
		t.Fatalf("forgetting nothing moved the version from %d to %d", v1, f.version())
	}

	// Other subjects and tenants are untouched.
	for _, x := range []struct {
		f *mfx
		c memory.Claim
	}{{other, oc}, {ot, tc}} {
		checkClaim(t, x.f.get(x.c.MemoryID), x.c)
		if n := x.f.projections(); n != 2 {
			t.Fatalf("forget took projection rows of another subject or tenant: %d left, want 2", n)
		}
		if ts, _ := s.Tombstones(ctx, x.f.tenant, x.f.subject); len(ts) != 0 {
			t.Fatalf("forget left tombstones on another subject or tenant: %+v", ts)
		}
		if hits := x.f.search("", 10, "alpha"); !slices.Equal(hitIDs(hits), []string{x.c.MemoryID}) {
			t.Fatalf("another subject's search after forget: %v", hits)
		}
	}
}

func testMemSearchText(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	both := f.add("drinks", "morning", `"green tea"`, "drinks green tea every morning")
	one := f.add("drinks", "afternoon", `"tea"`, "in the afternoon drinks a cup of tea with friends at the office")
	f.add("drinks", "evening", `"coffee"`, "drinks black coffee after dinner")
	elsewhere := f.add("places", "shop", `"green tea shop"`, "likes the green tea shop on the corner")
	exp := f.claim("drinks", "old", `"green tea"`, "green tea green tea green tea")
	past := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	exp.ExpiresAt = &past
	f.insert(exp, "", nil)
	h := f.claim("drinks", "secret", `"green tea"`, "green tea held")
	h.Status = memory.StatusHeld
	f.insert(h, "", nil)
	sup := f.add("drinks", "night", `"green tea"`, "green tea at night")
	f.insert(f.claim("drinks", "night", `"milk"`, "warm milk at night"), sup.MemoryID, nil)
	f.other().add("drinks", "morning", `"green tea"`, "green tea every morning")
	f.otherTenant().add("drinks", "morning", `"green tea"`, "green tea every morning")

	hits := f.search("drinks", 10, "green", "tea")
	if !slices.Equal(hitIDs(hits), []string{both.MemoryID, one.MemoryID}) {
		t.Fatalf("search green tea in drinks: %v, want [%s %s]", hits, both.MemoryID, one.MemoryID)
	}
	if !(hits[0].Score > hits[1].Score) {
		t.Fatalf("scores not best first: %v", hits)
	}
	hits = f.search("", 10, "green", "tea")
	if !sameSet(hitIDs(hits), []string{both.MemoryID, one.MemoryID, elsewhere.MemoryID}) || hits[len(hits)-1].MemoryID != one.MemoryID {
		t.Fatalf("search green tea everywhere: %v", hits)
	}
	if hits = f.search("", 1, "green", "tea"); len(hits) != 1 {
		t.Fatalf("limit 1 gave %v", hits)
	}
	if hits = f.search("places", 10, "tea"); !slices.Equal(hitIDs(hits), []string{elsewhere.MemoryID}) {
		t.Fatalf("search tea in places: %v", hits)
	}
	// Stemming reaches inflected forms both ways.
	if hits = f.search("", 10, "mornings"); !slices.Equal(hitIDs(hits), []string{both.MemoryID}) {
		t.Fatalf("search mornings: %v", hits)
	}
	if hits = f.search("", 10, "coffees"); len(hits) != 1 || hits[0].MemoryID == both.MemoryID {
		t.Fatalf("search coffees: %v", hits)
	}
	for _, terms := range [][]string{{"zebra"}, nil, {""}, {"\"", "*", "OR", "-"}, {"AND"}, {"NOT", "tea OR"}} {
		hits := f.search("", 10, terms...)
		if len(terms) > 0 && terms[len(terms)-1] == "tea OR" {
			if !sameSet(hitIDs(hits), []string{both.MemoryID, one.MemoryID, elsewhere.MemoryID}) {
				t.Fatalf("search %q: %v, want the tea claims (operators are words)", terms, hits)
			}
			continue
		}
		if len(hits) != 0 {
			t.Fatalf("search %q: %v, want nothing", terms, hits)
		}
	}
	_, err := s.SearchText(ctx, memory.TextQuery{TenantID: f.tenant, Terms: []string{"tea"}, Now: time.Now()})
	wantErr(t, err, memory.ErrInvalidInput, "search without a subject")
}

// Expired claims that outrank every live one must not hide it, however
// many there are (a store that ranks a few best hits first must look further).
func testMemSearchPastExpired(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	past := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	for i := range 80 {
		c := f.claim("ns", fmt.Sprintf("old%d", i), fmt.Sprintf(`%d`, i), "tea tea tea tea")
		c.ExpiresAt = &past
		f.insert(c, "", nil)
	}
	live := f.add("ns", "live", `"tea"`, "a long text that mentions tea only once among many other words")
	for _, limit := range []int{1, 5, 0} {
		if hits := f.search("", limit, "tea"); !slices.Equal(hitIDs(hits), []string{live.MemoryID}) {
			t.Fatalf("limit %d: %v, want only the live claim %s", limit, hits, live.MemoryID)
		}
	}
	if hits := f.search("other", 3, "tea"); len(hits) != 0 {
		t.Fatalf("namespace other: %v", hits)
	}
}

func testMemVectors(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	exp := f.base.Add(72 * time.Hour)
	ca := f.claim("ns", "a", `"a"`, "a")
	ca.ExpiresAt = &exp
	a := f.insert(ca, "", vec("m1", 0.5, -1.25, 3e-8))
	b := f.insert(f.claim("ns", "b", `"b"`, "b"), "", vec("m1", 2, 2))
	c := f.add("ns2", "c", `"c"`, "c") // no vector

	vs, ver, err := s.Vectors(ctx, f.tenant, f.subject, "m1", 0)
	if err != nil || ver != f.version() || len(vs) != 2 {
		t.Fatalf("vectors after 0: %+v at %d (subject %d) %v", vs, ver, f.version(), err)
	}
	if vs[0].MemoryID != a.MemoryID || vs[1].MemoryID != b.MemoryID || vs[0].Version != a.Version || vs[1].Version != b.Version || !(vs[0].Version < vs[1].Version) {
		t.Fatalf("vectors not in version order or with the claims' versions: %+v (claims at %d, %d)", vs, a.Version, b.Version)
	}
	if !slices.Equal(vs[0].Values, []float32{0.5, -1.25, 3e-8}) || vs[0].Model != "m1" || vs[0].Namespace != "ns" || !timePtrEqual(vs[0].ExpiresAt, &exp) || vs[1].ExpiresAt != nil {
		t.Fatalf("vector as stored: %+v", vs[0])
	}
	vs, _, err = s.Vectors(ctx, f.tenant, f.subject, "m1", a.Version)
	if err != nil || len(vs) != 1 || vs[0].MemoryID != b.MemoryID {
		t.Fatalf("vectors after %d: %+v %v", a.Version, vs, err)
	}
	vs, ver, err = s.Vectors(ctx, f.tenant, f.subject, "m1", ver)
	if err != nil || len(vs) != 0 || ver != f.version() {
		t.Fatalf("vectors after the current version: %+v %d %v", vs, ver, err)
	}

	missing, err := s.MissingVectors(ctx, f.tenant, f.subject, "m1", 10)
	if err != nil || !slices.Equal(ids(missing), []string{c.MemoryID}) {
		t.Fatalf("missing under m1: %v %v", ids(missing), err)
	}
	missing, err = s.MissingVectors(ctx, f.tenant, f.subject, "m2", 10)
	if err != nil || !sameSet(ids(missing), []string{a.MemoryID, b.MemoryID, c.MemoryID}) {
		t.Fatalf("missing under m2: %v %v", ids(missing), err)
	}
	if missing, _ = s.MissingVectors(ctx, f.tenant, f.subject, "m2", 2); len(missing) != 2 {
		t.Fatalf("missing with limit 2: %v", ids(missing))
	}

	// PutVectors keeps only vectors of the subject's current claims.
	sup := f.add("ns", "d", `"d"`, "d")
	d2 := f.insert(f.claim("ns", "d", `"d2"`, "d2"), sup.MemoryID, nil)
	other := f.other()
	oc := other.add("ns", "a", `"a"`, "a")
	before := f.version()
	err = s.PutVectors(ctx, f.tenant, f.subject, []memory.Vector{
		{MemoryID: a.MemoryID, Model: "m2", Values: []float32{1}},
		{MemoryID: c.MemoryID, Model: "m2", Values: []float32{3}},
		{MemoryID: sup.MemoryID, Model: "m2", Values: []float32{9}},
		{MemoryID: oc.MemoryID, Model: "m2", Values: []float32{9}},
		{MemoryID: newID("mem"), Model: "m2", Values: []float32{9}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.version() <= before {
		t.Fatal("put vectors did not move the subject version")
	}
	vs, _, err = s.Vectors(ctx, f.tenant, f.subject, "m2", before)
	if err != nil || !sameSet(vecIDs(vs), []string{a.MemoryID, c.MemoryID}) {
		t.Fatalf("vectors under m2 after %d: %+v %v", before, vs, err)
	}
	for _, v := range vs {
		if v.Version <= before || (v.MemoryID == c.MemoryID && (v.Namespace != "ns2" || !slices.Equal(v.Values, []float32{3}))) {
			t.Fatalf("put vector: %+v", v)
		}
	}
	if n, _ := other.s.ProjectionRows(ctx, other.tenant, other.subject); n != 1 {
		t.Fatalf("a vector landed on another subject's claim: %d projection rows", n)
	}
	// Replacing a vector under the same model.
	before = f.version()
	if err := s.PutVectors(ctx, f.tenant, f.subject, []memory.Vector{{MemoryID: a.MemoryID, Model: "m2", Values: []float32{7, 7}}}); err != nil {
		t.Fatal(err)
	}
	vs, _, _ = s.Vectors(ctx, f.tenant, f.subject, "m2", before)
	if len(vs) != 1 || !slices.Equal(vs[0].Values, []float32{7, 7}) {
		t.Fatalf("replaced vector: %+v", vs)
	}
	if missing, _ = s.MissingVectors(ctx, f.tenant, f.subject, "m2", 10); !slices.Equal(ids(missing), []string{b.MemoryID, d2.MemoryID}) {
		t.Fatalf("missing under m2 after put: %v", ids(missing))
	}
	// Full-text rows of a, b, c and d2 (the current claims) and vectors a/m1, b/m1, a/m2, c/m2.
	if n := f.projections(); n != 8 {
		t.Fatalf("%d projection rows, want 8", n)
	}
}

func vecIDs(vs []memory.Vector) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.MemoryID
	}
	return out
}

func testMemSubjectVersion(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	if v := f.version(); v != 0 {
		t.Fatalf("a new subject has version %d", v)
	}
	last := int64(0)
	step := func(what string, want int64) {
		t.Helper()
		v := f.version()
		if v <= last {
			t.Fatalf("%s: version %d did not move past %d", what, v, last)
		}
		if want != 0 && want != v {
			t.Fatalf("%s: the written claim has version %d, the subject %d", what, want, v)
		}
		last = v
	}
	a := f.add("ns", "k", `1`, "one")
	step("insert", a.Version)
	h := f.claim("ns", "h", `1`, "held")
	h.Status = memory.StatusHeld
	step("insert held", f.insert(h, "", nil).Version)
	b := f.insert(f.claim("ns", "k", `2`, "two"), a.MemoryID, nil)
	step("supersede", b.Version)
	if f.get(a.MemoryID).Version != b.Version {
		t.Fatalf("the superseded claim keeps version %d, want the write's %d", f.get(a.MemoryID).Version, b.Version)
	}
	r, err := s.Refresh(ctx, f.tenant, b.MemoryID, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	step("refresh", r.Version)
	tr, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: h.MemoryID,
		From: []memory.Status{memory.StatusHeld}, To: memory.StatusRejected, At: f.tick()})
	if err != nil {
		t.Fatal(err)
	}
	step("transition", tr.Version)
	if err := s.PutVectors(ctx, f.tenant, f.subject, []memory.Vector{{MemoryID: b.MemoryID, Model: "m", Values: []float32{1}}}); err != nil {
		t.Fatal(err)
	}
	step("put vectors", 0)
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject,
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	step("forget", 0)
	// A refused write changes nothing.
	_, err = s.Insert(ctx, memory.InsertParams{Claim: f.claim("ns", "k", `1`, "one")})
	wantErr(t, err, memory.ErrTombstoned, "insert forgotten")
	if v := f.version(); v != last {
		t.Fatalf("a refused insert moved the version from %d to %d", last, v)
	}
	if v, _ := s.SubjectVersion(ctx, f.tenant, newID("subj")); v != 0 {
		t.Fatalf("unknown subject version %d", v)
	}
}

func (f *mfx) changes(model string, after int64) memory.Changes {
	f.t.Helper()
	ch, err := f.s.Changes(f.t.Context(), f.tenant, f.subject, model, after)
	if err != nil {
		f.t.Fatalf("changes after %d: %v", after, err)
	}
	return ch
}

func changeIDs(ch memory.Changes) (claims, vectors []string) {
	for _, c := range ch.Claims {
		claims = append(claims, c.MemoryID+"/"+string(c.Status))
	}
	for _, v := range ch.Vectors {
		vectors = append(vectors, v.MemoryID)
	}
	return claims, vectors
}

// testMemChanges: what an in-process index catches up with. Applying every
// answer in turn leaves exactly the subject's current claims.
func testMemChanges(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	if ch := f.changes("m1", 0); ch.Version != 0 || ch.Forgotten != 0 || len(ch.Claims)+len(ch.Vectors) != 0 {
		t.Fatalf("a new subject's changes: %+v", ch)
	}
	exp := f.base.Add(72 * time.Hour)
	ca := f.claim("ns", "a", `"a"`, "alpha text")
	ca.ExpiresAt = &exp
	a := f.insert(ca, "", vec("m1", 0.5, -1.25))
	b := f.insert(f.claim("ns2", "b", `"b"`, "beta text"), "", nil)
	h := f.claim("ns", "h", `"h"`, "held text")
	h.Status = memory.StatusHeld
	f.insert(h, "", nil)
	mid := f.version()
	b2 := f.insert(f.claim("ns2", "b", `"b2"`, "beta two"), b.MemoryID, vec("m1", 1, 0))
	other := f.other()
	other.add("ns", "a", `"a"`, "alpha text")
	otherTenant := f.otherTenant()
	otherTenant.add("ns", "a", `"a"`, "alpha text")

	// From 0: the current claims only, with their text, and their vectors.
	ch := f.changes("m1", 0)
	claims, vectors := changeIDs(ch)
	if ch.Version != f.version() || ch.Forgotten != 0 || !sameSet(claims, []string{a.MemoryID + "/current", b2.MemoryID + "/current"}) ||
		!sameSet(vectors, []string{a.MemoryID, b2.MemoryID}) {
		t.Fatalf("changes from 0: %+v", ch)
	}
	for _, c := range ch.Claims {
		want := map[string]memory.Claim{a.MemoryID: a, b2.MemoryID: b2}[c.MemoryID]
		if c.Text != want.Text || c.Namespace != want.Namespace || c.Version != want.Version || !timePtrEqual(c.ExpiresAt, want.ExpiresAt) {
			t.Fatalf("claim change %+v, claim %+v", c, want)
		}
	}
	for _, v := range ch.Vectors {
		if v.MemoryID == a.MemoryID && (!slices.Equal(v.Values, []float32{0.5, -1.25}) || v.Model != "m1" || v.Namespace != "ns" || !timePtrEqual(v.ExpiresAt, &exp) || v.Version != a.Version) {
			t.Fatalf("vector change %+v", v)
		}
	}
	if ch := f.changes("", 0); len(ch.Vectors) != 0 || len(ch.Claims) != 2 {
		t.Fatalf("changes without a model: %+v", ch)
	}
	if ch := f.changes("m2", 0); len(ch.Vectors) != 0 {
		t.Fatalf("vectors of another model: %+v", ch.Vectors)
	}

	// From a version: every status, so a claim that left current is named.
	ch = f.changes("m1", mid)
	claims, vectors = changeIDs(ch)
	if !sameSet(claims, []string{b.MemoryID + "/superseded", b2.MemoryID + "/current"}) || !slices.Equal(vectors, []string{b2.MemoryID}) {
		t.Fatalf("changes after %d: %v %v", mid, claims, vectors)
	}
	for _, c := range ch.Claims {
		if c.MemoryID == b.MemoryID && c.Text != "" {
			t.Fatalf("a superseded claim's change carries its text: %+v", c)
		}
	}
	at := f.version()
	if ch := f.changes("m1", at); ch.Version != at || len(ch.Claims)+len(ch.Vectors) != 0 {
		t.Fatalf("changes after the current version: %+v", ch)
	}

	// An invalidation and a re-embedding.
	if _, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: a.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.tick(), Reason: "wrong"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutVectors(ctx, f.tenant, f.subject, []memory.Vector{{MemoryID: b2.MemoryID, Model: "m2", Values: []float32{3}}}); err != nil {
		t.Fatal(err)
	}
	ch = f.changes("m2", at)
	claims, vectors = changeIDs(ch)
	if !slices.Equal(claims, []string{a.MemoryID + "/invalidated"}) || !slices.Equal(vectors, []string{b2.MemoryID}) || ch.Version != f.version() {
		t.Fatalf("changes after invalidate and put vectors: %v %v %+v", claims, vectors, ch)
	}

	// A forget that deletes claims moves Forgotten to its version; one that
	// deletes nothing leaves it.
	at = f.version()
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject, Namespace: "ns",
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	ch = f.changes("m1", at)
	if ch.Forgotten != f.version() || ch.Forgotten <= at || len(ch.Claims) != 0 {
		t.Fatalf("changes after a forget: %+v (version %d)", ch, f.version())
	}
	forgotten := ch.Forgotten
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject, Namespace: "nothing-here",
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	if ch := f.changes("m1", 0); ch.Forgotten != forgotten {
		t.Fatalf("a forget of nothing moved Forgotten from %d to %d", forgotten, ch.Forgotten)
	}
	claims, vectors = changeIDs(f.changes("m1", 0))
	if !slices.Equal(claims, []string{b2.MemoryID + "/current"}) || !slices.Equal(vectors, []string{b2.MemoryID}) {
		t.Fatalf("changes from 0 after the forget: %v %v", claims, vectors)
	}
	if ch := other.changes("m1", 0); len(ch.Claims) != 1 || ch.Forgotten != 0 {
		t.Fatalf("another subject's changes: %+v", ch)
	}
}

func testMemNamespaces(t *testing.T, s memory.Store) {
	ctx := t.Context()
	tenant := newTenant()
	ns, err := s.GetNamespace(ctx, tenant, "health")
	if err != nil || ns != (memory.Namespace{TenantID: tenant, Name: "health"}) {
		t.Fatalf("undeclared namespace: %+v %v", ns, err)
	}
	want := memory.Namespace{TenantID: tenant, Name: "health", Personal: true, Sensitive: true, TTL: 90 * 24 * time.Hour}
	if err := s.PutNamespace(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetNamespace(ctx, tenant, "health"); err != nil || got != want {
		t.Fatalf("namespace: %+v %v, want %+v", got, err, want)
	}
	want.Sensitive, want.TTL = false, 0
	if err := s.PutNamespace(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetNamespace(ctx, tenant, "health"); err != nil || got != want {
		t.Fatalf("replaced namespace: %+v %v, want %+v", got, err, want)
	}
	other := newTenant()
	if got, err := s.GetNamespace(ctx, other, "health"); err != nil || got != (memory.Namespace{TenantID: other, Name: "health"}) {
		t.Fatalf("another tenant sees the policy: %+v %v", got, err)
	}
}

// Unconsented counts only the live claims of the namespace, any subject,
// that have no consent basis.
func testMemUnconsented(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	count := func(tenant, ns string) int {
		t.Helper()
		n, err := s.Unconsented(ctx, tenant, ns)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(f.tenant, "health"); n != 0 {
		t.Fatalf("empty namespace: %d unconsented", n)
	}
	bare := func(f *mfx, ns, key, value string) memory.Claim {
		c := f.claim(ns, key, value, key)
		c.ConsentBasis = ""
		return c
	}
	f.add("health", "allergy", `"nuts"`, "allergy nuts") // consented
	old := f.insert(bare(f, "health", "diet", `"vegan"`), "", nil)
	cur := bare(f, "health", "diet", `"vegetarian"`)
	f.insert(cur, old.MemoryID, nil) // the superseded one no longer counts
	f.insert(bare(f.other(), "health", "sleep", `"poor"`), "", nil)
	expired := bare(f, "health", "mood", `"low"`)
	past := f.base.Add(-time.Minute)
	expired.ExpiresAt = &past
	f.insert(expired, "", nil)
	held := bare(f, "health", "weight", `"70kg"`)
	held.Status = memory.StatusHeld
	f.insert(held, "", nil)
	f.insert(bare(f, "prefs", "color", `"blue"`), "", nil)
	f.otherTenant().insert(bare(f.otherTenant(), "health", "bp", `"high"`), "", nil)
	if n := count(f.tenant, "health"); n != 2 {
		t.Fatalf("%d unconsented in health, want 2 (the current diet and the other subject's sleep)", n)
	}
	if _, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: cur.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.tick(), Reason: "no consent"}); err != nil {
		t.Fatal(err)
	}
	if n := count(f.tenant, "health"); n != 1 {
		t.Fatalf("%d unconsented after invalidating one, want 1", n)
	}
}

// A namespace declared personal and a claim without a consent basis are
// ordered by the store, whichever comes second being refused: the service
// reads the policy (or counts) before it writes, and another instance may
// declare (or write) in between. A claim with a consent basis is taken.
func testMemPersonalRefusesUnconsented(t *testing.T, s memory.Store) {
	f := newMfx(t, s)
	ctx := t.Context()
	bare := func(ns, key string, status memory.Status) memory.Claim {
		c := f.claim(ns, key, `"x"`, key+" x")
		c.ConsentBasis, c.Status = "", status
		return c
	}
	declare := func(ns string) error {
		return s.PutNamespace(ctx, memory.Namespace{TenantID: f.tenant, Name: ns, Personal: true})
	}
	// Declared first, written second.
	if err := declare("p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(ctx, memory.InsertParams{Claim: bare("p1", "a", memory.StatusCurrent)}); !errors.Is(err, memory.ErrNoConsent) {
		t.Fatalf("a claim without consent in a personal namespace: %v, want ErrNoConsent", err)
	}
	if b, ok := s.(memory.BatchInserter); ok {
		if _, err := b.InsertBatch(ctx, []memory.InsertParams{{Claim: bare("p1", "b", memory.StatusCurrent)}}); !errors.Is(err, memory.ErrNoConsent) {
			t.Fatalf("a batch with a claim without consent in a personal namespace: %v, want ErrNoConsent", err)
		}
	}
	if n, err := s.Unconsented(ctx, f.tenant, "p1"); err != nil || n != 0 {
		t.Fatalf("refused claims stored: %d (%v)", n, err)
	}
	f.add("p1", "c", `"y"`, "c y") // with a consent basis
	// Written first, declared second: the declaration is refused and not stored.
	f.insert(bare("p2", "a", memory.StatusCurrent), "", nil)
	if err := declare("p2"); !errors.Is(err, memory.ErrNoConsent) {
		t.Fatalf("declared personal over a claim without consent: %v, want ErrNoConsent", err)
	}
	if ns, err := s.GetNamespace(ctx, f.tenant, "p2"); err != nil || ns.Personal {
		t.Fatalf("the refused declaration was stored: %+v (%v)", ns, err)
	}
	// Held before the declaration (held claims are not served), confirmed after.
	held := f.insert(bare("p3", "a", memory.StatusHeld), "", nil)
	if err := declare("p3"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Transition(ctx, memory.TransitionParams{TenantID: f.tenant, MemoryID: held.MemoryID,
		From: []memory.Status{memory.StatusHeld}, To: memory.StatusCurrent, At: f.tick()})
	if !errors.Is(err, memory.ErrNoConsent) {
		t.Fatalf("a held claim without consent made current in a personal namespace: %v, want ErrNoConsent", err)
	}
	if got := f.get(held.MemoryID); got.Status != memory.StatusHeld {
		t.Fatalf("the refused confirmation changed the claim to %s", got.Status)
	}
}

func testMemTenantIsolation(t *testing.T, s memory.Store) {
	ctx := t.Context()
	f := newMfx(t, s)
	g := f.otherTenant()
	// The same memory id, subject, namespace and key in two tenants.
	ca := f.claim("ns", "k", `"a"`, "apple pie")
	cb := g.claim("ns", "k", `"b"`, "banana pie")
	cb.MemoryID = ca.MemoryID
	f.insert(ca, "", vec("m", 1))
	g.insert(cb, "", vec("m", 2))
	checkClaim(t, f.get(ca.MemoryID), ca)
	checkClaim(t, g.get(ca.MemoryID), cb)
	if f.version() != 1 || g.version() != 1 {
		t.Fatalf("subject versions %d and %d, want 1 each", f.version(), g.version())
	}
	if hits := f.search("", 10, "banana", "pie"); len(hits) != 1 || hits[0].MemoryID != ca.MemoryID {
		t.Fatalf("search crossed tenants: %v", hits)
	}
	if hits := f.search("", 10, "banana"); len(hits) != 0 {
		t.Fatalf("search found another tenant's words: %v", hits)
	}
	vs, _, _ := s.Vectors(ctx, g.tenant, g.subject, "m", 0)
	if len(vs) != 1 || !slices.Equal(vs[0].Values, []float32{2}) {
		t.Fatalf("vectors crossed tenants: %+v", vs)
	}

	// A third tenant sees and changes nothing of either.
	x := newTenant()
	if _, err := s.Get(ctx, x, ca.MemoryID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("get from another tenant: %v", err)
	}
	if cs, err := s.GetMany(ctx, x, []string{ca.MemoryID}); err != nil || len(cs) != 0 {
		t.Fatalf("get many from another tenant: %v %v", cs, err)
	}
	if cs, err := s.List(ctx, memory.ListQuery{TenantID: x, SubjectID: f.subject}); err != nil || len(cs) != 0 {
		t.Fatalf("list from another tenant: %v %v", ids(cs), err)
	}
	_, err := s.Transition(ctx, memory.TransitionParams{TenantID: x, MemoryID: ca.MemoryID,
		From: []memory.Status{memory.StatusCurrent}, To: memory.StatusInvalidated, At: f.tick()})
	wantErr(t, err, memory.ErrNotFound, "transition from another tenant")
	_, err = s.Refresh(ctx, x, ca.MemoryID, f.tick())
	wantErr(t, err, memory.ErrNotFound, "refresh from another tenant")
	_, err = s.Insert(ctx, memory.InsertParams{Claim: func() memory.Claim {
		c := f.claim("ns", "k", `"c"`, "cherry")
		c.TenantID = x
		return c
	}(), Supersede: ca.MemoryID})
	wantErr(t, err, memory.ErrConflict, "supersede another tenant's claim")
	if err := s.PutVectors(ctx, x, f.subject, []memory.Vector{{MemoryID: ca.MemoryID, Model: "m", Values: []float32{9}}}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.SearchText(ctx, memory.TextQuery{TenantID: x, SubjectID: f.subject, Terms: []string{"pie"}, Now: time.Now()}); err != nil || len(hits) != 0 {
		t.Fatalf("search from another tenant: %v %v", hits, err)
	}
	if vs, _, err := s.Vectors(ctx, x, f.subject, "m", 0); err != nil || len(vs) != 0 {
		t.Fatalf("vectors from another tenant: %v %v", vs, err)
	}
	if cs, err := s.MissingVectors(ctx, x, f.subject, "m", 10); err != nil || len(cs) != 0 {
		t.Fatalf("missing vectors from another tenant: %v %v", ids(cs), err)
	}
	if n, err := s.ProjectionRows(ctx, x, f.subject); err != nil || n != 0 {
		t.Fatalf("projection rows of another tenant: %d %v", n, err)
	}
	if rec, err := s.Forget(ctx, memory.ForgetParams{TenantID: x, SubjectID: f.subject,
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil || rec.Claims != 0 {
		t.Fatalf("forget from another tenant: %+v %v", rec, err)
	}
	if ts, err := s.Tombstones(ctx, x, f.subject); err != nil || len(ts) != 0 {
		t.Fatalf("tombstones of another tenant: %v %v", ts, err)
	}

	// Forgetting in one tenant leaves the other whole.
	if _, err := s.Forget(ctx, memory.ForgetParams{TenantID: f.tenant, SubjectID: f.subject,
		Record: memory.ForgetRecord{ForgetID: newID("fg"), CreatedAt: f.tick()}}); err != nil {
		t.Fatal(err)
	}
	checkClaim(t, g.get(ca.MemoryID), cb)
	if n := g.projections(); n != 2 {
		t.Fatalf("forget in one tenant took %d of the other's 2 projection rows", 2-n)
	}
	if f.version() <= 1 || g.version() != 1 {
		t.Fatalf("versions after forget: %d and %d", f.version(), g.version())
	}
	vs, _, _ = s.Vectors(ctx, g.tenant, g.subject, "m", 0)
	if len(vs) != 1 || !slices.Equal(vs[0].Values, []float32{2}) {
		t.Fatalf("another tenant's vector changed: %+v", vs)
	}
}

// oneWinner checks that exactly one of racing writes succeeded and every
// other one is ErrConflict, and returns the winner's index.
func oneWinner(t *testing.T, errs []error, what string) int {
	t.Helper()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("two concurrent writes (%s) both won: %d and %d", what, won, i)
		case err == nil:
			won = i
		case !errors.Is(err, memory.ErrConflict):
			t.Fatalf("concurrent write %d (%s): %v, want ErrConflict", i, what, err)
		}
	}
	if won < 0 {
		t.Fatalf("no concurrent write (%s) won", what)
	}
	return won
}
