package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ProblemTypeBase prefixes every problem type URI; the rest is the kind.
const ProblemTypeBase = "https://memento.dev/problems/"

// Problem kinds: the stable kebab-case tail of a problem type URI. Clients
// branch on these, so they never change meaning once published.
const (
	KindInvalidRequest       = "invalid-request"
	KindRequestTooLarge      = "request-too-large"
	KindUnsupportedMediaType = "unsupported-media-type"
	KindUnauthorized         = "unauthorized"
	KindForbidden            = "forbidden"
	KindNotFound             = "not-found"
	KindMethodNotAllowed     = "method-not-allowed"
	KindPreconditionFailed   = "precondition-failed"
	KindInternal             = "internal"
	KindUnavailable          = "unavailable"
	KindNotReady             = "not-ready"
	KindClientClosedRequest  = "client-closed-request"
	KindTimeout              = "timeout"
)

// Problem is an RFC 9457 problem detail. RequestID is an extension member
// that lets an operator find the request's log line.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Kind returns the stable tail of the problem type.
func (p Problem) Kind() string { return strings.TrimPrefix(p.Type, ProblemTypeBase) }

// problemKind describes one kind: its status and title.
type problemKind struct {
	status int
	title  string
}

// kinds is the catalogue of every problem kind this server answers, built
// from one table per domain (a domain adds its table here).
var kinds = mergeKinds(generalKinds, runKinds, sessionKinds, operationKinds)

// sentinelKinds maps domain sentinel errors to problem kinds, one table per
// domain (a domain adds its table here). Each domain error wraps at most one
// sentinel, so order does not matter.
var sentinelKinds = slices.Concat(runSentinels, sessionSentinels, operationSentinels)

// generalKinds are the kinds every route may answer.
var generalKinds = map[string]problemKind{
	KindInvalidRequest:       {http.StatusBadRequest, "Invalid request"},
	KindRequestTooLarge:      {http.StatusRequestEntityTooLarge, "Request body too large"},
	KindUnsupportedMediaType: {http.StatusUnsupportedMediaType, "Unsupported media type"},
	KindUnauthorized:         {http.StatusUnauthorized, "Unauthorized"},
	KindForbidden:            {http.StatusForbidden, "Forbidden"},
	KindNotFound:             {http.StatusNotFound, "Not found"},
	KindMethodNotAllowed:     {http.StatusMethodNotAllowed, "Method not allowed"},
	KindPreconditionFailed:   {http.StatusPreconditionFailed, "Precondition failed"},
	KindInternal:             {http.StatusInternalServerError, "Internal server error"},
	KindUnavailable:          {http.StatusServiceUnavailable, "Backend unavailable"},
	KindNotReady:             {http.StatusServiceUnavailable, "Not ready"},
	KindClientClosedRequest:  {499, "Client closed request"},
	KindTimeout:              {http.StatusGatewayTimeout, "Timeout"},
}

// Kinds lists every problem kind with its HTTP status, for docs and tests.
func Kinds() map[string]int {
	out := make(map[string]int, len(kinds))
	for k, v := range kinds {
		out[k] = v.status
	}
	return out
}

// apiError is an error a handler returns to answer with a problem.
type apiError struct {
	kind   string
	status int // 0 means the kind's default
	detail string
	cause  error
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return e.detail + ": " + e.cause.Error()
	}
	return e.detail
}

func (e *apiError) Unwrap() error { return e.cause }

// newError makes an apiError of a kind with its default status.
func newError(kind, detail string) *apiError { return &apiError{kind: kind, detail: detail} }

// badRequest is a syntactically unusable request (400 invalid-request).
func badRequest(format string, args ...any) *apiError {
	return &apiError{kind: KindInvalidRequest, detail: fmt.Sprintf(format, args...)}
}

// sentinel maps one domain sentinel error to a problem kind; status 0
// means the kind's default.
type sentinel struct {
	err    error
	kind   string
	status int
}

func mergeKinds(tables ...map[string]problemKind) map[string]problemKind {
	out := map[string]problemKind{}
	for _, t := range tables {
		for k, v := range t {
			if _, dup := out[k]; dup {
				panic("server: problem kind declared twice: " + k)
			}
			out[k] = v
		}
	}
	return out
}

// problemFor turns any handler error into a problem. Unknown errors are 500
// internal, and their text stays in the log, not in the response.
func problemFor(r *http.Request, err error) (p Problem, internal bool) {
	kind, status, detail := KindInternal, 0, "internal error; the server log has the details under this request_id"
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		kind, status, detail = ae.kind, ae.status, ae.detail
	default:
		matched := false
		for _, s := range sentinelKinds {
			if errors.Is(err, s.err) {
				kind, status, detail, matched = s.kind, s.status, err.Error(), true
				break
			}
		}
		if !matched {
			switch {
			case r.Context().Err() != nil && errors.Is(err, context.Canceled):
				kind, detail = KindClientClosedRequest, "the client closed the request"
			case errors.Is(err, context.DeadlineExceeded):
				kind, detail = KindTimeout, "the backend did not answer in time"
			case isNetError(err):
				kind, detail = KindUnavailable, "the backend is unreachable"
			default:
				internal = true
			}
		}
	}
	k, ok := kinds[kind]
	if !ok {
		k, internal = kinds[KindInternal], true
		kind = KindInternal
	}
	if status == 0 {
		status = k.status
	}
	return Problem{
		Type:     ProblemTypeBase + kind,
		Title:    k.title,
		Status:   status,
		Detail:   detail,
		Instance: r.URL.Path,
	}, internal
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"` + ProblemTypeBase + KindInternal + `","title":"Internal server error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}
