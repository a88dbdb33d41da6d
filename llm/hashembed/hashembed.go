package hashembed

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/kljensen/snowball/english"

	"github.com/mementohq/memento/llm"
)

// DefaultDim is the dimension of New(0).
const DefaultDim = 256

// Feature weights of version 1. Any change to them, to the tokeniser, the
// stemmer or the hashing changes the vectors and so must bump the version in
// Model(): stored vectors are re-embedded when the identity changes.
const (
	version      = 1
	wUnigram     = 1.0
	wStopUnigram = 0.2 // stop words still count a little: "to be or not to be" is not empty
	wBigram      = 0.5
	wCharTrigram = 0.25
	maxTextRunes = 1 << 16 // longer texts are embedded on their first 64Ki runes
	kindUnigram  = 0
	kindBigram   = 1
	kindTrigram  = 2
	saltBigram   = 0x9e3779b97f4a7c15
	saltTrigram  = 0xc2b2ae3d27d4eb4f
	stopBit      = 1 << 3 // on a unigram's hash: the word is a stop word
	signBit      = 1 << 2 // on every feature's hash: subtract instead of add
)

// Embedder is the hashing embedder. It is safe for concurrent use.
type Embedder struct {
	dim   int
	pool  sync.Pool // *scratch
	stems stemCache
}

// stemCache is a direct-mapped, lock-free cache of stems: the Snowball
// stemmer is most of the cost of an embedding and words repeat. A slot holds
// an immutable entry; a collision just replaces it.
type stemCache [4096]atomic.Pointer[stemEntry]

type stemEntry struct{ word, stem string }

func (c *stemCache) stem(w string) string {
	slot := &c[xxhash.Sum64String(w)%uint64(len(c))]
	if e := slot.Load(); e != nil && e.word == w {
		return e.stem
	}
	st := english.Stem(w, false)
	slot.Store(&stemEntry{word: w, stem: st})
	return st
}

type scratch struct {
	feats []uint64
	words []string
	stems []string
}

var _ llm.Embedder = (*Embedder)(nil)

// New returns a hashing embedder of dim dimensions (DefaultDim when dim <= 0).
func New(dim int) *Embedder {
	if dim <= 0 {
		dim = DefaultDim
	}
	e := &Embedder{dim: dim}
	e.pool.New = func() any { return &scratch{} }
	return e
}

// Model is "memento-hash-v1-<dim>".
func (e *Embedder) Model() string { return fmt.Sprintf("memento-hash-v%d-%d", version, e.dim) }

// Dim is the vector length.
func (e *Embedder) Dim() int { return e.dim }

// Lexical says its vectors know words and spellings, no meanings: a search
// fuses them after full text (search.IsLexical), not beside it.
func (e *Embedder) Lexical() bool { return true }

// Embed returns one unit vector per text. A text with no word at all (empty,
// only punctuation) gets the all-zero vector, whose dot product with any
// vector is 0. It never fails except on a cancelled context.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*e.dim)
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := flat[i*e.dim : (i+1)*e.dim : (i+1)*e.dim]
		e.EmbedInto(v, t)
		out[i] = v
	}
	return out, nil
}

// EmbedInto writes the vector of text into v (len(v) must be Dim()).
func (e *Embedder) EmbedInto(v []float32, text string) {
	clear(v)
	s := e.pool.Get().(*scratch)
	defer e.pool.Put(s)
	s.words = tokenize(s.words[:0], text)
	s.stems = s.stems[:0]
	s.feats = s.feats[:0]
	for _, w := range s.words {
		st := e.stems.stem(w)
		s.stems = append(s.stems, st)
		h := xxhash.Sum64String(st) &^ (3 | stopBit)
		if isStop(w) {
			h |= stopBit
		}
		s.feats = append(s.feats, h|kindUnigram)
		if utf8.RuneCountInString(w) >= 4 && !isStop(w) {
			s.feats = appendTrigrams(s.feats, w)
		}
	}
	for i := 1; i < len(s.stems); i++ {
		a, b := s.stems[i-1], s.stems[i]
		if isStop(a) && isStop(b) {
			continue
		}
		h := mix(xxhash.Sum64String(a)*31 + xxhash.Sum64String(b) ^ saltBigram)
		s.feats = append(s.feats, tag(h, kindBigram))
	}
	if len(s.feats) == 0 {
		return
	}
	// Sort so equal features are adjacent: a run of n equal hashes is one
	// feature with term frequency n, weighted 1+ln(n) (sublinear tf).
	slices.Sort(s.feats)
	for i := 0; i < len(s.feats); {
		j := i + 1
		for j < len(s.feats) && s.feats[j] == s.feats[i] {
			j++
		}
		h := s.feats[i]
		w := weight(h)
		tf := 1 + math.Log(float64(j-i))
		idx := (h >> 32) % uint64(e.dim)
		if h&signBit != 0 {
			w = -w
		}
		v[idx] += float32(w * tf)
		i = j
	}
	llm.Normalize(v)
}

// weight is the feature's base weight from its kind (the low two bits).
func weight(h uint64) float64 {
	switch h & 3 {
	case kindBigram:
		return wBigram
	case kindTrigram:
		return wCharTrigram
	}
	if h&stopBit != 0 {
		return wStopUnigram
	}
	return wUnigram
}

func tag(h uint64, kind uint64) uint64 { return h&^3 | kind }

func isStop(w string) bool {
	switch w {
	case "no", "nor", "not": // negations carry meaning for memory claims
		return false
	}
	return english.IsStopWord(w)
}

// mix is the splitmix64 finaliser, to spread combined hashes.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func appendTrigrams(feats []uint64, w string) []uint64 {
	// "^" and "$" mark the word boundaries, so prefixes and suffixes differ
	// from the same letters inside a word.
	var buf [64]byte
	b := append(append(append(buf[:0], '^'), w...), '$')
	// Byte offsets of rune starts, to cut on rune boundaries.
	var starts [66]int
	n := 0
	for i := 0; i < len(b) && n < len(starts); {
		starts[n] = i
		n++
		_, sz := utf8.DecodeRune(b[i:])
		i += sz
	}
	for k := 0; k+3 <= n; k++ {
		end := len(b)
		if k+3 < n {
			end = starts[k+3]
		}
		h := mix(xxhash.Sum64(b[starts[k]:end]) ^ saltTrigram)
		feats = append(feats, tag(h, kindTrigram))
	}
	return feats
}

// tokenize appends the lowercased words of text: maximal runs of letters and
// digits; apostrophes inside a word are dropped ("don't" -> "dont", "user's"
// -> "users").
func tokenize(dst []string, text string) []string {
	if utf8.RuneCountInString(text) > maxTextRunes {
		text = string([]rune(text)[:maxTextRunes])
	}
	var sb strings.Builder
	flush := func() {
		if sb.Len() > 0 {
			dst = append(dst, sb.String())
			sb.Reset()
		}
	}
	rs := []rune(text)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			sb.WriteRune(unicode.ToLower(r))
		case (r == '\'' || r == '’') && sb.Len() > 0 && i+1 < len(rs) && (unicode.IsLetter(rs[i+1])):
			// inside a word: skip it
		default:
			flush()
		}
	}
	flush()
	return dst
}
