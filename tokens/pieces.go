package tokens

import (
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// tiktoken's byte-pair merge rescans every pair after each merge, so one
// pre-token (a run of letters, punctuation or white space the split pattern
// keeps whole) costs time quadratic in its length: 80 KB of one word took
// 11 s, so 2 MB would take hours. Texts with a run longer than longRun bytes are
// split into pre-tokens here, with tiktoken's own pattern, and any pre-token
// longer than longPiece bytes is merged by mergeLong in O(n log n). Both give
// the same tokens as tiktoken, so counts stay exact; ordinary text never takes
// this path.
const (
	longRun   = 256
	longPiece = 512
)

// The split patterns of tiktoken's encodings (tiktoken-go's encoding.go).
var splitPatterns = map[string]string{
	O200kBase: `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
		`\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	Cl100kBase: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// rankFiles name the embedded rank files, as tiktoken-go-loader keys them.
var rankFiles = map[string]string{
	O200kBase:  "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
	Cl100kBase: "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}

// hasLongRun reports whether text holds more than longRun bytes of one
// character class (letters and marks, white space, or other non-digits):
// no pre-token can be longer than two such runs and a few characters, so a
// text without one never makes a long pre-token.
func hasLongRun(text string) bool {
	if len(text) <= longRun {
		return false
	}
	class, start := -1, 0
	for i, r := range text {
		c := runeClass(r)
		if c != class {
			class, start = c, i
		}
		if c != 0 && i+utf8.RuneLen(r)-start > longRun {
			return true
		}
	}
	return false
}

func runeClass(r rune) int {
	switch {
	case r < utf8.RuneSelf && (r >= '0' && r <= '9'):
		return 0
	case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
		return 1
	case r == ' ' || r == '\n' || r == '\t' || r == '\r':
		return 2
	case r < utf8.RuneSelf:
		return 3
	case unicode.IsLetter(r) || unicode.Is(unicode.M, r):
		return 1
	case unicode.IsSpace(r):
		return 2
	case unicode.IsNumber(r):
		return 0
	}
	return 3
}

// longText holds what the long path needs of one encoding, loaded on first use.
type longText struct {
	once  sync.Once
	split *regexp2.Regexp
	ranks map[string]int
	err   error
}

func (c *bpeCounter) longPath() (*longText, error) {
	l := &c.long
	l.once.Do(func() {
		l.split, l.err = regexp2.Compile(splitPatterns[c.name], regexp2.None)
		if l.err == nil {
			l.ranks, l.err = tiktokenloader.NewOfflineLoader().LoadTiktokenBpe(rankFiles[c.name])
		}
		if l.err != nil {
			l.err = fmt.Errorf("tokens: load %s for long texts: %w", c.name, l.err)
		}
	})
	return l, l.err
}

// eachToken calls f with the byte length of every token of text, in order,
// for a text with a long run.
func (c *bpeCounter) eachToken(text string, f func(n int)) error {
	l, err := c.longPath()
	if err != nil {
		return err
	}
	enc, err := c.load()
	if err != nil {
		return err
	}
	// regexp2 reports positions in runes; walk the bytes alongside.
	m, err := l.split.FindStringMatch(text)
	byteAt, runeAt := 0, 0
	for ; err == nil && m != nil; m, err = l.split.FindNextMatch(m) {
		for runeAt < m.Index {
			_, n := utf8.DecodeRuneInString(text[byteAt:])
			byteAt += n
			runeAt++
		}
		start := byteAt
		for runeAt < m.Index+m.Length {
			_, n := utf8.DecodeRuneInString(text[byteAt:])
			byteAt += n
			runeAt++
		}
		piece := text[start:byteAt]
		if len(piece) > longPiece {
			for _, n := range mergeLong(piece, l.ranks) {
				f(n)
			}
			continue
		}
		for _, id := range enc.EncodeOrdinary(piece) {
			f(len(enc.Decode([]int{id})))
		}
	}
	if err != nil {
		return fmt.Errorf("tokens: split text: %w", err)
	}
	return nil
}

// mergeLong is tiktoken's byte-pair merge of one pre-token (repeatedly merge
// the adjacent pair whose merged bytes have the lowest rank, the leftmost on
// a tie) with a heap of candidate pairs over a linked list of parts, so it
// costs O(n log n) instead of O(n²). It returns the tokens' byte lengths.
func mergeLong(piece string, ranks map[string]int) []int {
	n := len(piece)
	next := make([]int32, n+1) // next[i]: the boundary after boundary i; n+1 past the end
	prev := make([]int32, n+1)
	for i := range next {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	removed := make([]bool, n+1)
	// rankAt is the rank of merging the part that starts at boundary i with
	// the part after it, or -1.
	rankAt := func(i int32) int64 {
		j := next[i]
		if int(j) > n || int(next[j]) > n {
			return -1
		}
		if r, ok := ranks[piece[i:next[j]]]; ok {
			return int64(r)
		}
		return -1
	}
	// A candidate is rank<<32 | boundary, so one integer comparison orders
	// by rank and then leftmost first.
	h := make(mergeHeap, 0, n)
	for i := int32(0); int(i) < n; i++ {
		if r := rankAt(i); r >= 0 {
			h = append(h, uint64(r)<<32|uint64(i))
		}
	}
	h.init()
	for len(h) > 0 {
		c := h.pop()
		at, rank := int32(c&0xffffffff), int64(c>>32)
		if removed[at] || rankAt(at) != rank {
			continue // stale: a neighbour merged since it was pushed
		}
		j := next[at]
		removed[j] = true
		next[at] = next[j]
		if int(next[j]) <= n {
			prev[next[j]] = at
		}
		if r := rankAt(at); r >= 0 {
			h.push(uint64(r)<<32 | uint64(at))
		}
		if q := prev[at]; q >= 0 {
			if r := rankAt(q); r >= 0 {
				h.push(uint64(r)<<32 | uint64(q))
			}
		}
	}
	var out []int
	for i := int32(0); int(i) < n; i = next[i] {
		out = append(out, int(next[i]-i))
	}
	return out
}

// mergeHeap is a binary min-heap of merge candidates.
type mergeHeap []uint64

func (h mergeHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *mergeHeap) push(c uint64) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *mergeHeap) pop() uint64 {
	s := *h
	c := s[0]
	s[0] = s[len(s)-1]
	*h = s[:len(s)-1]
	h.down(0)
	return c
}

func (h mergeHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
