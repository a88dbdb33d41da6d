package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/memory/extract"
	"github.com/mementohq/memento/search"
	"github.com/mementohq/memento/store/memstore"
)

// wordEmbedder is a deterministic bag-of-words embedder for tests: texts
// sharing words are near, others far.
type wordEmbedder struct{ model string }

func (w wordEmbedder) Model() string { return w.model }
func (w wordEmbedder) Dim() int      { return 64 }
func (w wordEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 64)
		for _, term := range search.Terms(t) {
			h := fnv.New32a()
			h.Write([]byte(term))
			v[h.Sum32()%64]++
		}
		search.Normalize(v)
		out[i] = v
	}
	return out, nil
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T, st memory.Store, clk *clock) *memory.Service {
	t.Helper()
	o := memory.Options{Embedder: wordEmbedder{"test-words@1"}, Extractor: scripted{}}
	if clk != nil {
		o.Now = clk.now
	}
	return memory.NewService(st, o)
}

func prov() memory.Provenance {
	return memory.Provenance{SourceType: memory.SourceMessage, SourceID: "chat-1", MessageIDs: []string{"m1"}, ValidatedBy: memory.ValidatedUserStated}
}

func add(t *testing.T, s *memory.Service, tenant string, in memory.AddInput) memory.AddResult {
	t.Helper()
	if in.Provenance.SourceType == "" {
		in.Provenance = prov()
	}
	r, err := s.Add(context.Background(), tenant, in)
	if err != nil {
		t.Fatalf("Add(%s=%s): %v", in.Key, in.Value, err)
	}
	return r
}

func str(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

func TestSupersedeKeepsHistoryAndServesOnlyTheNewClaim(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	first := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "preference.language", Value: str("English")})
	if first.Outcome != memory.OutcomeAdded {
		t.Fatalf("first outcome = %s", first.Outcome)
	}
	second := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "preference.language", Value: str("Russian")})
	if second.Outcome != memory.OutcomeSuperseded || second.Superseded != first.Claim.MemoryID || second.Claim.Supersedes != first.Claim.MemoryID {
		t.Fatalf("second = %+v", second)
	}
	cur, _, err := s.List(ctx, "t1", memory.Query{SubjectID: "u1"})
	if err != nil || len(cur) != 1 || string(cur[0].Value) != `"Russian"` {
		t.Fatalf("List = %+v, %v; want only Russian", cur, err)
	}
	hist, err := s.History(ctx, "t1", second.Claim.MemoryID)
	if err != nil || len(hist) != 2 {
		t.Fatalf("History = %d claims, %v; want 2", len(hist), err)
	}
	if hist[0].Status != memory.StatusSuperseded || hist[0].SupersededBy != second.Claim.MemoryID || hist[0].Provenance.SourceID != "chat-1" {
		t.Fatalf("old claim in history = %+v", hist[0])
	}
	res, err := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "which language"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Items {
		if h.MemoryID == first.Claim.MemoryID {
			t.Fatalf("search served the superseded claim: %+v", h)
		}
	}
	if len(res.Items) != 1 || res.Items[0].MemoryID != second.Claim.MemoryID {
		t.Fatalf("search = %+v, want the current claim", res.Items)
	}
}

func TestExactDuplicateMergesIntoTheCurrentClaim(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	a := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "dislikes.mugs", Value: str("mugs")})
	again := prov()
	again.MessageIDs = []string{"m2"} // said again, in another message
	b := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "dislikes.mugs", Value: str("  Mugs "), Provenance: again})
	if b.Outcome != memory.OutcomeMerged || b.MergedInto != a.Claim.MemoryID || b.Claim.Confirmations != 2 {
		t.Fatalf("duplicate = %+v, want merged into %s with 2 confirmations", b, a.Claim.MemoryID)
	}
	// The message the claim cites read again (a replay) is no new confirmation.
	if r := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "dislikes.mugs", Value: str("mugs")}); r.Outcome != memory.OutcomeMerged || r.Claim.Confirmations != 2 {
		t.Fatalf("replay = %+v, want merged with 2 confirmations still", r)
	}
	cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"})
	if len(cs) != 1 {
		t.Fatalf("duplicates piled up: %d claims", len(cs))
	}
}

