package tokens

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// The exact encodings.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
	// ApproxName is the Name() of the approximate counter.
	ApproxName = "approx-v1"
)

// Counter counts the tokens of a text for one tokenizer. Exact() is false
// when the count is an estimate. Implementations are safe for concurrent use.
type Counter interface {
	Count(text string) int
	Name() string
	Exact() bool
}

// cacheEntries bounds the per-encoding cache of counts. Texts shorter than
// cacheMinBytes are counted directly: hashing and locking would cost about
// as much as encoding them.
const (
	cacheEntries  = 8192
	cacheMinBytes = 64
)

func init() {
	// The encodings ship in the binary (tiktoken-go-loader embeds them): the
	// default loader would download them at first use.
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
}

// bpeCounter is an exact counter for one tiktoken encoding. The encoding is
// loaded on first use (it takes a fraction of a second and tens of MB).
type bpeCounter struct {
	name  string
	once  sync.Once
	enc   *tiktoken.Tiktoken
	err   error
	seed  maphash.Seed
	cache *lru.Cache[cacheKey, int]
	long  longText
}

type cacheKey struct {
	h uint64
	n int
}

var (
	o200k  = newBPE(O200kBase)
	cl100k = newBPE(Cl100kBase)
)

func newBPE(name string) *bpeCounter {
	c, err := lru.New[cacheKey, int](cacheEntries)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &bpeCounter{name: name, seed: maphash.MakeSeed(), cache: c}
}

func (c *bpeCounter) load() (*tiktoken.Tiktoken, error) {
	c.once.Do(func() {
		c.enc, c.err = tiktoken.GetEncoding(c.name)
		if c.err != nil {
			c.err = fmt.Errorf("tokens: load encoding %s: %w", c.name, c.err)
		}
	})
	return c.enc, c.err
}

func (c *bpeCounter) Name() string { return c.name }
func (c *bpeCounter) Exact() bool  { return true }

// Count is the exact number of tokens of text. Special-token text such as
// "<|endoftext|>" is counted as ordinary text, as an API counts user content.
func (c *bpeCounter) Count(text string) int {
	if text == "" {
		return 0
	}
	enc, err := c.load()
	if err != nil {
		// The encodings are embedded, so this is a broken build; an estimate
		// keeps budgets working rather than panicking in a request.
		return approxCount(text)
	}
	if len(text) < cacheMinBytes {
		return len(enc.EncodeOrdinary(text))
	}
	k := keyOf(c, text)
	if n, ok := c.cache.Get(k); ok {
		return n
	}
	var n int
	if !hasLongRun(text) {
		n = len(enc.EncodeOrdinary(text))
	} else if err := c.eachToken(text, func(int) { n++ }); err != nil {
		return approxCount(text)
	}
	c.cache.Add(k, n)
	return n
}

// Lengths returns the byte length of every token of text in an encoding
// (O200kBase, Cl100kBase), in order; they add up to len(text), so they map
// token positions to byte offsets.
func Lengths(encoding, text string) ([]int, error) {
	c, err := bpeOf(encoding)
	if err != nil {
		return nil, err
	}
	enc, err := c.load()
	if err != nil {
		return nil, err
	}
	var out []int
	if hasLongRun(text) {
		err := c.eachToken(text, func(n int) { out = append(out, n) })
		return out, err
	}
	for _, id := range enc.EncodeOrdinary(text) {
		out = append(out, len(enc.Decode([]int{id})))
	}
	return out, nil
}

func keyOf(c *bpeCounter, text string) cacheKey {
	return cacheKey{h: maphash.String(c.seed, text), n: len(text)}
}

