package glove

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/mementohq/memento/llm"
)

// SIFA is the a of the SIF weight a/(a+p(w)) (Arora et al., 2017).
const SIFA = 1e-3

// maxTextRunes bounds the text embedded; longer texts use their start.
const maxTextRunes = 1 << 16

// Embedder is a loaded vector file. Embed is smooth-inverse-frequency (SIF)
// weighted mean pooling of the known words' vectors, each minus the corpus
// mean vector, normalised. The mean is the p(w)-weighted mean of all word
// vectors: a corpus-free stand-in for the SIF paper's common-component
// removal, which needs the caller's texts. Without it every pair of English
// sentences scored 0.4-0.8 and rankings were noisy; with it unrelated
// sentences score near 0. Unknown words are skipped; a text with no known
// word gets the all-zero vector (not a hashed fallback: a hashed vector in
// another space would match GloVe vectors at random). It is safe for
// concurrent use.
type Embedder struct {
	t      *table
	index  map[string]int32
	weight []float32 // SIF weight per rank
	mean   []float32 // p(w)-weighted mean of the vectors
	model  string
}

var _ llm.Embedder = (*Embedder)(nil)

// Load reads a vector file written by Install or WriteFile and verifies it.
func Load(path string) (*Embedder, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("glove: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	e := &Embedder{t: t, index: make(map[string]int32, len(t.words)), weight: make([]float32, len(t.words))}
	for i, w := range t.words {
		e.index[w] = int32(i)
	}
	// Zipf estimate of p(w) from the rank order: p(rank r) = 1/((r+1) H_N),
	// H_N the N-th harmonic number, so the estimates sum to 1.
	var h float64
	for r := 1; r <= len(t.words); r++ {
		h += 1 / float64(r)
	}
	mean := make([]float64, t.dim)
	row := make([]float32, t.dim)
	for r := range e.weight {
		p := 1 / (float64(r+1) * h)
		e.weight[r] = float32(SIFA / (SIFA + p))
		clear(row)
		e.addRow(row, int32(r), 1)
		for j, x := range row {
			mean[j] += p * float64(x)
		}
	}
	e.mean = make([]float32, t.dim)
	for j, x := range mean {
		e.mean[j] = float32(x)
	}
	name := t.name
	if name == "" {
		name = fmt.Sprintf("glove-%dd", t.dim)
	}
	// The identity names the family, the pooling, the row precision and the
	// data (a digest prefix), so new data or new pooling re-embeds.
	e.model = fmt.Sprintf("%s-sif-v1-%s-%s", name, t.enc, t.digest[:8])
	return e, nil
}

// Model is "<name>-sif-v1-<f16|f32>-<8 hex of the file digest>", e.g.
// "glove-6b-100d-sif-v1-f16-1a2b3c4d".
func (e *Embedder) Model() string { return e.model }

// Dim is the vector length.
func (e *Embedder) Dim() int { return e.t.dim }

// Vocab is the number of words.
func (e *Embedder) Vocab() int { return len(e.t.words) }

// Embed returns one vector per text; it fails only on a cancelled context.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*e.t.dim)
	for i, text := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := flat[i*e.t.dim : (i+1)*e.t.dim : (i+1)*e.t.dim]
		e.EmbedInto(v, text)
		out[i] = v
	}
	return out, nil
}

// EmbedInto writes the vector of text into v (len(v) must be Dim()) and
// reports how many words were known.
func (e *Embedder) EmbedInto(v []float32, text string) int {
	clear(v)
	known := 0
	var total float32
	forEachWord(text, e.known, func(w string) {
		r, ok := e.lookup(w)
		if !ok {
			return
		}
		known++
		total += e.weight[r]
		e.addRow(v, r, e.weight[r])
	})
	for j, m := range e.mean {
		v[j] -= total * m
	}
	if known == 0 || !llm.Normalize(v) {
		clear(v)
		return 0
	}
	return known
}