// TestIdempotencyKeyReplaysTheFirstAnswer: an add retried under its key
// answers as the first did (the same claim, outcome and one confirmation),
// even after a later claim superseded it, and the key with another claim
// is refused. Keys are per tenant.
func TestIdempotencyKeyReplaysTheFirstAnswer(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	in := memory.AddInput{SubjectID: "u1", Key: "preference.language", Value: str("English"), Provenance: prov()}
	first, replayed, err := s.AddKeyed(ctx, "t1", in, "k-1")
	if err != nil || replayed || first.Outcome != memory.OutcomeAdded {
		t.Fatalf("first = %+v replayed=%v %v", first, replayed, err)
	}
	again, replayed, err := s.AddKeyed(ctx, "t1", in, "k-1")
	if err != nil || !replayed || again.Outcome != memory.OutcomeAdded || again.Claim.MemoryID != first.Claim.MemoryID || again.Claim.Confirmations != 1 {
		t.Fatalf("retry = %+v replayed=%v %v; want the first answer, one confirmation", again, replayed, err)
	}
	other := in
	other.Value = str("French")
	if _, _, err := s.AddKeyed(ctx, "t1", other, "k-1"); !errors.Is(err, memory.ErrIdempotencyMismatch) {
		t.Fatalf("same key, another value: %v", err)
	}
	later := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "preference.language", Value: str("Russian")})
	if later.Outcome != memory.OutcomeSuperseded {
		t.Fatalf("later = %+v", later)
	}
	late, replayed, err := s.AddKeyed(ctx, "t1", in, "k-1")
	if err != nil || !replayed || late.Claim.MemoryID != first.Claim.MemoryID || late.Claim.Status != memory.StatusSuperseded {
		t.Fatalf("retry after a correction = %+v replayed=%v %v; want the first claim, not English back", late, replayed, err)
	}
	cur, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"})
	if len(cur) != 1 || string(cur[0].Value) != `"Russian"` {
		t.Fatalf("current = %+v, want only Russian", cur)
	}
	if res, replayed, err := s.AddKeyed(ctx, "t2", in, "k-1"); err != nil || replayed || res.Outcome != memory.OutcomeAdded {
		t.Fatalf("the same key in another tenant: %+v replayed=%v %v", res, replayed, err)
	}
}

// TestLateOlderClaimDoesNotReplaceTheCurrent: a claim valid from before the
// key's current claim arrives late; it does not become current, and reads
// as of any time give one value per key.
func TestLateOlderClaimDoesNotReplaceTheCurrent(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	at := func(y int) *time.Time { v := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC); return &v }
	add(t, s, "t1", memory.AddInput{SubjectID: "u3", Key: "employer", Value: str("Globex"), ValidFrom: at(2020)})
	acme := add(t, s, "t1", memory.AddInput{SubjectID: "u3", Key: "employer", Value: str("Acme"), ValidFrom: at(2023)})
	var ref *memory.Refusal
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u3", Key: "employer", Value: str("Initech"), ValidFrom: at(2021), Provenance: prov()}); !errors.As(err, &ref) {
		t.Fatalf("a late claim valid from before the current one: %v, want a refusal", err)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u3"}); len(cs) != 1 || cs[0].MemoryID != acme.Claim.MemoryID {
		t.Fatalf("current = %+v, want Acme", cs)
	}
	for y, want := range map[int]string{2021: `"Globex"`, 2022: `"Globex"`, 2024: `"Acme"`} {
		cs, _, err := s.List(ctx, "t1", memory.Query{SubjectID: "u3", AsOf: at(y)})
		if err != nil || len(cs) != 1 || string(cs[0].Value) != want {
			t.Fatalf("as of %d: %+v %v, want only %s", y, cs, err, want)
		}
	}
}

// TestRestatementOutlivesAnExpiringClaim: the same fact stated again
// without an end does not merge into a claim about to expire (it would
// expire with it); it supersedes it and stays.
func TestRestatementOutlivesAnExpiringClaim(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newService(t, memstore.New().Memory(), clk)
	add(t, s, "t1", memory.AddInput{SubjectID: "t2", Key: "city", Value: str("Oslo"), TTLSeconds: 3})
	again := prov()
	again.MessageIDs = []string{"m2"}
	r := add(t, s, "t1", memory.AddInput{SubjectID: "t2", Key: "city", Value: str("Oslo"), Provenance: again})
	if r.Claim.ExpiresAt != nil {
		t.Fatalf("restated without an end: %+v, want a claim that does not expire", r)
	}
	clk.add(time.Minute)
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "t2"}); len(cs) != 1 || string(cs[0].Value) != `"Oslo"` {
		t.Fatalf("after the first claim's expiry: %+v, want Oslo", cs)
	}
}

