package session

import (
	"strings"
	"testing"
)

// TestCheckDoc: the documents the service stores are refused when no store
// keeps them faithfully or no answer could carry them.
func TestCheckDoc(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	for doc, ok := range map[string]bool{
		`{"a":1}`:                 true,
		deep(MaxDepth):            true,
		deep(MaxDepth + 1):        false,
		deep(10000):               false,
		`{"a":"\u0000"}`:          false,
		`{"a\u0000":1}`:           false,
		`{"a":"\\u0000"}`:         true, // an escaped backslash, then text
		`{"a":"\ud800"}`:          false,
		"{\"a\":\"\xff\"}":        false,
		`{"a":1,"a":2}`:           false,
		`{"a":1}}`:                false,
		`{"a":"\ud83d\ude00 ok"}`: true,
	} {
		if err := checkDoc("doc", []byte(doc)); (err == nil) != ok {
			t.Errorf("checkDoc(%.40q) = %v, want ok=%v", doc, err, ok)
		}
	}
	if _, err := decodeJSON([]byte(`{"a":1}}`)); err == nil {
		t.Error("decodeJSON accepted a trailing }")
	}
}
