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
	"time"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
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

	// Facts of typed domain errors, as extension members: the run's
	// revision on revision-conflict, the holder on lease-held.
	CurrentRevision int64      `json:"current_revision,omitempty"`
	LeaseOwner      string     `json:"lease_owner,omitempty"`
	LeaseExpiresAt  *time.Time `json:"lease_expires_at,omitempty"`
	// Outcome and Reason: a memory write policy refused ("refused" and why).
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Kind returns the stable tail of the problem type.
func (p Problem) Kind() string { return strings.TrimPrefix(p.Type, problem.TypeBase) }

// sentinelKinds maps domain sentinel errors to problem kinds, one table per
// domain (a domain adds its table here). Each domain error wraps at most one
// sentinel, so order does not matter.
var sentinelKinds = slices.Concat(runSentinels, sessionSentinels, operationSentinels, workflowSentinels, memorySentinels, contextSentinels, retrievalSentinels, summarySentinels)

// Kinds lists every problem kind with its HTTP status, for docs and tests.
func Kinds() map[string]int {
	all := problem.All()
	out := make(map[string]int, len(all))
	for k, v := range all {
		out[k] = v.Status
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
	return &apiError{kind: problem.InvalidRequest, detail: fmt.Sprintf(format, args...)}
}

// unprocessable is well-formed JSON with a value out of range (422
// invalid-request), the answer the domains give for their invalid input.
func unprocessable(format string, args ...any) *apiError {
	return &apiError{kind: problem.InvalidRequest, status: http.StatusUnprocessableEntity, detail: fmt.Sprintf(format, args...)}
}

// sentinel maps one domain sentinel error to a problem kind; status 0
// means the kind's default.
type sentinel struct {
	err    error
	kind   string
	status int
}

// problemFor turns any handler error into a problem. Unknown errors are 500
// internal, and their text stays in the log, not in the response.
func problemFor(r *http.Request, err error) (p Problem, internal bool) {
	kind, status, detail := problem.Internal, 0, "internal error; the server log has the details under this request_id"
	if k, st, d, ok := classify(err); ok {
		kind, status, detail = k, st, d
	} else if r.Context().Err() == context.Canceled && errors.Is(err, context.Canceled) {
		kind, detail = problem.ClientClosedRequest, "the client closed the request"
	} else if k, d, ok := storeFault(err); ok {
		kind, detail = k, d
	} else {
		internal = true
	}
	k, ok := problem.Lookup(kind)
	if !ok {
		k, _ = problem.Lookup(problem.Internal)
		kind, internal = problem.Internal, true
	}
	if status == 0 {
		status = k.Status
	}
	p = Problem{
		Type:     problem.Type(kind),
		Title:    k.Title,
		Status:   status,
		Detail:   detail,
		Instance: r.URL.Path,
	}
	var rc *run.RevisionConflictError
	if errors.As(err, &rc) {
		p.CurrentRevision = rc.Current
	}
	var lh *run.LeaseHeldError
	if errors.As(err, &lh) {
		p.LeaseOwner, p.LeaseExpiresAt = lh.Owner, lh.ExpiresAt
	}
	memoryRefusal(&p, err)
	return p, internal
}

// classify maps a handler's own error or a domain sentinel to its kind.
func classify(err error) (kind string, status int, detail string, ok bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.kind, ae.status, ae.detail, true
	}
	for _, s := range sentinelKinds {
		if errors.Is(err, s.err) {
			return s.kind, s.status, err.Error(), true
		}
	}
	return "", 0, "", false
}

// ClassifyError maps a domain error to the stable problem kind the HTTP API
// would answer with and a detail safe to show the caller; internal is true
// for an error whose text stays in the log. The MCP server reports tool
// errors with it, so both surfaces name a failure alike.
func ClassifyError(err error) (kind, detail string, internal bool) {
	if k, _, d, ok := classify(err); ok {
		return k, d, false
	}
	if k, d, ok := storeFault(err); ok {
		return k, d, false
	}
	return problem.Internal, "internal error", true
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p Problem) { writeProblemBody(w, p.Status, p) }

// writeProblemBody writes a problem body, which may carry extension members
// besides Problem's, as application/problem+json.
func writeProblemBody(w http.ResponseWriter, status int, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"type":"` + problem.TypeBase + problem.Internal + `","title":"Internal server error","status":500}`)
		status = http.StatusInternalServerError
	}
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