func TestPolicy(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Key: "k", Value: str("v")}); !errors.Is(err, memory.ErrNoProvenance) {
		t.Fatalf("no provenance: %v", err)
	}
	p := prov()
	p.ValidatedBy = memory.ValidatedModelInferred
	var ref *memory.Refusal
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Key: "k", Value: str("v"), Provenance: p}); !errors.As(err, &ref) {
		t.Fatalf("model inference: %v, want a refusal", err)
	}
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Key: "mood", Value: str("sad"), Category: "mood", Provenance: prov()}); !errors.As(err, &ref) {
		t.Fatalf("mood: %v, want a refusal", err)
	}
	// Without a category, the key's first segment is the category: the
	// same fact is held or refused whether or not the writer names it.
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Key: "mood", Value: str("sad"), Provenance: prov()}); !errors.As(err, &ref) {
		t.Fatalf("mood as a key: %v, want a refusal", err)
	}
	if r := add(t, s, "t2", memory.AddInput{SubjectID: "u1", Key: "health.conditions.diabetes", Value: str("diabetes")}); r.Outcome != memory.OutcomeHeld || !strings.Contains(r.Reason, "health") {
		t.Fatalf("health key without a category = %+v, want held", r)
	}
	held := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "health.allergy", Value: str("peanuts"), Category: "health"})
	if held.Outcome != memory.OutcomeHeld || held.Claim.Status != memory.StatusHeld || held.Reason == "" {
		t.Fatalf("health claim = %+v, want held with a reason", held)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"}); len(cs) != 0 {
		t.Fatalf("refused or held claims served: %+v", cs)
	}
	if r, _ := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "peanuts allergy"}); len(r.Items) != 0 {
		t.Fatalf("held claim found by search: %+v", r.Items)
	}
	hs, _, err := s.Held(ctx, "t1", memory.Query{SubjectID: "u1"})
	if err != nil || len(hs) != 1 {
		t.Fatalf("Held = %+v, %v", hs, err)
	}
	conf, err := s.Confirm(ctx, "t1", held.Claim.MemoryID)
	if err != nil || conf.Claim.Status != memory.StatusCurrent {
		t.Fatalf("Confirm = %+v, %v", conf, err)
	}
	if r, _ := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "peanuts allergy"}); len(r.Items) != 1 {
		t.Fatalf("confirmed claim not found by search: %+v", r.Items)
	}
	other := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "health.diet", Value: str("vegan"), Category: "health"})
	if _, err := s.Reject(ctx, "t1", other.Claim.MemoryID, "not true"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Confirm(ctx, "t1", other.Claim.MemoryID); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("confirm after reject: %v, want ErrConflict", err)
	}
	if _, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t1", Name: "personal", Personal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Namespace: "personal", Key: "home.city", Value: str("Saint Petersburg"), Provenance: prov()}); !errors.Is(err, memory.ErrNoConsent) {
		t.Fatalf("personal namespace without consent: %v", err)
	}
	add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "personal", Key: "home.city", Value: str("Saint Petersburg"), ConsentBasis: "consent"})
	// Another tenant's namespace policy is its own.
	add(t, s, "t2", memory.AddInput{SubjectID: "u1", Namespace: "personal", Key: "home.city", Value: str("Paris")})
}

// A namespace that held claims without consent cannot become personal
// while they are served: declaring it so is refused, naming how many, and
// changes nothing; once they are invalidated it is taken.
func TestPersonalOverUnconsentedClaims(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)})
	c := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "health", Key: "allergy", Value: str("peanuts"), Provenance: prov()})
	_, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t1", Name: "health", Personal: true})
	if !errors.Is(err, memory.ErrNoConsent) || !strings.Contains(err.Error(), "holds 1 current claim without a consent basis") {
		t.Fatalf("declaring personal over an unconsented claim: %v, want ErrNoConsent naming it", err)
	}
	if ns, _ := s.Namespace(ctx, "t1", "health"); ns.Personal {
		t.Fatalf("a refused declaration changed the namespace: %+v", ns)
	}
	// Another tenant's claims are not this tenant's concern.
	if _, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t2", Name: "health", Personal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Invalidate(ctx, "t1", c.Claim.MemoryID, "no consent"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t1", Name: "health", Personal: true}); err != nil {
		t.Fatalf("declaring personal once the claim is invalidated: %v", err)
	}
}

// Spellings of one fact that differ only in namespace case, key spacing or
// Unicode form are one fact: they merge, a correction supersedes it, the
// policy of one namespace is the other's, and a tombstone stops them all.
func TestSpellingsOfOneFact(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)})
	first := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "Prefs", Key: "favorite color", Value: str("Zürich blue")})
	for _, in := range []memory.AddInput{
		{SubjectID: "u1", Namespace: "PREFS", Key: "favorite  color", Value: str("Zürich blue")},
		{SubjectID: "u1", Namespace: "prefs", Key: "Favorite\tColor", Value: str("Zu\u0308rich blue")}, // NFD
	} {
		if r := add(t, s, "t1", in); r.Outcome != memory.OutcomeMerged || r.Claim.MemoryID != first.Claim.MemoryID {
			t.Fatalf("%+v: outcome %s on %s, want merged into %s", in, r.Outcome, r.Claim.MemoryID, first.Claim.MemoryID)
		}
	}
	fix := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "pReFs", Key: "FAVORITE COLOR", Value: str("red")})
	if fix.Outcome != memory.OutcomeSuperseded || fix.Superseded != first.Claim.MemoryID || fix.Claim.Namespace != "prefs" || fix.Claim.Key != "favorite color" {
		t.Fatalf("correction: %+v", fix)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1", Namespace: "Prefs"}); len(cs) != 1 || cs[0].MemoryID != fix.Claim.MemoryID {
		t.Fatalf("current claims: %+v", cs)
	}
	if _, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t1", Name: "Health", Personal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Namespace: "HEALTH", Key: "allergy", Value: str("nuts"), Provenance: prov()}); !errors.Is(err, memory.ErrNoConsent) {
		t.Fatalf("HEALTH without consent: %v, want the policy of health", err)
	}
	if _, err := s.Forget(ctx, "t1", "u1", "PREFS", "asked"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Namespace: "prefs", Key: "favorite color", Value: str("RED"), Provenance: prov()}); !errors.Is(err, memory.ErrTombstoned) {
		t.Fatalf("a forgotten fact in another spelling: %v, want ErrTombstoned", err)
	}
}

