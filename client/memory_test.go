package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/server"
	"github.com/mementohq/memento/store/memstore"
)

// ruleExtractor stands in for a model: "I like X" is a statement, "I feel
// X" a model's inference, anything else is skipped.
type ruleExtractor struct{}

func (ruleExtractor) Name() string { return "client-test@1" }

func (ruleExtractor) Extract(_ context.Context, msgs []memory.Message) (memory.Extraction, error) {
	var ex memory.Extraction
	for _, m := range msgs {
		switch {
		case strings.HasPrefix(m.Content, "I like "):
			v, _ := json.Marshal(strings.TrimPrefix(m.Content, "I like "))
			ex.Candidates = append(ex.Candidates, memory.Candidate{Key: "likes", Value: v, Kind: "statement", ValidatedBy: memory.ValidatedUserStated, MessageIDs: []string{m.ID}})
		case strings.HasPrefix(m.Content, "I feel "):
			v, _ := json.Marshal(strings.TrimPrefix(m.Content, "I feel "))
			ex.Candidates = append(ex.Candidates, memory.Candidate{Key: "mood", Value: v, Category: "mood", Kind: "inference", ValidatedBy: memory.ValidatedModelInferred, MessageIDs: []string{m.ID}})
		default:
			ex.Skipped = append(ex.Skipped, memory.SkippedMessage{MessageID: m.ID, Reason: "no explicit statement"})
		}
	}
	return ex, nil
}

