package search

import (
	"strings"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/kljensen/snowball/english"
)

// stems is a direct-mapped, lock-free cache of Porter2 stems: the stemmer
// was most of the cost of Tokens (about 1.5 µs a word), and words repeat.
// A slot holds an immutable entry; a collision just replaces it.
var stems [1 << 14]atomic.Pointer[stemEntry]

type stemEntry struct{ word, stem string }

func stem(w string) string {
	slot := &stems[xxhash.Sum64String(w)%uint64(len(stems))]
	if e := slot.Load(); e != nil && e.word == w {
		return e.stem
	}
	st := english.Stem(w, true)
	// Clones: w and st may point into the caller's text, which the cache
	// must not keep alive.
	slot.Store(&stemEntry{word: strings.Clone(w), stem: strings.Clone(st)})
	return st
}