func TestExpiryInvalidationAndAsOf(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := newService(t, memstore.New().Memory(), clk)
	city := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "home.city", Value: str("Moscow")})
	clk.add(24 * time.Hour)
	tmp := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "trip.city", Value: str("Kazan trip"), TTLSeconds: 60})
	moved := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "home.city", Value: str("Saint Petersburg")})
	wrong := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "pet", Value: str("a cat named Kazan")})
	if _, err := s.Invalidate(ctx, "t1", wrong.Claim.MemoryID, "user said it was a joke"); err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Minute)
	cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"})
	if len(cs) != 1 || cs[0].MemoryID != moved.Claim.MemoryID {
		t.Fatalf("List after expiry and invalidation = %+v", cs)
	}
	r, _ := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "Kazan"})
	for _, h := range r.Items {
		if h.MemoryID == tmp.Claim.MemoryID || h.MemoryID == wrong.Claim.MemoryID {
			t.Fatalf("search served an expired or invalidated claim: %s", h.Text)
		}
	}
	past := time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC)
	old, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1", AsOf: &past})
	if len(old) != 1 || old[0].MemoryID != city.Claim.MemoryID {
		t.Fatalf("as-of read = %+v, want Moscow", old)
	}
	if _, err := s.Invalidate(ctx, "t1", wrong.Claim.MemoryID, "again"); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("second invalidate: %v, want ErrConflict", err)
	}
}

// TestKeyCaseIsOneKey: a key spelt in other case is the same key: it
// supersedes or merges into the claim of the key, is read back under any
// spelling, and cannot pass the key's tombstone.
func TestKeyCaseIsOneKey(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	first := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "home.city", Value: str("Oslo")})
	dup := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "Home.City", Value: str("oslo")})
	if dup.Outcome != memory.OutcomeMerged || dup.MergedInto != first.Claim.MemoryID {
		t.Fatalf("the same fact under Home.City = %+v, want merged into %s", dup, first.Claim.MemoryID)
	}
	moved := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "HOME.CITY", Value: str("Bergen")})
	if moved.Outcome != memory.OutcomeSuperseded || moved.Superseded != first.Claim.MemoryID {
		t.Fatalf("a new value under HOME.CITY = %+v, want it to supersede %s", moved, first.Claim.MemoryID)
	}
	if cs, _, err := s.List(ctx, "t1", memory.Query{SubjectID: "u1", Key: "Home.city"}); err != nil || len(cs) != 1 || string(cs[0].Value) != `"Bergen"` {
		t.Fatalf("read under Home.city = %+v, %v", cs, err)
	}
	if _, err := s.Forget(ctx, "t1", "u1", "", "asked"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"home.city", "Home.City", "HOME.CITY"} {
		if _, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Key: k, Value: str("Bergen"), Provenance: prov()}); !errors.Is(err, memory.ErrTombstoned) {
			t.Fatalf("the forgotten fact under %s: %v, want the tombstone to block it", k, err)
		}
	}
}

func TestForgetReachesEveryCopyAndTombstonesBlockReplay(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	s := newService(t, st, nil)
	other := newService(t, st, nil) // a second instance with its own caches
	in := memory.AddInput{SubjectID: "u1", Key: "dislikes.mugs", Value: str("mugs")}
	add(t, s, "t1", in)
	add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "home.city", Value: str("Saint Petersburg")})
	add(t, s, "t1", memory.AddInput{SubjectID: "u2", Key: "dislikes.mugs", Value: str("mugs")})
	if r, _ := other.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "mugs"}); len(r.Items) == 0 || !strings.Contains(r.Items[0].Text, "mugs") {
		t.Fatalf("before forget: %+v", r.Items)
	}
	if _, err := other.Profile(ctx, "t1", "u1"); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Forget(ctx, "t1", "u1", "", "user asked")
	if err != nil || rec.Claims != 2 || rec.Tombstones != 2 {
		t.Fatalf("Forget = %+v, %v", rec, err)
	}
	b, _ := json.Marshal(rec)
	if strings.Contains(string(b), "mugs") || strings.Contains(string(b), "Petersburg") {
		t.Fatalf("audit record keeps content: %s", b)
	}
	for _, mode := range []string{memory.ModeHybrid, memory.ModeFulltext, memory.ModeVector} {
		if r, _ := other.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "mugs Petersburg", Mode: mode}); len(r.Items) != 0 {
			t.Fatalf("%s search after forget: %+v", mode, r.Items)
		}
	}
	if p, _ := other.Profile(ctx, "t1", "u1"); p.Claims != 0 {
		t.Fatalf("profile after forget on another instance: %+v", p)
	}
	if n, err := st.ProjectionRows(ctx, "t1", "u1"); err != nil || n != 0 {
		t.Fatalf("projection rows after forget = %d, %v", n, err)
	}
	in.Provenance = prov()
	if _, err := s.Add(ctx, "t1", in); !errors.Is(err, memory.ErrTombstoned) {
		t.Fatalf("replaying a forgotten claim: %v, want ErrTombstoned", err)
	}
	if r, _ := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u2", Query: "mugs"}); len(r.Items) != 1 {
		t.Fatalf("another subject lost its memory: %+v", r.Items)
	}
}

