package search

import (
	"strings"
	"unicode"
)

// MaxTerms bounds the terms of one query: a pasted page must not become a
// thousand-way OR.
const MaxTerms = 64

// Terms returns the distinct lowercase words of text (letter and digit runs)
// that carry meaning, stopwords dropped, in first-seen order, at most
// MaxTerms. A query of stopwords only keeps them, so it still matches.
func Terms(text string) []string {
	var all, kept []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if seen[w] {
			continue
		}
		seen[w] = true
		all = append(all, w)
		if !stopwords[w] {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		kept = all
	}
	if len(kept) > MaxTerms {
		kept = kept[:MaxTerms]
	}
	return kept
}

// stopwords are English function words: they match nearly everything and
// rank nothing.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren as at be
because been before being below between both but by can could did didn do does doesn doing don down
during each few for from further had hadn has hasn have haven having he her here hers herself him
himself his how i if in into is isn it its itself just ll me more most my myself no nor not now of
off on once only or other our ours ourselves out over own re s same she should so some such t than
that the their theirs them themselves then there these they this those through to too under until
up very was wasn we were weren what when where which while who whom why will with won would you
your yours yourself yourselves d m o ve y let lets got get gets also ever`) {
		m[w] = true
	}
	return m
}()
