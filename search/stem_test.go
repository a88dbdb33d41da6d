package search

import (
	"fmt"
	"testing"

	"github.com/kljensen/snowball/english"
)

// TestStemCache checks the cached stems against the stemmer, on first
// sight, on a hit, and after collisions replaced slots (more words than
// slots).
func TestStemCache(t *testing.T) {
	words := []string{"running", "refunds", "policies", "the", "generously", "caresses"}
	for i := range 3 * len(stems) {
		words = append(words, fmt.Sprintf("word%dings", i))
	}
	for round := range 2 {
		for _, w := range words {
			if got, want := stem(w), english.Stem(w, true); got != want {
				t.Fatalf("round %d: stem(%q) = %q, want %q", round, w, got, want)
			}
		}
	}
}