func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	a := add(t, s, "tA", memory.AddInput{SubjectID: "u1", Key: "secret", Value: str("blue door")})
	if _, err := s.Get(ctx, "tB", a.Claim.MemoryID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("tenant B read A's claim: %v", err)
	}
	if r, _ := s.Search(ctx, "tB", memory.SearchQuery{SubjectID: "u1", Query: "blue door"}); len(r.Items) != 0 {
		t.Fatalf("tenant B found A's claim: %+v", r.Items)
	}
	if cs, _, _ := s.List(ctx, "tB", memory.Query{SubjectID: "u1"}); len(cs) != 0 {
		t.Fatal("tenant B listed A's claims")
	}
	if _, err := s.Invalidate(ctx, "tB", a.Claim.MemoryID, "x"); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("tenant B invalidated A's claim: %v", err)
	}
}

func TestConcurrentCorrectionsLeaveOneCurrentClaim(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Key: "home.city", Value: str(fmt.Sprintf("city %d", i)), Provenance: prov()})
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent add: %v", err)
		}
	}
	cur, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"})
	if len(cur) != 1 {
		t.Fatalf("%d current claims, want 1", len(cur))
	}
	hist, _ := s.History(ctx, "t1", cur[0].MemoryID)
	if len(hist) != 16 {
		t.Fatalf("history has %d claims, want 16 (none lost)", len(hist))
	}
}

func TestSearchHybridAndParts(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	for i, v := range []string{"loves hiking in the mountains", "works as a nurse in Boston", "has a dog named Max", "prefers tea over coffee"} {
		add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: fmt.Sprintf("fact.%d", i), Value: str(v)})
	}
	r, err := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "what is the dog called", K: 2})
	if err != nil || len(r.Items) == 0 {
		t.Fatalf("search = %+v, %v", r, err)
	}
	top := r.Items[0]
	if !strings.Contains(top.Text, "dog") || r.Mode != memory.ModeHybrid || top.Parts.FulltextRank != 1 || top.Parts.VectorRank != 1 || top.Provenance.SourceID == "" {
		t.Fatalf("top hit = %+v (mode %s)", top, r.Mode)
	}
	if len(r.Items) > 2 {
		t.Fatalf("k=2 gave %d hits", len(r.Items))
	}
	plain := memory.NewService(memstore.New().Memory(), memory.Options{})
	if _, err := plain.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "x", Mode: memory.ModeVector}); !errors.Is(err, memory.ErrInvalidInput) {
		t.Fatalf("vector search without an embedder: %v", err)
	}
	if _, err := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "x", Mode: "semantic"}); !errors.Is(err, memory.ErrInvalidInput) {
		t.Fatalf("unknown mode: %v", err)
	}
}

func TestRecencyWeighting(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newService(t, memstore.New().Memory(), clk)
	old := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "a", Value: str("went to the concert")})
	clk.add(30 * 24 * time.Hour)
	recent := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "b", Value: str("went to the concert again")})
	r, _ := s.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "concert", HalfLife: 24 * time.Hour})
	if len(r.Items) != 2 || r.Items[0].MemoryID != recent.Claim.MemoryID || r.Items[1].MemoryID != old.Claim.MemoryID || r.Items[1].Parts.Recency > 0.001 {
		t.Fatalf("recency-weighted = %+v", r.Items)
	}
}

func TestModelChangeReembeds(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	v1 := memory.NewService(st, memory.Options{Embedder: wordEmbedder{"words@1"}})
	add(t, v1, "t1", memory.AddInput{SubjectID: "u1", Key: "pet", Value: str("a parrot called Kiwi")})
	v2 := memory.NewService(st, memory.Options{Embedder: wordEmbedder{"words@2"}})
	r, err := v2.Search(ctx, "t1", memory.SearchQuery{SubjectID: "u1", Query: "parrot", Mode: memory.ModeVector})
	if err != nil || len(r.Items) != 1 || r.Model != "words@2" {
		t.Fatalf("vector search after a model change = %+v, %v", r, err)
	}
	if miss, _ := st.MissingVectors(ctx, "t1", "u1", "words@2", 10); len(miss) != 0 {
		t.Fatalf("%d claims still lack a words@2 vector", len(miss))
	}
}

func TestProfileInvalidatedOnWrite(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	s, other := newService(t, st, nil), newService(t, st, nil)
	add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "prefs", Key: "language", Value: str("Russian")})
	p, err := other.Profile(ctx, "t1", "u1")
	if err != nil || p.Claims != 1 || len(p.Namespaces) != 1 || !strings.Contains(p.Namespaces[0].Text, "language: Russian") || p.Tokens == 0 {
		t.Fatalf("profile = %+v, %v", p, err)
	}
	add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "prefs", Key: "language", Value: str("English")})
	p, _ = other.Profile(ctx, "t1", "u1")
	if !strings.Contains(p.Namespaces[0].Text, "language: English") || strings.Contains(p.Namespaces[0].Text, "Russian") {
		t.Fatalf("stale profile served after a correction elsewhere: %q", p.Namespaces[0].Text)
	}
}

// scripted is an extractor that returns one candidate per user message
// "key=value", a mood for "mood=...", and nothing (skipped) otherwise.
type scripted struct{}

