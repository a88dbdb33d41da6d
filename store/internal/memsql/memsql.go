package memsql

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/kljensen/snowball/english"

	"github.com/mementohq/memento/memory"
)

// MaxWords bounds the words of one full-text query: a query is ORed words,
// and a pasted paragraph must not become a thousand-branch query.
const MaxWords = 64

// splitWords is the lowercase letter/digit runs of s.
func splitWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Stem is the Porter2 (snowball english) stem of a lowercase word.
func Stem(w string) string { return english.Stem(w, true) }

// Tokens is what full text indexes of text: every lowercase letter/digit
// run, stemmed, in order, repeats kept (they are the term frequencies).
func Tokens(text string) []string {
	ws := splitWords(text)
	for i, w := range ws {
		ws[i] = Stem(w)
	}
	return ws
}

// QueryTokens is Words, stemmed and deduplicated again (two words may share a stem).
func QueryTokens(terms []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range Words(terms) {
		if s := Stem(w); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Words splits query terms into lowercase letter/digit runs, deduplicated,
// at most MaxWords. What comes out has no character a query syntax could
// read as an operator, so a backend may quote it as a plain word.
func Words(terms []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range terms {
		for _, w := range splitWords(t) {
			if seen[w] {
				continue
			}
			seen[w] = true
			out = append(out, w)
			if len(out) == MaxWords {
				return out
			}
		}
	}
	return out
}

// scope is one token naming a hash of parts. It starts with a letter and
// ends with a digit: a Porter stemmer leaves it alone, and a unicode61
// tokenizer keeps it whole.
func scope(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return prefix + hex.EncodeToString(h.Sum(nil)[:16]) + "0"
}

// SubjectScope is the token every full-text row of (tenant, subject) carries
// in its scope column, and the prefix of every token of its text.
func SubjectScope(tenantID, subjectID string) string {
	return scope("s", tenantID, subjectID)
}

// NamespaceScope is the token of the rows of (tenant, subject, namespace).
func NamespaceScope(tenantID, subjectID, namespace string) string {
	return scope("n", tenantID, subjectID, namespace)
}

// EncodeVector is vs as little-endian float32s.
func EncodeVector(vs []float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// DecodeVector reads EncodeVector's format, checking it holds dim values.
func DecodeVector(b []byte, dim int) ([]float32, error) {
	if len(b) != 4*dim {
		return nil, fmt.Errorf("vector blob of %d bytes does not hold %d float32s", len(b), dim)
	}
	out := make([]float32, dim)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// ACLScope is the token a retrieval chunk's full-text row carries for one
// entry of its document's ACL in a tenant, so a query MATCHes
// `acl:(E1 OR E2 ...) AND body:(...)` and never scores an unreadable chunk.
func ACLScope(tenantID, entry string) string {
	return scope("a", tenantID, entry)
}

// AsStored is c as a store gives it back: times at microsecond precision
// in UTC, its own copy of the value, and no empty message id list (the
// provenance JSON leaves it out). A store returns what it wrote without
// reading it back.
func AsStored(c memory.Claim) memory.Claim {
	c.Value = append(json.RawMessage(nil), c.Value...)
	if len(c.Provenance.MessageIDs) == 0 {
		c.Provenance.MessageIDs = nil
	} else {
		c.Provenance.MessageIDs = append([]string(nil), c.Provenance.MessageIDs...)
	}
	c.ValidFrom, c.CreatedAt, c.ConfirmedAt = micros(c.ValidFrom), micros(c.CreatedAt), micros(c.ConfirmedAt)
	c.ExpiresAt, c.InvalidatedAt, c.SupersededAt = microsPtr(c.ExpiresAt), microsPtr(c.InvalidatedAt), microsPtr(c.SupersededAt)
	return c
}

func micros(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()).UTC() }

func microsPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := micros(*t)
	return &m
}
