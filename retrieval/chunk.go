package retrieval

import (
	"fmt"
	"unicode/utf8"

	"github.com/mementohq/memento/tokens"
)

// Chunking defaults: windows of 200 o200k_base tokens, each starting 160
// tokens after the previous one, so 40 tokens of context carry over a
// boundary and a sentence cut in two is whole in one of the chunks.
const (
	DefaultChunkTokens   = 200
	DefaultOverlapTokens = 40
)

// Split cuts text into windows of size tokens overlapping by overlap
// tokens. Every chunk is an exact substring of text: windows are mapped to
// byte offsets and moved to rune boundaries, so a token that splits a
// multi-byte character never yields invalid UTF-8.
func Split(text string, size, overlap int) ([]string, error) {
	if size <= 0 || overlap < 0 || overlap >= size {
		return nil, fmt.Errorf("%w: chunk size %d and overlap %d", ErrInvalidInput, size, overlap)
	}
	if text == "" {
		return nil, nil
	}
	toks, err := tokens.Lengths(tokens.O200kBase, text)
	if err != nil {
		return nil, err
	}
	// offs[i] is the byte offset where token i starts; the tokens' bytes
	// concatenate to text.
	offs := make([]int, len(toks)+1)
	for i, n := range toks {
		offs[i+1] = offs[i] + n
	}
	if offs[len(toks)] != len(text) {
		// Not expected from a byte-level BPE; fall back to the whole text
		// rather than cut at wrong offsets.
		return []string{text}, nil
	}
	var out []string
	step := size - overlap
	for start := 0; start < len(toks); start += step {
		end := min(start+size, len(toks))
		a, b := runeStart(text, offs[start]), runeStart(text, offs[end])
		if end == len(toks) {
			b = len(text)
		}
		if b > a {
			out = append(out, text[a:b])
		}
		if end == len(toks) {
			break
		}
	}
	return out, nil
}

// runeStart moves i back to the start of the rune it falls in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// Chunks splits a document version into its chunks.
func Chunks(d Document, size, overlap int) ([]Chunk, error) {
	parts, err := Split(d.Content, size, overlap)
	if err != nil {
		return nil, err
	}
	out := make([]Chunk, len(parts))
	for i, p := range parts {
		out[i] = Chunk{ChunkID: ChunkID(d.DocumentID, d.Version, i), DocumentID: d.DocumentID, Version: d.Version, N: i,
			Text: p, Digest: Digest(p), SourceURI: d.SourceURI, SourceVersion: d.SourceVersion, Terms: EncodeTerms(p)}
	}
	return out, nil
}