func (scripted) Name() string { return "scripted@1" }
func (scripted) Extract(_ context.Context, msgs []memory.Message) (memory.Extraction, error) {
	var ex memory.Extraction
	for _, m := range msgs {
		k, v, ok := strings.Cut(m.Content, "=")
		if !ok || m.Role != "user" {
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: "no explicit statement"})
			continue
		}
		c := memory.Candidate{Key: k, Value: str(v), Kind: "statement", ValidatedBy: memory.ValidatedUserStated, MessageIDs: []string{m.ID}}
		if ns, key, ok := strings.Cut(k, ":"); ok { // "ns:key=value" names the namespace
			c.Namespace, c.Key = ns, key
		}
		if v == "null" { // a retraction
			c.Value = json.RawMessage("null")
		}
		if k == "mood" {
			c.Category = "mood"
		}
		ex.Candidates = append(ex.Candidates, c)
	}
	return ex, nil
}

// A retraction names the namespace and key as the model spelled them; it
// reaches the claim stored under their normal form.
func TestExtractRetractsWhateverTheSpelling(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "Prefs", Key: "color", Value: str("blue")})
	res, err := s.Extract(ctx, "t1", memory.ExtractInput{SubjectID: "u1", Apply: true,
		Messages: []memory.Message{{ID: "a", Role: "user", Content: "PREFS:Color=null"}}})
	if err != nil || len(res.Items) != 1 || res.Items[0].Outcome != memory.OutcomeInvalidated {
		t.Fatalf("retraction: %+v %v", res.Items, err)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"}); len(cs) != 0 {
		t.Fatalf("the retracted claim is still current: %+v", cs)
	}
}

