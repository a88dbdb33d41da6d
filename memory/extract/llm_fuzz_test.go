package extract

import (
	"strings"
	"testing"

	"github.com/mementohq/memento/memory"
)

// FuzzLLMAnswer: whatever a model answers, parseAnswer never panics, and
// every candidate it accepts names only messages of the batch, has a
// lowercase dotted key, a value, evidence found in a cited message, and a
// validation its cited roles support.
func FuzzLLMAnswer(f *testing.F) {
	f.Add(`{"candidates": []}`)
	f.Add(answerJSON(cand("dislikes.mugs", "mugs", []string{"u1"}, "I hate mugs")))
	f.Add(answerJSON(cand("home.city", nil, []string{"u1", "t1"}, "hate")))
	f.Add(`{"candidates": [{"key": "a.b", "value": {"x": [1, 2]}, "kind": "statement", "validated_by": "tool_confirmed", "confidence": 0.5, "message_ids": ["t1"], "evidence": "Lyon"}]}`)
	f.Add(`{"candidates": [null, 1, "x", [], {}]}`)
	f.Add(`{"candidates": [{"key": "A..B"}]`)
	batch := []wireMessage{
		{ID: "u1", Role: "user", Content: "I hate mugs and I live in Lyon"},
		{ID: "a1", Role: "assistant", Content: "Noted."},
		{ID: "t1", Role: "tool", Content: `{"city": "Lyon"}`},
	}
	roles := map[string]string{}
	contents := map[string]string{}
	for _, m := range batch {
		roles[m.ID], contents[m.ID] = m.Role, m.Content
	}
	f.Fuzz(func(t *testing.T, content string) {
		cands, rejected, err := parseAnswer(content, batch)
		if err != nil {
			if len(cands) != 0 || len(rejected) != 0 {
				t.Fatalf("an error with results: %v", err)
			}
			return
		}
		for _, c := range cands {
			if !validKeySyntax(c.Key) || len(c.Value) == 0 || len(c.MessageIDs) == 0 {
				t.Fatalf("accepted %+v", c)
			}
			evidence, role := false, false
			for _, id := range c.MessageIDs {
				r, ok := roles[id]
				if !ok {
					t.Fatalf("accepted unknown id %q", id)
				}
				evidence = evidence || strings.Contains(normSpace(contents[id]), normSpace(c.Evidence))
				role = role || c.ValidatedBy == memory.ValidatedModelInferred ||
					(c.ValidatedBy == memory.ValidatedUserStated && r == "user") ||
					(c.ValidatedBy == memory.ValidatedToolConfirmed && r == "tool")
			}
			if !evidence || !role || c.Evidence == "" {
				t.Fatalf("accepted %+v: evidence %v role %v", c, evidence, role)
			}
		}
		for _, r := range rejected {
			if r.Reason == "" {
				t.Fatalf("rejected without a reason: %+v", r)
			}
		}
	})
}
