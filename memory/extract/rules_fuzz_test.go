package extract

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/mementohq/memento/memory"
)

// FuzzRules: Rules never panics and never errs on valid ids; every
// candidate has a key, a JSON value, evidence from its message and message
// ids from the input; every input message is either cited or skipped.
func FuzzRules(f *testing.F) {
	for _, s := range benchCorpus {
		f.Add(s, "user")
	}
	for _, s := range []string{"", "\"", "«", "I'm", "my", "my wife", "my wife's", "I was born on",
		"I'm allergic to", "I love ,,,", "I love and and", "call me", "St.", "I live in St.",
		"My favorite is", "my friend Ann,", "I no longer", "я", "меня зовут", "I meant", "İ live in İzmir",
		"I love \x00\xff", "I like to", "I'm 999 years old", "my birthday is February 30"} {
		f.Add(s, "user")
	}
	f.Add("I hate mugs", "assistant")
	f.Fuzz(func(t *testing.T, text, role string) {
		msgs := []memory.Message{
			{ID: "a", Role: role, Content: text, At: sept1},
			{ID: "b", Role: "user", Content: text},
			{ID: "c", Role: "user", Content: strings.ToUpper(text) + ". " + text},
		}
		ex, err := Rules{}.Extract(context.Background(), msgs)
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		byID := map[string]string{"a": msgs[0].Content, "b": msgs[1].Content, "c": msgs[2].Content}
		cited := map[string]bool{}
		for _, c := range ex.Candidates {
			if c.Key == "" || !validKey(c.Key) {
				t.Fatalf("bad key %q", c.Key)
			}
			if len(c.Value) == 0 || !json.Valid(c.Value) {
				t.Fatalf("%s: bad value %q", c.Key, c.Value)
			}
			if len(c.MessageIDs) == 0 {
				t.Fatalf("%s: no message ids", c.Key)
			}
			if c.Evidence == "" {
				t.Fatalf("%s: no evidence", c.Key)
			}
			found := false
			for _, id := range c.MessageIDs {
				content, ok := byID[id]
				if !ok {
					t.Fatalf("%s: message id %q not in the input", c.Key, id)
				}
				cited[id] = true
				found = found || strings.Contains(content, c.Evidence)
			}
			if !found {
				t.Fatalf("%s: evidence %q is in none of its messages", c.Key, c.Evidence)
			}
			if c.Kind != memory.KindStatement && c.Kind != memory.KindCorrection {
				t.Fatalf("%s: kind %q", c.Key, c.Kind)
			}
		}
		for _, s := range ex.Skipped {
			if cited[s.MessageID] || s.Reason == "" {
				t.Fatalf("skipped %+v is cited or has no reason", s)
			}
			cited[s.MessageID] = true
		}
		for _, m := range msgs {
			if !cited[m.ID] {
				t.Fatalf("message %s neither cited nor skipped", m.ID)
			}
		}
		if slices.ContainsFunc(ex.Candidates, func(c memory.Candidate) bool {
			return slices.Contains(c.MessageIDs, "a") && strings.ToLower(strings.TrimSpace(role)) != "user"
		}) {
			t.Fatalf("a %q message yielded a candidate", role)
		}
	})
}

// validKey: lowercase dotted segments of letters, digits, marks, '_' and '-'.
func validKey(k string) bool {
	for _, seg := range strings.Split(k, ".") {
		if seg == "" {
			return false
		}
		for _, r := range seg {
			if !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || r == '_' || r == '-') || unicode.ToLower(r) != r {
				return false
			}
		}
	}
	return true
}
