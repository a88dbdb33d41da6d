// Package jsoncheck checks that a JSON text is one that every store keeps
// faithfully and every later answer can carry: exactly one value, valid
// UTF-8 with no lone surrogate escape, no NUL character, no duplicate
// member name, nested no deeper than a bound.
package jsoncheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is the nesting bound of stored documents and request bodies.
const MaxDepth = 64

// Kind says what is wrong with a text.
type Kind int

// The kinds of Error: Syntax (malformed, including duplicate names and
// trailing data) is the caller's bad JSON; Text (NUL, invalid UTF-8, lone
// surrogate) and Depth are well-formed JSON no store keeps.
const (
	Syntax Kind = iota + 1
	Text
	Depth
)

// Error is a refused text: its kind and a detail for the caller.
type Error struct {
	Kind   Kind
	Detail string
}

func (e *Error) Error() string { return e.Detail }

var decoders = sync.Pool{New: func() any { return new(decoder) }}

type decoder struct {
	rd  bytes.Reader
	dec jsontext.Decoder
}

var nulEscape = []byte(`\u0000`)

// Check returns nil for an acceptable text and an *Error otherwise. An
// empty text (nothing but space) is accepted: whether a value is required
// is the caller's rule.
func Check(b []byte, maxDepth int) error {
	d := decoders.Get().(*decoder)
	defer decoders.Put(d)
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	top := d.dec.PeekKind()
	for started := false; ; started = true {
		if started && d.dec.StackDepth() == 0 {
			if _, err := d.dec.ReadToken(); err != io.EOF {
				if top == '{' {
					return &Error{Syntax, "unexpected data after the JSON object"}
				}
				return &Error{Syntax, "unexpected data after the JSON value"}
			}
			return nil
		}
		if d.dec.PeekKind() == '"' {
			v, err := d.dec.ReadValue()
			if err != nil {
				return classify(b, err)
			}
			if bytes.Contains(v, nulEscape) {
				if s, err := jsontext.AppendUnquote(nil, v); err == nil && bytes.IndexByte(s, 0) >= 0 {
					return &Error{Text, fmt.Sprintf("a JSON string contains a NUL character (\\u0000) at %s; no store keeps it", where(d.dec.StackPointer()))}
				}
			}
			continue
		}
		if d.dec.PeekKind() == '0' {
			v, err := d.dec.ReadValue()
			if err != nil {
				return classify(b, err)
			}
			if !numberInRange(v) {
				return &Error{Text, fmt.Sprintf("the number %.40s at %s is outside the range of a double (beyond about ±1.8e308, or too small to tell from 0); JSON parsers, and so stores and clients, do not keep it", v, where(d.dec.StackPointer()))}
			}
			continue
		}
		tok, err := d.dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return classify(b, err)
		}
		if k := tok.Kind(); (k == '{' || k == '[') && d.dec.StackDepth() > maxDepth {
			return &Error{Depth, fmt.Sprintf("JSON nests deeper than %d levels (at %s); flatten the document", maxDepth, where(d.dec.StackPointer()))}
		}
	}
}

// classify words a jsontext error: the same text read leniently tells an
// encoding problem from a syntax one.
func classify(b []byte, err error) error {
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return &Error{Syntax, "malformed JSON: " + trim(err)}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	var lerr error
	for lerr == nil {
		_, lerr = dec.ReadToken()
	}
	switch {
	case lerr == io.EOF:
		return &Error{Text, "a JSON string is not valid UTF-8 or has a lone surrogate escape (such as \\ud800 without its pair): " + trim(err)}
	case errors.Is(lerr, io.ErrUnexpectedEOF):
		return &Error{Syntax, "malformed JSON: the body ends in the middle of a value"}
	}
	return &Error{Syntax, "malformed JSON: " + trim(lerr)}
}

func trim(err error) string { return strings.TrimPrefix(err.Error(), "jsontext: ") }

func where(p jsontext.Pointer) string {
	if p == "" {
		return "the top level"
	}
	return fmt.Sprintf("%q", string(p))
}

// numberInRange tells whether a JSON number is one a double holds: not
// infinite once parsed, and not a non-zero value that parses to 0. Such
// numbers are refused because the stores disagree on them (PostgreSQL's
// jsonb overflows past 1e131072 and writes 1e400 out as 401 digits, SQLite
// keeps the text), and so do the clients that read them back. A plain
// number of up to 300 characters needs no parse.
func numberInRange(v []byte) bool {
	if len(v) <= 300 && !bytes.ContainsAny(v, "eE") {
		return true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return false
	}
	if f == 0 {
		mant := v
		if i := bytes.IndexAny(v, "eE"); i >= 0 {
			mant = v[:i]
		}
		return !bytes.ContainsAny(mant, "123456789")
	}
	return true
}

// Keepable reports whether a plain string (not JSON) is text every store
// keeps as it is: valid UTF-8 without NUL.
func Keepable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
