package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mementohq/memento/problem"
)

// Boundary limits, checked before any store sees a request, so every
// backend answers the same: PostgreSQL refuses NUL and invalid UTF-8 in a
// statement (it would answer 500), SQLite would store them and serve
// invalid JSON back, and a document nested thousands of levels deep is
// stored and then cannot be encoded in any later answer.
const (
	// MaxJSONDepth bounds how deeply a request body nests, the body's own
	// object counting as one level; a stored document (state, payload,
	// metadata) inside a body is therefore shallower still.
	MaxJSONDepth = 64
	// MaxIDBytes bounds a path id, an id-like header (Idempotency-Key)
	// and the name of a query parameter.
	MaxIDBytes = 256
	// MaxQueryValueBytes bounds one query parameter value (cursors included).
	MaxQueryValueBytes = 1024
)

// checkText refuses text no backend stores faithfully: NUL, or bytes that
// are not UTF-8 (a Go string cannot hold a lone surrogate as valid UTF-8).
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return unprocessable("%s is not valid UTF-8", what)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return unprocessable("%s contains a NUL character", what)
	}
	return nil
}

// checkRequest checks the parts of a request every route shares: path
// ids, query parameters and id-like headers. Bodies are checked when read.
func checkRequest(r *http.Request, rt *Route) error {
	for _, name := range rt.pathParams {
		v := r.PathValue(name)
		if err := checkText("path parameter "+name, v); err != nil {
			return err
		}
		if len(v) > MaxIDBytes {
			return unprocessable("path parameter %s is longer than %d bytes", name, MaxIDBytes)
		}
	}
	if r.URL.RawQuery != "" {
		q, err := query(r)
		if err != nil {
			return err
		}
		for k, vs := range q {
			if len(k) > MaxIDBytes {
				return unprocessable("a query parameter name is longer than %d bytes", MaxIDBytes)
			}
			if err := checkText("a query parameter name", k); err != nil {
				return err
			}
			for _, v := range vs {
				if err := checkText("query parameter "+k, v); err != nil {
					return err
				}
				if len(v) > MaxQueryValueBytes {
					return unprocessable("query parameter %s is longer than %d bytes", k, MaxQueryValueBytes)
				}
			}
		}
	}
	if vs, ok := r.Header["Idempotency-Key"]; ok {
		for _, v := range vs {
			if err := checkText("Idempotency-Key", v); err != nil {
				return err
			}
			if len(v) > MaxIDBytes {
				return unprocessable("Idempotency-Key is longer than %d bytes", MaxIDBytes)
			}
		}
	}
	if vs, ok := r.Header["If-Match"]; ok && strings.TrimSpace(strings.Join(vs, "")) == "" {
		// An empty precondition is a client bug; ignoring it would turn a
		// conditional write into an unconditional one.
		return newError(problem.PreconditionFailed, `If-Match is empty; send the ETag you read (e.g. If-Match: "3") or leave the header out`)
	}
	return nil
}

// pathParams lists the {wildcards} of a ServeMux path pattern.
func pathParams(path string) []string {
	var names []string
	for seg := range strings.SplitSeq(path, "/") {
		if len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
			names = append(names, strings.TrimSuffix(seg[1:len(seg)-1], "..."))
		}
	}
	return names
}

var decoders = sync.Pool{New: func() any { return new(bodyDecoder) }}

type bodyDecoder struct {
	rd  bytes.Reader
	dec jsontext.Decoder
}

var nulEscape = []byte(`\u0000`)

// checkJSON checks that b is exactly one JSON value (nothing after it), of
// valid UTF-8 with no lone surrogate escape, no NUL character, no
// duplicate member name, nested at most MaxJSONDepth levels. Malformed
// JSON is a 400; well-formed JSON with text or depth no store keeps is a 422.
func checkJSON(b []byte) error {
	d := decoders.Get().(*bodyDecoder)
	defer decoders.Put(d)
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	for started := false; ; started = true {
		if started && d.dec.StackDepth() == 0 {
			if _, err := d.dec.ReadToken(); err != io.EOF {
				return badRequest("unexpected data after the JSON object")
			}
			return nil
		}
		if d.dec.PeekKind() == '"' {
			v, err := d.dec.ReadValue()
			if err != nil {
				return jsonError(b, err)
			}
			if bytes.Contains(v, nulEscape) {
				if s, err := jsontext.AppendUnquote(nil, v); err == nil && bytes.IndexByte(s, 0) >= 0 {
					return unprocessable("a JSON string contains a NUL character (\\u0000) at %s; no store keeps it", pointerOf(d.dec.StackPointer()))
				}
			}
			continue
		}
		tok, err := d.dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return jsonError(b, err)
		}
		if k := tok.Kind(); (k == '{' || k == '[') && d.dec.StackDepth() > MaxJSONDepth {
			return unprocessable("JSON nests deeper than %d levels (at %s); flatten the document", MaxJSONDepth, pointerOf(d.dec.StackPointer()))
		}
	}
}

// jsonError words a jsontext error: text that is not UTF-8 (or a lone
// surrogate escape) is 422, a duplicate name or broken syntax 400.
func jsonError(b []byte, err error) error {
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return badRequest("malformed JSON: %v", trimJSONErr(err))
	}
	// The same text read leniently tells an encoding problem from a syntax one.
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	var lerr error
	for lerr == nil {
		_, lerr = dec.ReadToken()
	}
	if lerr == io.EOF {
		return unprocessable("a JSON string is not valid UTF-8 or has a lone surrogate escape (such as \\ud800 without its pair): %v", trimJSONErr(err))
	}
	if errors.Is(lerr, io.ErrUnexpectedEOF) {
		return badRequest("malformed JSON: the body ends in the middle of a value")
	}
	return badRequest("malformed JSON: %v", trimJSONErr(lerr))
}

func trimJSONErr(err error) string { return strings.TrimPrefix(err.Error(), "jsontext: ") }

// pointerOf says where in the body a problem is, as a JSON Pointer.
func pointerOf(p jsontext.Pointer) string {
	if p == "" {
		return "the top level"
	}
	return fmt.Sprintf("%q", string(p))
}