// Vector returns the stored vector of a word, if known.
func (e *Embedder) Vector(word string) ([]float32, bool) {
	r, ok := e.lookup(strings.ToLower(word))
	if !ok {
		return nil, false
	}
	v := make([]float32, e.t.dim)
	e.addRow(v, r, 1)
	return v, true
}

func (e *Embedder) addRow(v []float32, r int32, w float32) {
	d := e.t.dim
	if e.t.enc == Float16 {
		row := e.t.rows[int(r)*d*2 : (int(r)+1)*d*2]
		for j := range v[:d] {
			v[j] += w * f16Table[binary.LittleEndian.Uint16(row[2*j:])]
		}
		return
	}
	row := e.t.rows[int(r)*d*4 : (int(r)+1)*d*4]
	for j := range v[:d] {
		v[j] += w * math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:]))
	}
}

func (e *Embedder) known(w string) bool {
	_, ok := e.lookup(w)
	return ok
}

func (e *Embedder) lookup(w string) (int32, bool) {
	if r, ok := e.index[w]; ok {
		return r, true
	}
	if !isASCII(w) {
		if r, ok := e.index[fold(w)]; ok {
			return r, true
		}
	}
	return 0, false
}

// forEachWord calls fn with the lowercased words of text as GloVe's
// vocabulary spells them: letter/digit runs, a hyphenated compound whole
// ("e-mail") when it is one token, English contractions expanded ("don't" ->
// "do", "not"; "'s" dropped), and a few symbols GloVe knows ("$", "%").
func forEachWord(text string, known func(string) bool, fn func(string)) {
	if utf8.RuneCountInString(text) > maxTextRunes {
		text = string([]rune(text)[:maxTextRunes])
	}
	text = strings.ToLower(text)
	i := 0
	for i < len(text) {
		r, sz := utf8.DecodeRuneInString(text[i:])
		if !isWordRune(r) {
			if r == '$' || r == '%' || r == '&' {
				fn(string(r))
			}
			i += sz
			continue
		}
		j := i
		for j < len(text) {
			r2, sz2 := utf8.DecodeRuneInString(text[j:])
			if isWordRune(r2) {
				j += sz2
				continue
			}
			// An apostrophe or hyphen between two word characters stays in.
			if (r2 == '\'' || r2 == '’' || r2 == '-') && j+sz2 < len(text) {
				if r3, _ := utf8.DecodeRuneInString(text[j+sz2:]); isWordRune(r3) {
					j += sz2
					continue
				}
			}
			break
		}
		emitToken(strings.ReplaceAll(text[i:j], "’", "'"), known, fn)
		i = j
	}
}

func emitToken(tok string, known func(string) bool, fn func(string)) {
	if strings.Contains(tok, "'") {
		base, suffix, _ := strings.Cut(tok, "'")
		switch suffix {
		case "t":
			if strings.HasSuffix(base, "n") {
				switch b := strings.TrimSuffix(base, "n"); b {
				case "wo":
					fn("will")
				case "ca":
					fn("can")
				case "sha":
					fn("shall")
				default:
					emitToken(b, known, fn)
				}
				fn("not")
				return
			}
		case "s", "d":
			emitToken(base, known, fn) // possessive or "is"/"would": the base carries it
			return
		case "re":
			emitToken(base, known, fn)
			fn("are")
			return
		case "ll":
			emitToken(base, known, fn)
			fn("will")
			return
		case "ve":
			emitToken(base, known, fn)
			fn("have")
			return
		case "m":
			emitToken(base, known, fn)
			fn("am")
			return
		}
		// o'brien and the like: the parts.
		for _, p := range strings.Split(tok, "'") {
			if p != "" {
				fn(p)
			}
		}
		return
	}
	if strings.Contains(tok, "-") {
		if known(tok) {
			fn(tok)
			return
		}
		for _, p := range strings.Split(tok, "-") {
			if p != "" {
				fn(p)
			}
		}
		return
	}
	fn(tok)
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fold strips diacritics ("café" -> "cafe"): the vocabulary is ASCII mostly.
func fold(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
