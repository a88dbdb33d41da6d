package memento_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/session"
)

// meaningEmbedder is a model that knows swimming is an activity, which no
// word of the two shares: texts about either point one way, the rest the
// other.
type meaningEmbedder struct{ calls atomic.Int64 }

func (*meaningEmbedder) Model() string { return "meaning-test" }
func (*meaningEmbedder) Dim() int      { return 2 }
func (e *meaningEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if strings.Contains(t, "swimming") || strings.Contains(t, "activities") {
			out[i] = []float32{1, 0}
		} else {
			out[i] = []float32{0, 1}
		}
	}
	return out, nil
}

// chatAfter makes session "chat" of user "u" in tenant "t": the user's
// first message, then n filler notes that share no word with it.
func chatAfter(t *testing.T, eng *memento.Engine, first string, n int) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := eng.Sessions.Put(ctx, "t", "chat", session.PutRequest{UserID: "u", State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	msgs := []session.MessageInput{{Role: "user", Content: first}}
	for i := range n {
		msgs = append(msgs, session.MessageInput{Role: "assistant", Content: fmt.Sprintf("Note %d: the weather report said clouds over the hills, nothing more to tell.", i)})
	}
	for len(msgs) > 0 {
		k := min(len(msgs), 50)
		if _, err := eng.Sessions.Append(ctx, "t", "chat", "u", msgs[:k]); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[k:]
	}
}

// A configured embedder that knows meanings ranks older history too, so a
// question finds the turn that answers it in other words.
func TestContextRanksHistoryByMeaningWithAnEmbedder(t *testing.T) {
	ctx := context.Background()
	emb := &meaningEmbedder{}
	eng, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir(), Memory: memory.Options{Embedder: emb}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	chatAfter(t, eng, "I went swimming in the lake every morning this summer.", 120)
	built, err := eng.Context.Build(ctx, "t", contextbuild.Request{Model: "gpt-4o", BudgetTokens: 600,
		Query: "Which activities does the user enjoy?", SessionID: "chat", UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, m := range built.Messages {
		all.WriteString(m.Content)
	}
	if emb.calls.Load() == 0 || !strings.Contains(all.String(), "swimming in the lake") {
		t.Fatalf("embedder called %d times; the context lacks the swimming turn:\n%s", emb.calls.Load(), all.String())
	}
}

// failingEmbedder is a remote model that is down.
type failingEmbedder struct{}

func (failingEmbedder) Model() string { return "down" }
func (failingEmbedder) Dim() int      { return 2 }
func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("503 from the model")
}

// An embedder that fails leaves older history to full text, said in the
// accounting, instead of failing the context.
func TestContextFallsBackToFullTextWhenTheEmbedderFails(t *testing.T) {
	ctx := context.Background()
	eng, err := memento.Open(ctx, memento.Config{DataDir: t.TempDir(), Memory: memory.Options{Embedder: failingEmbedder{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	chatAfter(t, eng, "My sister Ada plays the cello.", 99)
	built, err := eng.Context.Build(ctx, "t", contextbuild.Request{Model: "gpt-4o", BudgetTokens: 600,
		Query: "What does Ada play?", SessionID: "chat", UserID: "u"})
	if err != nil {
		t.Fatalf("build with the embedder down: %v", err)
	}
	var all strings.Builder
	for _, m := range built.Messages {
		all.WriteString(m.Content)
	}
	said := false
	for _, l := range built.Accounting.LeftOut {
		said = said || strings.Contains(l.Reason, "embedder failed")
	}
	if !strings.Contains(all.String(), "plays the cello") || !said {
		t.Fatalf("fallback: cello found %v, said %v; left out %+v", strings.Contains(all.String(), "plays the cello"), said, built.Accounting.LeftOut)
	}
}