// Encoding returns the exact counter of an encoding by name (O200kBase,
// Cl100kBase).
func Encoding(name string) (Counter, error) {
	c, err := bpeOf(name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func bpeOf(name string) (*bpeCounter, error) {
	switch name {
	case O200kBase:
		return o200k, nil
	case Cl100kBase:
		return cl100k, nil
	}
	return nil, fmt.Errorf("tokens: unknown encoding %q", name)
}

// ForModel returns the counter for a model name. OpenAI's gpt-4o, gpt-4.1,
// gpt-4.5, gpt-5, o1, o3 and o4 families count with o200k_base; gpt-4,
// gpt-3.5 and the text-embedding-3 / ada-002 models with cl100k_base. A
// provider prefix ("openai/gpt-4o", "openai:gpt-4o") is ignored. Any other
// model (Llama, Mistral, Claude, ...) gets Approx(), whose Exact() is false.
func ForModel(model string) Counter {
	switch familyOf(model) {
	case O200kBase:
		return o200k
	case Cl100kBase:
		return cl100k
	}
	return approx{}
}

func familyOf(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	// A fine-tuned OpenAI model ("ft:gpt-4o-mini-2024-07-18:org:name:id")
	// counts with its base model's encoding.
	if rest, ok := strings.CutPrefix(m, "ft:"); ok {
		m, _, _ = strings.Cut(rest, ":")
	} else if i := strings.LastIndexByte(m, ':'); i >= 0 {
		m = m[i+1:]
	}
	has := func(p string) bool { return m == p || strings.HasPrefix(m, p+"-") || strings.HasPrefix(m, p+".") }
	switch {
	case has("gpt-4o"), has("chatgpt-4o"), has("gpt-4.1"), has("gpt-4.5"), has("gpt-5"),
		has("o1"), has("o3"), has("o4"), strings.HasPrefix(m, "omni-moderation"):
		return O200kBase
	case has("gpt-4"), has("gpt-3.5"), has("gpt-35"), strings.HasPrefix(m, "text-embedding-3"),
		m == "text-embedding-ada-002":
		return Cl100kBase
	}
	return ""
}

// Approx returns the approximate counter used for unknown models.
func Approx() Counter { return approx{} }

// approx estimates tokens as max(ceil(bytes/4), ceil(words*4/3), CJK
// characters, pieces): about right for English prose on BPE tokenizers and
// on the high side for code and other scripts, since a budget that
// over-counts is safe and one that under-counts overflows the window.
// Pieces are what a BPE pre-tokenizer splits apart and no merge joins
// again: letter runs, digits in groups of three, runs of ASCII punctuation,
// and other symbols (an emoji) at a token per byte after the first, so that
// ids, hashes, numbers and emoji, where bytes/4 and words fall far short,
// are not under-counted.
type approx struct{}

func (approx) Name() string          { return ApproxName }
func (approx) Exact() bool           { return false }
func (approx) Count(text string) int { return approxCount(text) }

func approxCount(text string) int {
	if text == "" {
		return 0
	}
	byBytes := (len(text) + 3) / 4
	words, cjk := 0, 0
	in := false
	pieces, digits, prev := 0, 0, -1
	for _, r := range text {
		if unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r) {
			cjk++
		}
		c := runeClass(r)
		switch {
		case c == 0:
			if digits%3 == 0 {
				pieces++
			}
			digits++
		case c == 1 && prev != 1:
			pieces++
		case c == 3 && r >= utf8.RuneSelf:
			// a symbol outside ASCII (an emoji) is mostly byte-level
			// tokens: count one per byte after its first
			pieces += max(utf8.RuneLen(r)-1, 1)
		case c == 3 && prev != 3:
			pieces++
		}
		if c != 0 {
			digits = 0
		}
		prev = c
		if unicode.IsSpace(r) || (unicode.IsPunct(r) && r != '\'') {
			if unicode.IsPunct(r) {
				words++ // punctuation is usually its own token
			}
			in = false
			continue
		}
		if !in {
			words++
			in = true
		}
	}
	// A tenth more pieces for the ones a vocabulary lacks whole (a rare
	// run of letters splits in two).
	return max(byBytes, (words*4+2)/3, cjk, (pieces*11+9)/10)
}
