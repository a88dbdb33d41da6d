package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mementohq/memento/internal/jsoncheck"
)

// Redactor replaces personal data in texts with references. pii.Vault
// implements it; the service calls it once per request with every string
// the request stores.
type Redactor interface {
	Protect(ctx context.Context, tenantID string, texts []string) ([]string, error)
}

// JSONScreener is an optional Redactor capability (pii.Vault has it):
// CleanJSON reports, from a cheap scan, that Protect would change no string
// of the JSON text b, so the service may store b without decoding it.
type JSONScreener interface {
	CleanJSON(b []byte) bool
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// More would miss a stray closing bracket: nothing but space may follow.
	if len(bytes.TrimSpace(b[dec.InputOffset():])) != 0 {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// MaxDepth bounds how deeply a stored document (state, summary data,
// message metadata) nests. A deeper one could be stored but not encoded
// in any later answer; it is refused before the write.
const MaxDepth = jsoncheck.MaxDepth

// checkDoc refuses a document no backend stores faithfully or no answer
// can carry: invalid UTF-8 or a lone surrogate escape, a NUL character,
// duplicate member names, nesting deeper than MaxDepth, trailing data.
func checkDoc(what string, b []byte) error {
	if err := jsoncheck.Check(b, MaxDepth); err != nil {
		return invalid("%s: %v", what, err)
	}
	return nil
}

func encodeJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// cardNumber tells whether a JSON number may be a payment card number
// written as a number: 13 to 19 digits under a card network's prefix (Visa,
// Mastercard, Amex, Discover, JCB, Diners). The prefixes keep out other long
// integers, such as times in milliseconds, that would pass the checksum by
// chance and be turned into references; the redactor checks the rest.
func cardNumber(n json.Number) bool {
	d := string(n)
	if len(d) < 13 || len(d) > 19 || strings.Trim(d, "0123456789") != "" {
		return false
	}
	for _, p := range []string{"4", "51", "52", "53", "54", "55", "22", "23", "24", "25", "26", "27", "34", "37",
		"6011", "65", "64", "35", "36", "38", "30"} {
		if strings.HasPrefix(d, p) {
			return true
		}
	}
	return false
}

// collect appends every string in v, object keys included, and every
// number that may be a card number, in a fixed order (keys sorted) that
// substitute follows.
func collect(v any, out *[]string) {
	switch t := v.(type) {
	case json.Number:
		if cardNumber(t) {
			*out = append(*out, string(t))
		}
	case string:
		*out = append(*out, t)
	case []any:
		for _, e := range t {
			collect(e, out)
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			*out = append(*out, k)
			collect(t[k], out)
		}
	}
}

func substitute(v any, in []string, i *int) any {
	switch t := v.(type) {
	case json.Number:
		if !cardNumber(t) {
			return t
		}
		s := in[*i]
		*i++
		if s == string(t) {
			return t // not personal data: still a number
		}
		return s
	case string:
		s := in[*i]
		*i++
		return s
	case []any:
		for j, e := range t {
			t[j] = substitute(e, in, i)
		}
		return t
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make(map[string]any, len(t))
		for _, k := range keys {
			nk := in[*i]
			*i++
			out[nk] = substitute(t[k], in, i)
		}
		return out
	default:
		return v
	}
}

// jsonDoc is a decoded JSON document whose strings are redacted in one batch
// with other documents of the same request.
type jsonDoc struct {
	v     any
	start int // index of its first string in the batch
	n     int
}

// batch gathers the strings of one request for a single Protect call.
type batch struct {
	texts []string
	// created are the vault references Protect made for this request: a
	// request that then fails forgets them (Service.unprotect), so a
	// refused write leaves no personal data behind in the vault either.
	created []string
}

func (b *batch) addText(s string) int {
	b.texts = append(b.texts, s)
	return len(b.texts) - 1
}

func (b *batch) addDoc(v any) *jsonDoc {
	d := &jsonDoc{v: v, start: len(b.texts)}
	collect(v, &b.texts)
	d.n = len(b.texts) - d.start
	return d
}

func (b *batch) protect(ctx context.Context, r Redactor, tenantID string) error {
	if r == nil || len(b.texts) == 0 {
		return nil
	}
	out, err := r.Protect(ctx, tenantID, b.texts)
	if err != nil {
		return fmt.Errorf("redact personal data: %w", err)
	}
	if len(out) != len(b.texts) {
		return fmt.Errorf("redact personal data: %d texts in, %d out", len(b.texts), len(out))
	}
	for i, t := range out {
		if t != b.texts[i] {
			for _, ref := range refPattern.FindAllString(t, -1) {
				if !strings.Contains(b.texts[i], ref) {
					b.created = append(b.created, ref)
				}
			}
		}
	}
	b.texts = out
	return nil
}

// refPattern finds vault references ("pii:<kind>:<id>") in a protected text.
var refPattern = regexp.MustCompile(`pii:[a-z]+:[a-z]+`)

func (b *batch) doc(d *jsonDoc) (json.RawMessage, error) {
	i := d.start
	v := substitute(d.v, b.texts, &i)
	return encodeJSON(v)
}

// MergePatch applies an RFC 7386 JSON Merge Patch to a decoded document and
// returns the result; doc may be modified. Working on decoded values lets a
// patch parse the stored state once and encode the result once.
func MergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
			continue
		}
		d[k] = MergePatch(d[k], v)
	}
	return d
}
