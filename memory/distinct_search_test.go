package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/store/memstore"
)

// TestSearchDistinctMessages: a window naming 40 turns ranks first, so the
// 40 turns add no evidence and are dropped; Search widens its candidates
// until it finds the 5 turns the window does not name.
func TestSearchDistinctMessages(t *testing.T) {
	ctx := context.Background()
	svc := memory.NewService(memstore.New().Memory(), memory.Options{})
	add := func(ns, key, text string, ids []string) {
		t.Helper()
		_, err := svc.Add(ctx, "t1", memory.AddInput{SubjectID: "s", Namespace: ns, Key: key, Value: []byte(`"x"`), Text: text,
			Provenance: memory.Provenance{SourceType: memory.SourceMessage, SourceID: key, MessageIDs: ids, ValidatedBy: memory.ValidatedImported}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for i := 0; i < 40; i++ {
		all = append(all, fmt.Sprintf("m%d", i))
	}
	add("windows", "w", strings.Repeat("alpha ", 6), all)
	for i := 0; i < 45; i++ {
		id := fmt.Sprintf("m%d", i)
		add("turns", "t"+id, "alpha", []string{id})
	}
	res, err := svc.Search(ctx, "t1", memory.SearchQuery{Query: "alpha", SubjectID: "s", K: 10, Mode: memory.ModeFulltext, DistinctMessages: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 6 || res.Items[0].Key != "w" {
		t.Fatalf("got %d hits (first %s), want the window then the 5 turns it does not name", len(res.Items), res.Items[0].Key)
	}
	for _, h := range res.Items[1:] {
		var n int
		if _, err := fmt.Sscanf(h.Key, "tm%d", &n); err != nil || n < 40 {
			t.Fatalf("hit %s is inside the window", h.Key)
		}
	}
	plain, err := svc.Search(ctx, "t1", memory.SearchQuery{Query: "alpha", SubjectID: "s", K: 10, Mode: memory.ModeFulltext})
	if err != nil || len(plain.Items) != 10 {
		t.Fatalf("without DistinctMessages: %d hits, %v", len(plain.Items), err)
	}
}
