package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// kindSentinels lets errors.Is(err, run.ErrRevisionConflict) (or
// toolop.ErrDigestMismatch...) work on an *Error, so code written against
// the library works against the server.
var kindSentinels = map[string]error{
	problem.RunNotFound:         run.ErrNotFound,
	problem.AlreadyExists:       run.ErrAlreadyExists,
	problem.IdempotencyMismatch: run.ErrIdempotencyMismatch,
	problem.RevisionConflict:    run.ErrRevisionConflict,
	problem.LeaseHeld:           run.ErrLeaseHeld,
	problem.LeaseLost:           run.ErrLeaseLost,
	problem.InvalidTransition:   run.ErrInvalidTransition,
	problem.RunNotActive:        run.ErrRunNotActive,
	problem.StateTooLarge:       run.ErrStateTooLarge,
	problem.NoMigrationPath:     run.ErrNoMigrationPath,
	problem.SchemaValidation:    run.ErrSchemaValidation,
	problem.CheckpointExists:    run.ErrCheckpointExists,
	problem.CheckpointNotFound:  run.ErrCheckpointNotFound,
	problem.RevisionNotFound:    run.ErrRevisionNotFound,
	problem.SchemaNotFound:      run.ErrSchemaNotFound,
	problem.SchemaConflict:      run.ErrSchemaConflict,
	problem.InvalidSchema:       run.ErrInvalidSchema,

	problem.OperationNotFound:   toolop.ErrNotFound,
	problem.DigestMismatch:      toolop.ErrDigestMismatch,
	problem.OperationTransition: toolop.ErrInvalidTransition,
	problem.ApprovalNotFound:    toolop.ErrApprovalNotFound,
	problem.ApprovalExists:      toolop.ErrApprovalExists,
	problem.ApprovalDecided:     toolop.ErrApprovalDecided,
	problem.ApprovalExpired:     toolop.ErrApprovalExpired,
	problem.ResumeRefused:       resume.ErrRefused,
}

// Error is a problem the server answered (or a non-problem error status).
type Error struct {
	Method    string
	Path      string
	Status    int
	Type      string // the problem type URI; "" if the body was not a problem
	Title     string
	Detail    string
	Instance  string
	RequestID string

	// Facts some problems carry as extension members (zero when absent).
	// CurrentRevision: the run's revision on a revision-conflict.
	CurrentRevision int64
	// ExpectedRevision: on a commit's revision-conflict, the revision the
	// commit expected (the client sent it; the problem does not repeat it).
	ExpectedRevision int64
	// LeaseOwner and LeaseExpiresAt: who holds the lease on lease-held.
	LeaseOwner     string
	LeaseExpiresAt *time.Time
	// RetryAfter is the server's Retry-After on a 503 or 504.
	RetryAfter time.Duration
	// Outcome and Reason: a memory write policy refused ("refused" and why).
	Outcome string
	Reason  string
}

// Kind is the stable kebab-case name of the problem ("revision-conflict").
func (e *Error) Kind() string {
	if i := strings.LastIndexByte(e.Type, '/'); i >= 0 {
		return e.Type[i+1:]
	}
	return e.Type
}

func (e *Error) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	kind := e.Kind()
	if kind == "" {
		kind = "http"
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, kind, msg)
}

// Is matches the domain sentinel of the problem kind, and another *Error of
// the same kind (or status, when neither has a kind).
func (e *Error) Is(target error) bool {
	if s, ok := kindSentinels[e.Kind()]; ok && s == target {
		return true
	}
	// A refused run or workflow request is run.ErrInvalidInput, as in the library.
	if target == run.ErrInvalidInput && e.Kind() == problem.InvalidRequest && e.Status == http.StatusUnprocessableEntity &&
		(strings.HasPrefix(e.Path, "/v1/runs") || strings.HasPrefix(e.Path, "/v1/workflows")) {
		return true
	}
	if t, ok := target.(*Error); ok {
		if t.Type != "" || e.Type != "" {
			return t.Kind() == e.Kind()
		}
		return t.Status == e.Status
	}
	return false
}

// As lets errors.As reach the domain's typed errors, as it would against
// the library: *run.RevisionConflictError and *run.LeaseHeldError.
func (e *Error) As(target any) bool {
	switch t := target.(type) {
	case **run.RevisionConflictError:
		if e.Kind() != problem.RevisionConflict {
			return false
		}
		*t = &run.RevisionConflictError{RunID: runOfPath(e.Path), Expected: e.ExpectedRevision, Current: e.CurrentRevision}
		return true
	case **run.LeaseHeldError:
		if e.Kind() != problem.LeaseHeld {
			return false
		}
		*t = &run.LeaseHeldError{RunID: runOfPath(e.Path), Owner: e.LeaseOwner, ExpiresAt: e.LeaseExpiresAt}
		return true
	}
	return false
}

// runOfPath is the run id of a /v1/runs/{run_id}/... path, or "".
func runOfPath(p string) string {
	rest, ok := strings.CutPrefix(p, "/v1/runs/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	if u, err := url.PathUnescape(id); err == nil {
		return u
	}
	return id
}

// KindOf returns the problem kind of err, or "" if err is not a server problem.
func KindOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind()
	}
	return ""
}

// StatusOf returns the HTTP status of err, or 0 if err is not a server answer.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func decodeProblem(method, path string, resp *http.Response, raw []byte) error {
	e := &Error{Method: method, Path: path, Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var p struct {
			Type      string `json:"type"`
			Title     string `json:"title"`
			Detail    string `json:"detail"`
			Instance  string `json:"instance"`
			RequestID string `json:"request_id"`

			CurrentRevision int64      `json:"current_revision"`
			LeaseOwner      string     `json:"lease_owner"`
			LeaseExpiresAt  *time.Time `json:"lease_expires_at"`
			Outcome         string     `json:"outcome"`
			Reason          string     `json:"reason"`
		}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		if json.Unmarshal(raw, &p) == nil {
			e.Type, e.Title, e.Detail, e.Instance = p.Type, p.Title, p.Detail, p.Instance
			e.CurrentRevision, e.LeaseOwner, e.LeaseExpiresAt = p.CurrentRevision, p.LeaseOwner, p.LeaseExpiresAt
			e.Outcome, e.Reason = p.Outcome, p.Reason
			if p.RequestID != "" {
				e.RequestID = p.RequestID
			}
			return e
		}
	}
	e.Detail = strings.TrimSpace(string(raw))
	if len(e.Detail) > 200 {
		e.Detail = e.Detail[:200] + "..."
	}
	return e
}

// alsoIs returns err so that errors.Is and errors.As also find domain, the
// domain package's sentinel, with err's text alone (a "(invalid input)"
// after a detail that already says so read twice).
func alsoIs(err, domain error) error { return alsoErr{err, domain} }

type alsoErr struct{ err, domain error }

func (a alsoErr) Error() string   { return a.err.Error() }
func (a alsoErr) Unwrap() []error { return []error{a.err, a.domain} }
