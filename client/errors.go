package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/mementohq/memento/run"
)

// ProblemTypeBase prefixes every problem type URI the server answers.
const ProblemTypeBase = "https://memento.dev/problems/"

// Problem kinds, the stable tail of the problem type URI.
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
	KindTimeout              = "timeout"

	KindRunNotFound         = "run-not-found"
	KindAlreadyExists       = "already-exists"
	KindIdempotencyMismatch = "idempotency-mismatch"
	KindRevisionConflict    = "revision-conflict"
	KindLeaseHeld           = "lease-held"
	KindLeaseLost           = "lease-lost"
	KindInvalidTransition   = "invalid-transition"
	KindRunNotActive        = "run-not-active"
	KindStateTooLarge       = "state-too-large"
	KindNoMigrationPath     = "no-migration-path"
	KindSchemaValidation    = "schema-validation"
	KindCheckpointExists    = "checkpoint-exists"
	KindCheckpointNotFound  = "checkpoint-not-found"
	KindRevisionNotFound    = "revision-not-found"
)

// kindSentinels lets errors.Is(err, run.ErrRevisionConflict) work on an
// *Error, so code written against the library works against the server.
var kindSentinels = map[string]error{
	KindRunNotFound:         run.ErrNotFound,
	KindAlreadyExists:       run.ErrAlreadyExists,
	KindIdempotencyMismatch: run.ErrIdempotencyMismatch,
	KindRevisionConflict:    run.ErrRevisionConflict,
	KindLeaseHeld:           run.ErrLeaseHeld,
	KindLeaseLost:           run.ErrLeaseLost,
	KindInvalidTransition:   run.ErrInvalidTransition,
	KindRunNotActive:        run.ErrRunNotActive,
	KindStateTooLarge:       run.ErrStateTooLarge,
	KindNoMigrationPath:     run.ErrNoMigrationPath,
	KindSchemaValidation:    run.ErrSchemaValidation,
	KindCheckpointExists:    run.ErrCheckpointExists,
	KindCheckpointNotFound:  run.ErrCheckpointNotFound,
	KindRevisionNotFound:    run.ErrRevisionNotFound,
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
	if t, ok := target.(*Error); ok {
		if t.Type != "" || e.Type != "" {
			return t.Kind() == e.Kind()
		}
		return t.Status == e.Status
	}
	return false
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
		}
		if json.Unmarshal(raw, &p) == nil {
			e.Type, e.Title, e.Detail, e.Instance = p.Type, p.Title, p.Detail, p.Instance
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
