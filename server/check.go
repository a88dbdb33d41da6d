package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mementohq/memento/internal/jsoncheck"
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
	MaxJSONDepth = jsoncheck.MaxDepth
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
			if rt.queryParams != nil && !rt.queryParams[k] {
				return badRequest("unknown query parameter %q on %s %s (it takes: %s)", k, rt.Method, rt.Path, strings.Join(slices.Sorted(maps.Keys(rt.queryParams)), ", "))
			}
			if len(k) > MaxIDBytes {
				return unprocessable("a query parameter name is longer than %d bytes", MaxIDBytes)
			}
			if err := checkText("a query parameter name", k); err != nil {
				return err
			}
			// No parameter takes a list: a second value would be ignored
			// (the first wins), so a differing one is refused, not dropped.
			if slices.ContainsFunc(vs[1:], func(v string) bool { return v != vs[0] }) {
				return badRequest("query parameter %s is given %d times with different values; send it once", k, len(vs))
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
		if slices.ContainsFunc(vs[1:], func(v string) bool { return v != vs[0] }) {
			return badRequest("Idempotency-Key is given %d times with different values; send one key", len(vs))
		}
		for _, v := range vs {
			if err := checkText("Idempotency-Key", v); err != nil {
				return err
			}
			if len(v) > MaxIDBytes {
				return unprocessable("Idempotency-Key is longer than %d bytes", MaxIDBytes)
			}
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if _, ok := r.Header["If-None-Match"]; ok {
			return badRequest("If-None-Match is not supported on %s %s: the write would not be conditional on it", r.Method, rt.Path)
		}
		if _, ok := r.Header["If-Match"]; ok && !rt.IfMatch {
			return badRequest("If-Match is not supported on %s %s: the write would not be conditional on it", r.Method, rt.Path)
		}
	}
	if vs, ok := r.Header["If-Match"]; ok && strings.TrimSpace(strings.Join(vs, "")) == "" {
		// An empty precondition is a client bug; ignoring it would turn a
		// conditional write into an unconditional one.
		return newError(problem.PreconditionFailed, `If-Match is empty; send the ETag you read (e.g. If-Match: "3") or leave the header out`)
	}
	return nil
}

// ifMatchHeader is the request's If-Match as one list: the field lines of
// a list field are that list joined by commas (RFC 9110 5.3). Reading only
// the first line evaluated a precondition the client did not send, and
// applied writes that the same list on one line is refused.
func ifMatchHeader(r *http.Request) string {
	return strings.Join(r.Header.Values("If-Match"), ", ")
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

// checkJSON checks that b is exactly one JSON value every store keeps
// faithfully (jsoncheck): malformed JSON is a 400; well-formed JSON with
// text or nesting no store keeps is a 422.
func checkJSON(b []byte) error {
	err := jsoncheck.Check(b, MaxJSONDepth)
	var je *jsoncheck.Error
	if !errors.As(err, &je) {
		return err
	}
	if je.Kind == jsoncheck.Syntax {
		return badRequest("%s", je.Detail)
	}
	return unprocessable("%s", je.Detail)
}

// checkUnreadBody refuses, on a route that acts on its path alone (a
// DELETE, a group membership), a body that is not JSON: a client sending
// one meant something, and the route would act while ignoring it. A JSON
// body is read again by the handler as it was.
func (s *Server) checkUnreadBody(w http.ResponseWriter, r *http.Request, rt *Route) error {
	if r.Body == nil || r.Body == http.NoBody || (r.Method != http.MethodDelete && !strings.Contains(rt.Path, "/members/")) {
		return nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		// Too large is 413 here as on every route that reads its body.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return newError(problem.RequestTooLarge, fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit))
		}
		return badRequest("read the body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return checkJSON(b)
}
