package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mementohq/memento/problem"
)

// decodeJSON reads a request body into dst strictly: a JSON object, no
// unknown fields, nothing after it, at most s.maxBody bytes. Every failure is
// a 4xx problem whose detail says what is wrong.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := s.readJSONObject(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(body, dst)
}

// readJSONObject checks the Content-Type and reads the body, which must
// look like a JSON object; it returns the body trimmed of whitespace.
func (s *Server) readJSONObject(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// The usual exact value skips parsing; anything else is parsed.
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			// Strict on purpose: a browser can send form or text bodies
			// cross-site without a CORS preflight, JSON it cannot.
			return nil, newError(problem.UnsupportedMediaType, fmt.Sprintf("Content-Type %q is not JSON; send Content-Type: application/json (with curl: --json, or -H 'Content-Type: application/json')", ct))
		}
	}
	body, err := s.readBody(w, r, "; keep large payloads in an artifact store and send a digest and URI instead")
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, badRequest("the request body is empty; a JSON object is required")
	}
	if err := checkJSON(trimmed); err != nil {
		return nil, err
	}
	if trimmed[0] != '{' {
		return nil, badRequest("the request body must be a JSON object")
	}
	return trimmed, nil
}

// decodeStrict decodes a body readJSONObject returned (and checkJSON
// passed) into dst: member names match exactly, case included, and an
// unknown one is refused, so a typo never silently drops a field.
func decodeStrict(trimmed []byte, dst any) error {
	if err := jsonv2.Unmarshal(trimmed, dst, jsonv2.RejectUnknownMembers(true)); err != nil {
		return decodeError(err)
	}
	return nil
}

// bodyLimitKey holds a route's own body limit (Route.MaxBody).
type bodyLimitKey struct{}

// bodyLimit is the most a request's body may hold: its route's own limit
// when that is larger, else the server's.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if n, ok := r.Context().Value(bodyLimitKey{}).(int64); ok && n > s.maxBody {
		return n
	}
	return s.maxBody
}

// readBody reads the request body, at most bodyLimit bytes: a longer one is
// a 413 problem whose detail ends with hint.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, hint string) ([]byte, error) {
	var buf []byte
	limit := s.bodyLimit(r)
	if n := r.ContentLength; n > 0 && n < limit {
		// A declared length sizes the buffer once (the reader still checks
		// it); only up to presizeLimit, so a length alone reserves little.
		buf = make([]byte, 0, min(n+1, presizeLimit))
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), buf)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newError(problem.RequestTooLarge, fmt.Sprintf("the request body exceeds %d bytes%s", mbe.Limit, hint))
		}
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return body, nil
}

// presizeLimit bounds the buffer a declared Content-Length reserves
// before any of the body has arrived.
const presizeLimit = 64 << 10

// readAll is io.ReadAll into buf, which may come presized.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf) == 0 {
		buf = make([]byte, 0, 512)
	}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// decodeError words a decoding error of well-formed JSON: which field,
// and what it must be.
func decodeError(err error) error {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return badRequest("cannot decode the body: %v", err)
	}
	path := strings.ReplaceAll(strings.TrimPrefix(string(se.JSONPointer), "/"), "/", ".")
	goType := "" // the field's type, without pointers
	if se.GoType != nil {
		goType = strings.TrimLeft(se.GoType.String(), "*")
	}
	switch {
	case errors.Is(se.Err, jsonv2.ErrUnknownName):
		// The pointer's last token, unescaped: a name may hold '.' or '/'.
		return badRequest("unknown field %q (field names are case-sensitive)", se.JSONPointer.LastToken())
	case path == "":
		return badRequest("the request body must be a JSON object")
	case se.JSONKind == '0' && (strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint")):
		return badRequest("field %q must be a whole number within the field's range", path)
	case se.JSONKind == '0' && strings.HasPrefix(goType, "float"):
		return badRequest("field %q: the number is out of range", path)
	case se.JSONKind == '"' && goType == "time.Time":
		return badRequest("field %q must be an RFC 3339 time of the years 0000 to 9999, such as 2026-05-01T12:00:00Z", path)
	case se.GoType != nil && se.JSONKind != 0:
		return badRequest("field %q must be %s, not a JSON %s", path, jsonTypeName(se.GoType.String()), kindName(se.JSONKind))
	case se.GoType != nil:
		return badRequest("field %q must be %s", path, jsonTypeName(se.GoType.String()))
	default:
		return badRequest("field %q: %v", path, se.Err)
	}
}

// kindName names a JSON kind the way encoding/json's errors did.
func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// jsonTypeName says a Go field type the way a JSON client thinks of it.
func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string", strings.HasSuffix(goType, "Status"):
		return "a string"
	case goType == "bool":
		return "a boolean"
	case goType == "time.Time":
		return "an RFC 3339 time string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	default:
		return "an object"
	}
}

// writeJSON writes v with a status. v is always one of our own types, so a
// marshalling failure is a bug and answers 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// The request id is in the header already; the request log line
		// gets the cause.
		if sw, ok := w.(*statusWriter); ok && sw.ri != nil {
			sw.ri.cause, sw.ri.problem = "encode the response: "+err.Error(), problem.Internal
		}
		writeProblem(w, Problem{Type: problem.TypeBase + problem.Internal, Title: "Internal server error", Status: 500,
			Detail: "cannot encode the response", RequestID: w.Header().Get("X-Request-Id")})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// query parses the query string strictly: a malformed one is a 400, not
// silently dropped parameters.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("malformed query string: %v", err)
	}
	return q, nil
}

// queryInt reads an optional non-negative integer query parameter.
func queryInt(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("query parameter %s must be a non-negative integer, not %q", name, v)
	}
	return n, nil
}

// ListResponse is the shape of every list: a page of items and the cursor
// of the next page ("" on the last page).
type ListResponse[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func listOf[T any](items []T, next string) ListResponse[T] {
	if items == nil {
		items = []T{}
	}
	return ListResponse[T]{Items: items, NextCursor: next}
}
