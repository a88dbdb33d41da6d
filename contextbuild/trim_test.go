package contextbuild_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/store/memstore"
)

// TestTrimmedSessionSameAsFresh: a builder that cached a session's messages
// before the session's cap trimmed the oldest builds the same context as a
// builder that reads the trimmed session for the first time. The windows of
// the first kept messages must not keep the text of the trimmed ones.
func TestTrimmedSessionSameAsFresh(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	sessions := session.NewService(st, session.Options{MaxMessages: 30})
	warm := contextbuild.New(contextbuild.Sources{Sessions: sessions})
	if _, _, err := sessions.Put(ctx, tenant, "s1", session.PutRequest{UserID: "u1", State: json.RawMessage(`{"step":"chat"}`)}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(5))
	queries := []string{"coffee in Paris with my sister?", "refund order 120 EUR", "garden rain summer"}
	budgets := []int{150, 250, 400, 700}
	for round := 0; round < 6; round++ {
		var in []session.MessageInput
		for i := 0; i < 9; i++ {
			in = append(in, session.MessageInput{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("%s?", randText(r, 4+r.Intn(12)))})
		}
		if _, err := sessions.Append(ctx, tenant, "s1", "u1", in); err != nil {
			t.Fatal(err)
		}
		fresh := contextbuild.New(contextbuild.Sources{Sessions: sessions})
		for _, q := range queries {
			for _, b := range budgets {
				req := contextbuild.Request{Model: "gpt-4o", BudgetTokens: b, SessionID: "s1", UserID: "u1", Query: q}
				a, err := warm.Build(ctx, tenant, req)
				if err != nil {
					t.Fatal(err)
				}
				f, err := fresh.Build(ctx, tenant, req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, f) {
					t.Fatalf("round %d, %q at %d tokens: the warm builder's context differs from a fresh one's:\nwarm  %+v\nfresh %+v", round, q, b, a.Accounting.Parts, f.Accounting.Parts)
				}
			}
		}
	}
}