func TestExtractReportsEveryOutcome(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "home.city", Value: str("Moscow")})
	msgs := []memory.Message{
		{ID: "a", Role: "user", Content: "home.city=Saint Petersburg"},
		{ID: "b", Role: "user", Content: "mood=tired"},
		{ID: "c", Role: "assistant", Content: "likes=tea"},
		{ID: "d", Role: "user", Content: "hello there"},
	}
	dry, err := s.Extract(ctx, "t1", memory.ExtractInput{SubjectID: "u1", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1"}); len(cs) != 1 || string(cs[0].Value) != `"Moscow"` {
		t.Fatalf("a dry run wrote: %+v", cs)
	}
	if len(dry.Items) != 2 || dry.Items[0].Outcome != memory.OutcomeSuperseded || dry.Items[1].Outcome != memory.OutcomeRefused {
		t.Fatalf("dry run = %+v", dry.Items)
	}
	res, err := s.Extract(ctx, "t1", memory.ExtractInput{SubjectID: "u1", Messages: msgs, Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	accounted := map[string]bool{}
	for _, it := range res.Items {
		for _, id := range it.Candidate.MessageIDs {
			accounted[id] = true
		}
	}
	for _, sk := range res.Skipped {
		accounted[sk.MessageID] = true
	}
	for _, m := range msgs {
		if !accounted[m.ID] {
			t.Fatalf("message %s was dropped silently: %+v", m.ID, res)
		}
	}
	if res.Items[0].Outcome != memory.OutcomeSuperseded || res.Items[0].MemoryID == "" || res.Items[1].Outcome != memory.OutcomeRefused || res.Items[1].Reason == "" {
		t.Fatalf("applied = %+v", res.Items)
	}
	c, _ := s.Get(ctx, "t1", res.Items[0].MemoryID)
	if c.Provenance.Extractor != "scripted@1" || len(c.Provenance.MessageIDs) != 1 || c.Provenance.MessageIDs[0] != "a" {
		t.Fatalf("extracted claim provenance = %+v", c.Provenance)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	s := newService(t, st, nil)
	bad := []memory.AddInput{
		{SubjectID: "", Key: "k", Value: str("v")},
		{SubjectID: "u1", Key: "", Value: str("v")},
		{SubjectID: "u1", Key: "k", Value: json.RawMessage(`{`)},
		{SubjectID: "u1", Key: "k", Value: json.RawMessage(`null`)},
		{SubjectID: "u1", Key: "k", Value: str(strings.Repeat("x", memory.DefaultMaxValueBytes))},
		{SubjectID: strings.Repeat("s", 300), Key: "k", Value: str("v")},
		{SubjectID: "u1", Key: "k\x00", Value: str("v")},
		{SubjectID: "u1", Key: "k", Value: str("v"), TTLSeconds: -1},
	}
	for i, in := range bad {
		in.Provenance = prov()
		if _, err := s.Add(ctx, "t1", in); !errors.Is(err, memory.ErrInvalidInput) {
			t.Fatalf("bad input %d: %v, want ErrInvalidInput", i, err)
		}
	}
	if v, _ := st.SubjectVersion(ctx, "t1", "u1"); v != 0 {
		t.Fatalf("bad input moved the subject version to %d", v)
	}
}

// TestNumberSpellingsAreOneValue: 1, 1.0 and 1e0 are one value, so a
// re-spelled number merges with its claim and cannot get past the
// tombstone of a forgotten one.
func TestNumberSpellingsAreOneValue(t *testing.T) {
	ctx := context.Background()
	s := newService(t, memstore.New().Memory(), nil)
	num := func(v string) memory.AddInput {
		return memory.AddInput{SubjectID: "u1", Key: "budget", Value: json.RawMessage(v), Provenance: prov()}
	}
	first := add(t, s, "t1", num(`{"eur":100,"share":0.5}`))
	for _, v := range []string{`{"eur":100.0,"share":0.50}`, `{"share":5e-1,"eur":1e2}`, `{"eur":1.00E+2,"share":50E-2}`} {
		r, err := s.Add(ctx, "t1", num(v))
		if err != nil || r.Outcome != memory.OutcomeMerged || r.Claim.MemoryID != first.Claim.MemoryID {
			t.Fatalf("%s: outcome %q claim %s, %v; want a merge into %s", v, r.Outcome, r.Claim.MemoryID, err, first.Claim.MemoryID)
		}
	}
	if r, err := s.Add(ctx, "t1", num(`{"eur":101,"share":0.5}`)); err != nil || r.Outcome != memory.OutcomeSuperseded {
		t.Fatalf("another amount: %q, %v; want superseded", r.Outcome, err)
	}
	if _, err := s.Forget(ctx, "t1", "u1", "", "asked"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`{"eur":101,"share":0.5}`, `{"eur":101.0,"share":0.5}`, `{"eur":1.01e2,"share":5e-1}`, `{"eur":101,"share":-0.0e0}`} {
		_, err := s.Add(ctx, "t1", num(v))
		if v == `{"eur":101,"share":-0.0e0}` {
			if err != nil {
				t.Fatalf("%s is another value (share 0): %v", v, err)
			}
			continue
		}
		if !errors.Is(err, memory.ErrTombstoned) {
			t.Fatalf("%s after forget: %v, want ErrTombstoned", v, err)
		}
	}
}

// TestHeldClaimsAreAskedOnce: a held claim sent again merges into the one
// waiting; one the user rejected is not asked again; one the key moved past,
// that expired, or whose namespace became personal cannot be confirmed.
func TestHeldClaimsAreAskedOnce(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	s := newService(t, memstore.New().Memory(), clk)
	held := func(key, value string) memory.AddInput {
		return memory.AddInput{SubjectID: "u1", Key: key, Value: str(value), Category: "religion", Provenance: prov()}
	}
	first := add(t, s, "t1", held("religion", "buddhist"))
	for i := 0; i < 2; i++ {
		clk.add(time.Second)
		r, err := s.Add(ctx, "t1", held("religion", " Buddhist "))
		if err != nil || r.Outcome != memory.OutcomeMerged || r.MergedInto != first.Claim.MemoryID {
			t.Fatalf("held again: %+v, %v; want merged into %s", r, err, first.Claim.MemoryID)
		}
	}
	if hs, _, _ := s.Held(ctx, "t1", memory.Query{SubjectID: "u1"}); len(hs) != 1 {
		t.Fatalf("held claims piled up: %d", len(hs))
	}
	if _, err := s.Reject(ctx, "t1", first.Claim.MemoryID, "not true"); err != nil {
		t.Fatal(err)
	}
	var ref *memory.Refusal
	if _, err := s.Add(ctx, "t1", held("religion", "buddhist")); !errors.As(err, &ref) {
		t.Fatalf("a rejected claim asked again: %v, want a refusal", err)
	}
	if hs, _, _ := s.Held(ctx, "t1", memory.Query{SubjectID: "u1"}); len(hs) != 0 {
		t.Fatalf("held after the rejection: %+v", hs)
	}

	// A confirmed correction after the held claim settles the key.
	stale := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "diet", Value: str("vegan"), Category: "health", Provenance: prov()})
	clk.add(time.Second)
	conf := prov()
	conf.ValidatedBy = memory.ValidatedUserConfirmed
	newer := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "diet", Value: str("omnivore"), Provenance: conf})
	if newer.Claim.Status != memory.StatusCurrent {
		t.Fatalf("confirmed correction: %+v", newer)
	}
	if _, err := s.Confirm(ctx, "t1", stale.Claim.MemoryID); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("confirming the older held claim over a newer one: %v, want ErrConflict", err)
	}
	if cs, _, _ := s.List(ctx, "t1", memory.Query{SubjectID: "u1", Key: "diet"}); len(cs) != 1 || cs[0].MemoryID != newer.Claim.MemoryID {
		t.Fatalf("diet after the refused confirm: %+v", cs)
	}

	// Expired while held.
	ttl := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Key: "health.pain", Value: str("knee"), Category: "health", TTLSeconds: 60, Provenance: prov()})
	clk.add(2 * time.Minute)
	if _, err := s.Confirm(ctx, "t1", ttl.Claim.MemoryID); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("confirming an expired held claim: %v, want ErrConflict", err)
	}
	hs, _, _ := s.Held(ctx, "t1", memory.Query{SubjectID: "u1"})
	for _, h := range hs {
		if h.MemoryID == ttl.Claim.MemoryID {
			t.Fatalf("an expired claim is still held for confirmation: %+v", h)
		}
	}

	// The namespace became personal while the claim waited.
	if _, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t1", Name: "hx", Sensitive: true}); err != nil {
		t.Fatal(err)
	}
	w := add(t, s, "t1", memory.AddInput{SubjectID: "u1", Namespace: "hx", Key: "k", Value: str("v"), Provenance: prov()})
	if w.Claim.Status != memory.StatusHeld {
		t.Fatalf("sensitive namespace: %+v, want held", w)
	}
	if _, err := s.DeclareNamespace(ctx, memory.Namespace{TenantID: "t1", Name: "hx", Sensitive: true, Personal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Confirm(ctx, "t1", w.Claim.MemoryID); !errors.Is(err, memory.ErrNoConsent) {
		t.Fatalf("confirming into a personal namespace without consent: %v, want ErrNoConsent", err)
	}
}

// TestKeyedDigests: with a DigestKey, what a tombstone keeps is a keyed
// digest (per tenant) that a guess of the value cannot be checked against,
// and it still blocks the fact; claims and tombstones kept before the key
// (unkeyed digests) still match the same fact.
func TestKeyedDigests(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	before := memory.NewService(st, memory.Options{})
	keyed := memory.NewService(st, memory.Options{DigestKey: []byte("0123456789abcdef0123456789abcdef")})
	pin := memory.AddInput{SubjectID: "u1", Namespace: "p", Key: "pin", Value: str("4242")}
	c := add(t, keyed, "t1", pin).Claim
	plain := memory.ValueDigest("p", "pin", json.RawMessage(`"4242"`))
	if !strings.HasPrefix(c.ValueDigest, "k1:") || strings.Contains(c.ValueDigest, plain) {
		t.Fatalf("digest %s is not keyed", c.ValueDigest)
	}
	if other := add(t, keyed, "t2", pin).Claim; other.ValueDigest == c.ValueDigest {
		t.Fatal("two tenants' digests of one fact are equal")
	}
	if _, err := keyed.Forget(ctx, "t1", "u1", "", "asked"); err != nil {
		t.Fatal(err)
	}
	ts, err := st.Tombstones(ctx, "t1", "u1")
	if err != nil || len(ts) != 1 || ts[0].ValueDigest != c.ValueDigest {
		t.Fatalf("tombstones %+v %v", ts, err)
	}
	if _, err := keyed.Add(ctx, "t1", memory.AddInput{SubjectID: "u1", Namespace: "p", Key: "pin", Value: str("4242"), Provenance: prov()}); !errors.Is(err, memory.ErrTombstoned) {
		t.Fatalf("the forgotten fact again: %v", err)
	}
	// Kept and forgotten before the key: the unkeyed tombstone blocks the
	// keyed service, and an unkeyed claim is the same fact as a keyed one.
	add(t, before, "t1", memory.AddInput{SubjectID: "u2", Namespace: "p", Key: "pin", Value: str("1111")})
	if _, err := before.Forget(ctx, "t1", "u2", "", "asked"); err != nil {
		t.Fatal(err)
	}
	if _, err := keyed.Add(ctx, "t1", memory.AddInput{SubjectID: "u2", Namespace: "p", Key: "pin", Value: str("1111"), Provenance: prov()}); !errors.Is(err, memory.ErrTombstoned) {
		t.Fatalf("a fact forgotten before the key: %v", err)
	}
	old := add(t, before, "t1", memory.AddInput{SubjectID: "u3", Namespace: "p", Key: "city", Value: str("Oslo")}).Claim
	again := add(t, keyed, "t1", memory.AddInput{SubjectID: "u3", Namespace: "p", Key: "city", Value: str("oslo"),
		Provenance: memory.Provenance{SourceType: memory.SourceMessage, SourceID: "chat-2", MessageIDs: []string{"m9"}, ValidatedBy: memory.ValidatedUserStated}})
	if again.Outcome != memory.OutcomeMerged || again.MergedInto != old.MemoryID {
		t.Fatalf("the same fact kept before the key: %+v, want merged into %s", again, old.MemoryID)
	}
}

// TestExtractKeepsTheLastWord: a message that says two things of one key
// (or a thing and its contradiction) keeps only its last word, and the
// same messages extracted again add nothing: they used to leave a claim
// per statement, and more on every re-extraction.
func TestExtractKeepsTheLastWord(t *testing.T) {
	ctx := context.Background()
	st := memstore.New().Memory()
	s := memory.NewService(st, memory.Options{Extractor: extract.Rules{}})
	for _, msg := range []string{"I like jazz. I do not like jazz.", "I moved to Bergen. I moved to Oslo. I moved to Bergen."} {
		for round := 0; round < 2; round++ {
			res, err := s.Extract(ctx, "t1", memory.ExtractInput{SubjectID: "u1", Apply: true, Messages: []memory.Message{{ID: "m-" + strings.Fields(msg)[2], Role: "user", Content: msg}}})
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for _, it := range res.Items {
				if it.Outcome != memory.OutcomeRefused {
					kept++
				}
			}
			if kept != 1 {
				t.Fatalf("%q round %d: %d candidates kept, want the last one: %+v", msg, round, kept, res.Items)
			}
		}
	}
	all, err := st.List(ctx, memory.ListQuery{TenantID: "t1", SubjectID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range all {
		got[c.Key+" "+string(c.Status)] = string(c.Value)
	}
	if len(all) != 2 || got["dislikes.jazz current"] != `"jazz"` || got["home.city current"] != `"Bergen"` {
		t.Fatalf("claims after extracting each message twice: %v", got)
	}
}