// newMemoryClient serves a real engine with long-term memory on backend
// (the in-memory twin or embedded SQLite), with an admin key for one tenant.
func newMemoryClient(t *testing.T, backend string) (*client.Client, *memento.Engine, string) {
	t.Helper()
	mo := memory.Options{Extractor: ruleExtractor{}}
	var eng *memento.Engine
	var err error
	if backend == "memstore" {
		st := memstore.New()
		eng, err = memento.New(memento.Stores{Runs: st, Ops: st, Sessions: st, Vault: st, Memory: st.Memory()},
			memento.Options{PII: memento.PIIConfig{Key: testenv.PIIKey}, Memory: mo})
	} else {
		eng, err = memento.Open(context.Background(), memento.Config{DataDir: t.TempDir(), Memory: mo})
		if err == nil {
			t.Cleanup(func() { _ = eng.Close() })
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	tenant := testenv.RandomID("t-")
	const key = "client-memory-key-0123456789"
	ks := server.NewKeySet()
	if err := server.ParseAPIKeys(ks, key+"="+tenant+":admin"); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Memory: eng.Memory,
		Ready: eng.Ready, Keys: ks, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	return c, eng, tenant
}

func stated(subject, key, value, msg string) memory.AddInput {
	v, _ := json.Marshal(value)
	return memory.AddInput{SubjectID: subject, Key: key, Value: v,
		Provenance: memory.Provenance{SourceType: memory.SourceMessage, SourceID: msg, ValidatedBy: memory.ValidatedUserStated}}
}

func TestMemoryClient(t *testing.T) {
	for _, backend := range []string{"memstore", "sqlite"} {
		t.Run(backend, func(t *testing.T) { memoryClient(t, backend) })
	}
}

func memoryClient(t *testing.T, backend string) {
	c, _, tenant := newMemoryClient(t, backend)
	ctx := context.Background()

	first, err := c.AddMemory(ctx, stated("ann", "home", "Moscow", "m-1"))
	if err != nil || first.Outcome != memory.OutcomeAdded || first.Claim.TenantID != tenant || first.Claim.Provenance.SourceID != "m-1" {
		t.Fatalf("add: %+v %v", first, err)
	}
	asOf := time.Now()
	time.Sleep(2 * time.Millisecond)
	second, err := c.AddMemory(ctx, stated("ann", "home", "Saint Petersburg", "m-2"))
	if err != nil || second.Outcome != memory.OutcomeSuperseded || second.Superseded != first.Claim.MemoryID {
		t.Fatalf("supersede: %+v %v", second, err)
	}
	dup, err := c.AddMemory(ctx, stated("ann", "home", "saint  petersburg", "m-3"))
	if err != nil || dup.Outcome != memory.OutcomeMerged || dup.MergedInto != second.Claim.MemoryID {
		t.Fatalf("duplicate: %+v %v", dup, err)
	}
	page, err := c.ListMemories(ctx, memory.Query{SubjectID: "ann"})
	if err != nil || len(page.Items) != 1 || page.Items[0].MemoryID != second.Claim.MemoryID || page.NextCursor != "" {
		t.Fatalf("list: %+v %v", page, err)
	}
	if past, err := c.ListMemories(ctx, memory.Query{SubjectID: "ann", AsOf: &asOf}); err != nil || len(past.Items) != 1 || past.Items[0].MemoryID != first.Claim.MemoryID {
		t.Fatalf("as of: %+v %v", past, err)
	}
	if got, err := c.GetMemory(ctx, first.Claim.MemoryID); err != nil || got.Status != memory.StatusSuperseded || got.SupersededBy != second.Claim.MemoryID {
		t.Fatalf("get: %+v %v", got, err)
	}
	if h, err := c.MemoryHistory(ctx, second.Claim.MemoryID); err != nil || len(h) != 2 || h[0].MemoryID != first.Claim.MemoryID {
		t.Fatalf("history: %+v %v", h, err)
	}
	res, err := c.SearchMemories(ctx, memory.SearchQuery{SubjectID: "ann", Query: "Petersburg", K: 3, HalfLife: time.Hour, Mode: memory.ModeHybrid})
	if err != nil || len(res.Items) != 1 || res.Items[0].MemoryID != second.Claim.MemoryID || res.Items[0].Parts.FulltextRank != 1 || (res.Model != "") != (res.Mode == memory.ModeHybrid) {
		t.Fatalf("search: %+v %v", res, err)
	}

	// Errors carry the library's sentinels and refusals.
	if _, err := c.GetMemory(ctx, "nope"); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	guess := stated("ann", "income", "high", "m-4")
	guess.Provenance.ValidatedBy = memory.ValidatedModelInferred
	_, err = c.AddMemory(ctx, guess)
	var ref *memory.Refusal
	if !errors.Is(err, memory.ErrRefused) || !errors.As(err, &ref) || !strings.Contains(ref.Reason, "inferred") || client.KindOf(err) != "memory-refused" {
		t.Fatalf("a model's guess: %v", err)
	}
	if _, err := c.AddMemory(ctx, memory.AddInput{SubjectID: "ann", Key: "k", Value: json.RawMessage(`1`)}); !errors.Is(err, memory.ErrNoProvenance) {
		t.Fatalf("no provenance: %v", err)
	}
	stale := stated("ann", "home", "Kazan", "m-5")
	stale.Supersedes = first.Claim.MemoryID
	if _, err := c.AddMemory(ctx, stale); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("stale supersedes: %v", err)
	}
	if _, err := c.SearchMemories(ctx, memory.SearchQuery{SubjectID: "ann", Query: "x", Mode: "magic"}); !errors.Is(err, memory.ErrInvalidInput) {
		t.Fatalf("bad mode: %v", err)
	}

	// Namespaces, consent, held claims.
	ns, err := c.DeclareNamespace(ctx, memory.Namespace{Name: "private", Personal: true, TTL: 90 * time.Second})
	if err != nil || !ns.Personal || ns.TTL != 90*time.Second {
		t.Fatalf("declare: %+v %v", ns, err)
	}
	if got, err := c.MemoryNamespace(ctx, "private"); err != nil || got != ns {
		t.Fatalf("namespace: %+v %v", got, err)
	}
	personal := stated("ann", "diet", "vegan", "m-6")
	personal.Namespace = "private"
	if _, err := c.AddMemory(ctx, personal); !errors.Is(err, memory.ErrNoConsent) || !errors.As(err, &ref) {
		t.Fatalf("no consent: %v", err)
	}
	personal.ConsentBasis = "opted in"
	if r, err := c.AddMemory(ctx, personal); err != nil || r.Claim.ExpiresAt == nil {
		t.Fatalf("with consent: %+v %v", r, err)
	}
	sens := stated("ann", "condition", "asthma", "m-7")
	sens.Category = "health"
	held, err := c.AddMemory(ctx, sens)
	if err != nil || held.Outcome != memory.OutcomeHeld {
		t.Fatalf("sensitive: %+v %v", held, err)
	}
	sens2 := stated("ann", "faith", "none", "m-8")
	sens2.Category = "religion"
	held2, _ := c.AddMemory(ctx, sens2)
	if hp, err := c.HeldMemories(ctx, memory.Query{SubjectID: "ann", Limit: 1}); err != nil || len(hp.Items) != 1 || hp.NextCursor == "" {
		t.Fatalf("held page: %+v %v", hp, err)
	}
	if r, err := c.ConfirmMemory(ctx, held.Claim.MemoryID); err != nil || r.Claim.Status != memory.StatusCurrent || r.Outcome != memory.OutcomeAdded {
		t.Fatalf("confirm: %+v %v", r, err)
	}
	if got, err := c.RejectMemory(ctx, held2.Claim.MemoryID, "not asked"); err != nil || got.Status != memory.StatusRejected {
		t.Fatalf("reject: %+v %v", got, err)
	}
	if _, err := c.RejectMemory(ctx, held2.Claim.MemoryID, ""); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("reject twice: %v", err)
	}
	if got, err := c.InvalidateMemory(ctx, held.Claim.MemoryID, "the user took it back"); err != nil || got.Status != memory.StatusInvalidated {
		t.Fatalf("invalidate: %+v %v", got, err)
	}

	// Extraction reports every message.
	ex, err := c.ExtractMemories(ctx, memory.ExtractInput{SubjectID: "ann", Apply: true, Messages: []memory.Message{
		{ID: "x1", Role: "user", Content: "I like jazz"}, {ID: "x2", Role: "user", Content: "I feel sad"}, {ID: "x3", Role: "user", Content: "hm"}}})
	if err != nil || !ex.Applied || ex.Extractor != "client-test@1" || len(ex.Items) != 2 || len(ex.Skipped) != 1 || ex.Skipped[0].MessageID != "x3" || ex.Skipped[0].Reason == "" {
		t.Fatalf("extract: %+v %v", ex, err)
	}
	if ex.Items[0].Outcome != memory.OutcomeAdded || ex.Items[0].MemoryID == "" || ex.Items[1].Outcome != memory.OutcomeRefused {
		t.Fatalf("extract outcomes: %+v", ex.Items)
	}

	p, err := c.Profile(ctx, "ann")
	if err != nil || p.Claims != 3 || p.SubjectID != "ann" || len(p.Namespaces) != 2 {
		t.Fatalf("profile: %+v %v", p, err)
	}

	rec, err := c.ForgetSubject(ctx, "ann", "", "erasure")
	if err != nil || rec.Claims == 0 || rec.Reason != "erasure" || rec.TenantID != tenant {
		t.Fatalf("forget: %+v %v", rec, err)
	}
	if res, err := c.SearchMemories(ctx, memory.SearchQuery{SubjectID: "ann", Query: "Petersburg jazz"}); err != nil || len(res.Items) != 0 {
		t.Fatalf("search after forget: %+v %v", res, err)
	}
	if _, err := c.AddMemory(ctx, stated("ann", "home", "Saint Petersburg", "m-2")); !errors.Is(err, memory.ErrTombstoned) || !errors.As(err, &ref) {
		t.Fatalf("re-add after forget: %v", err)
	}
}
