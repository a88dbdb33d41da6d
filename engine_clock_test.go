package memento_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/internal/testenv"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/session"
)

// TestEngineClock: with Config.Now the embedded store and the services keep
// the test's time: a week later a session has expired and a memory with a
// day's TTL is gone, while a lasting one is still served.
func TestEngineClock(t *testing.T) {
	clk := testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	cfg := memento.Config{DataDir: t.TempDir(), Now: clk.Now}
	cfg.PII.Key = testenv.PIIKey
	ctx := context.Background()
	eng, err := memento.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, _, err := eng.Sessions.Put(ctx, "t", "s1", session.PutRequest{UserID: "u", State: json.RawMessage(`{}`), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	prov := memory.Provenance{SourceType: memory.SourceUser, SourceID: "form", ValidatedBy: memory.ValidatedUserStated}
	for key, ttl := range map[string]int64{"mood-of-the-day": 86400, "city": 0} {
		if _, err := eng.Memory.Add(ctx, "t", memory.AddInput{SubjectID: "u", Namespace: "n", Key: key, Value: json.RawMessage(`"x"`), Provenance: prov, TTLSeconds: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(7 * 24 * time.Hour)
	if _, err := eng.Sessions.Get(ctx, "t", "s1", "u"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("session a week after its hour's TTL: %v, want not found", err)
	}
	cs, _, err := eng.Memory.List(ctx, "t", memory.Query{SubjectID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Key != "city" {
		t.Fatalf("memories a week later: %+v, want only the lasting one", cs)
	}
	if got := cs[0].CreatedAt; !got.Equal(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("created_at %v, want the test clock's", got)
	}
}

// TestEngineSearchModeDefault: with the offline hashing embedder a search
// that names no mode runs full text (its vectors carry words, not
// meaning); hybrid stays one argument away.
func TestEngineSearchModeDefault(t *testing.T) {
	cfg := memento.Config{DataDir: t.TempDir()}
	cfg.PII.Key = testenv.PIIKey
	ctx := context.Background()
	eng, err := memento.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	prov := memory.Provenance{SourceType: memory.SourceUser, SourceID: "form", ValidatedBy: memory.ValidatedUserStated}
	if _, err := eng.Memory.Add(ctx, "t", memory.AddInput{SubjectID: "u", Namespace: "n", Key: "city", Value: json.RawMessage(`"Lisbon"`), Provenance: prov}); err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]string{"": memory.ModeFulltext, memory.ModeHybrid: memory.ModeHybrid} {
		res, err := eng.Memory.Search(ctx, "t", memory.SearchQuery{Query: "which city", SubjectID: "u", Mode: mode})
		if err != nil || res.Mode != want || len(res.Items) != 1 {
			t.Fatalf("mode %q: %+v %v, want mode %s and the claim", mode, res, err, want)
		}
	}
}
