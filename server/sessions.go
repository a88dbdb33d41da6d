package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/session"
)

var sessionSentinels = []sentinel{
	// Missing, expired, another user's or another tenant's: one answer.
	{session.ErrNotFound, problem.SessionNotFound, 0},
	{session.ErrPreconditionFailed, problem.PreconditionFailed, 0},
	{session.ErrPreconditionRequired, problem.PreconditionRequired, 0},
	{session.ErrStateTooLarge, problem.StateTooLarge, 0},
	{session.ErrMessageTooLarge, problem.MessageTooLarge, 0},
	{session.ErrSchemaValidation, problem.SchemaValidation, 0},
	{session.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
	{session.ErrIdempotencyMismatch, problem.IdempotencyMismatch, 0},
	{pii.ErrNotFound, problem.PIINotFound, 0},
	{pii.ErrInvalidRef, problem.InvalidRequest, http.StatusUnprocessableEntity},
}

func (s *Server) sessionRoutes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/v1/sessions", Handler: s.listSessions},
		{Method: http.MethodPut, Path: "/v1/sessions/{session_id}", Handler: s.putSession, IfMatch: true},
		{Method: http.MethodGet, Path: "/v1/sessions/{session_id}", Handler: s.getSession},
		{Method: http.MethodPatch, Path: "/v1/sessions/{session_id}", Handler: s.patchSession, IfMatch: true},
		{Method: http.MethodDelete, Path: "/v1/sessions/{session_id}", Handler: s.deleteSession},
		{Method: http.MethodPost, Path: "/v1/sessions/{session_id}/close", Handler: s.closeSession},
		{Method: http.MethodPost, Path: "/v1/sessions/{session_id}/messages", Handler: s.appendMessages},
		{Method: http.MethodGet, Path: "/v1/sessions/{session_id}/messages", Handler: s.listMessages},
		{Method: http.MethodPut, Path: "/v1/sessions/{session_id}/summary", Handler: s.putSummary},
		// Holding a reference is no right to its value: resolving is an
		// operator action, separately authorised (admin keys only) and logged.
		{Method: http.MethodGet, Path: "/v1/pii/{ref}", Role: RoleAdmin, Handler: s.resolvePII},
		{Method: http.MethodDelete, Path: "/v1/pii/{ref}", Role: RoleAdmin, Handler: s.forgetPII},
	}
}

func sessionID(r *http.Request) string { return r.PathValue("session_id") }

func sessionLocation(id string) string { return "/v1/sessions/" + url.PathEscape(id) }

// userID reads the required user_id query parameter.
func userID(r *http.Request) (string, error) {
	q, err := query(r)
	if err != nil {
		return "", err
	}
	u := q.Get("user_id")
	if u == "" {
		return "", badRequest("query parameter user_id is required: a session is bound to its user")
	}
	return u, nil
}

// SessionPutRequest creates or replaces a session.
type SessionPutRequest struct {
	UserID     string          `json:"user_id"`
	App        string          `json:"app,omitempty"`
	State      json.RawMessage `json:"state,omitempty"`
	TTLSeconds int64           `json:"ttl_seconds,omitempty"`
}

func (s *Server) sessionTTL(seconds int64) (time.Duration, error) {
	maxTTL := s.sessions.Options().MaxTTL
	if seconds < 0 || seconds > int64(maxTTL/time.Second) {
		return 0, unprocessable("ttl_seconds must be between 1 and %d (0 or absent means the default, %d)", int64(maxTTL/time.Second), int64(s.sessions.Options().DefaultTTL/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}

// singleRevision reads an If-Match header naming exactly one revision.
func singleRevision(header string) (int64, error) {
	header = strings.TrimSpace(header)
	if header == "*" {
		return 0, newError(problem.PreconditionRequired, `If-Match: * does not name a revision; send the ETag of the session you read, e.g. If-Match: "3"`)
	}
	rev, ok := parseRevisionETag(header)
	if !ok {
		return 0, newError(problem.PreconditionFailed, fmt.Sprintf("If-Match %q is not one revision ETag of this API (a quoted integer such as \"3\")", header))
	}
	return rev, nil
}

func (s *Server) putSession(w http.ResponseWriter, r *http.Request) error {
	var body SessionPutRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	ttl, err := s.sessionTTL(body.TTLSeconds)
	if err != nil {
		return err
	}
	// The user may also come as ?user_id=, as on the session's other
	// routes; given twice, the two must agree.
	q, err := query(r)
	if err != nil {
		return err
	}
	if u := q.Get("user_id"); u != "" {
		if body.UserID != "" && body.UserID != u {
			return unprocessable("user_id %q in the query and %q in the body name different users", u, body.UserID)
		}
		body.UserID = u
	}
	req := session.PutRequest{UserID: body.UserID, App: body.App, State: body.State, TTL: ttl}
	if im := ifMatchHeader(r); im != "" {
		if req.ExpectedRevision, err = singleRevision(im); err != nil {
			return err
		}
	}
	ss, created, err := s.sessions.Put(r.Context(), tenant(r), sessionID(r), req)
	if err != nil {
		return sessionWriteFailed(err, r, req.UserID, "")
	}
	w.Header().Set("ETag", revisionETag(ss.Revision))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", sessionLocation(ss.SessionID))
	}
	writeJSON(w, status, ss)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	ss, err := s.sessions.Get(r.Context(), tenant(r), sessionID(r), user)
	if err != nil {
		return err
	}
	// The ETag is the state's revision, what If-Match guards; appends and
	// summaries change the body without it (message_count, summary,
	// expires_at), so If-None-Match is not answered with a 304 that would
	// keep a stale copy.
	w.Header().Set("Cache-Control", "private, no-cache")
	w.Header().Set("ETag", revisionETag(ss.Revision))
	writeJSON(w, http.StatusOK, ss)
	return nil
}

// readPatch reads a merge patch body: application/merge-patch+json or JSON.
func (s *Server) readPatch(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/merge-patch+json" && mt != "application/json") {
			return nil, newError(problem.UnsupportedMediaType, fmt.Sprintf("Content-Type %q: send application/merge-patch+json (RFC 7386) or application/json", ct))
		}
	}
	body, err := s.readBody(w, r, "")
	if err != nil {
		return nil, err
	}
	// Exactly one JSON value (a trailing "}" is refused), of text every
	// store keeps, nested no deeper than any stored document may be.
	if err := checkJSON(bytes.TrimSpace(body)); err != nil {
		return nil, err
	}
	return body, nil
}

func (s *Server) patchSession(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	im := ifMatchHeader(r)
	if im == "" {
		return newError(problem.PreconditionRequired, `a session patch needs If-Match with the revision it was computed from, e.g. If-Match: "3" (the ETag of GET)`)
	}
	rev, err := singleRevision(im)
	if err != nil {
		return err
	}
	patch, err := s.readPatch(w, r)
	if err != nil {
		return err
	}
	ss, err := s.sessions.Patch(r.Context(), tenant(r), sessionID(r), user, rev, patch)
	if err != nil {
		return sessionWriteFailed(err, r, user, "")
	}
	w.Header().Set("ETag", revisionETag(ss.Revision))
	writeJSON(w, http.StatusOK, ss)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	if _, err := s.sessions.Close(r.Context(), tenant(r), sessionID(r), user); err != nil {
		return sessionWriteFailed(err, r, user, "")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// closeSession is DELETE that answers with the final session, so the caller
// can checkpoint what matters before it is gone.
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	// No fields: a body, if any, must be an empty object.
	if _, err := s.decodeOptionalJSON(w, r, &struct{}{}); err != nil {
		return err
	}
	ss, err := s.sessions.Close(r.Context(), tenant(r), sessionID(r), user)
	if err != nil {
		return sessionWriteFailed(err, r, user, "")
	}
	writeJSON(w, http.StatusOK, ss)
	return nil
}

// AppendMessagesRequest is the body of POST .../messages.
type AppendMessagesRequest struct {
	Messages []session.MessageInput `json:"messages"`
}

func (s *Server) appendMessages(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	var body AppendMessagesRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	// With an Idempotency-Key a retry (same key, same messages) is answered
	// with the first append's messages instead of appending them again.
	res, err := s.sessions.AppendKeyed(r.Context(), tenant(r), sessionID(r), user, body.Messages, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return sessionWriteFailed(err, r, user, "/messages")
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Memento-Messages-Trimmed", strconv.Itoa(res.Trimmed))
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	after, err := queryInt(q, "after_seq")
	if err != nil {
		return err
	}
	mq := session.MessageQuery{Limit: int(min(limit, session.MaxListLimit+1)), AfterSeq: after}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badRequest("query parameter since must be an RFC 3339 time, not %q", v)
		}
		mq.Since = t
	}
	ms, next, err := s.sessions.MessagePage(r.Context(), tenant(r), sessionID(r), user, mq, q.Get("cursor"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(ms, next))
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	q, _ := query(r)
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	ss, next, err := s.sessions.ListUserPage(r.Context(), tenant(r), user, q.Get("cursor"), int(min(limit, session.MaxListLimit+1)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(ss, next))
	return nil
}

// SummaryRequest fills a session's summary slot.
type SummaryRequest struct {
	// Text is required (it may be empty); a pointer tells it from absent.
	Text       *string         `json:"text"`
	Data       json.RawMessage `json:"data,omitempty"`
	ThroughSeq int64           `json:"through_seq"`
}

func (s *Server) putSummary(w http.ResponseWriter, r *http.Request) error {
	user, err := userID(r)
	if err != nil {
		return err
	}
	var body SummaryRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	if body.Text == nil {
		return unprocessable("text is required: the summary a model reads")
	}
	sum := session.Summary{Text: *body.Text, Data: body.Data, ThroughSeq: body.ThroughSeq}
	ss, err := s.sessions.SetSummary(r.Context(), tenant(r), sessionID(r), user, sum)
	if err != nil {
		return sessionWriteFailed(err, r, user, "")
	}
	writeJSON(w, http.StatusOK, ss)
	return nil
}

func (s *Server) resolvePII(w http.ResponseWriter, r *http.Request) error {
	ref := r.PathValue("ref")
	res, err := s.vault.Resolve(r.Context(), tenant(r), ref)
	// An audit line per attempt: who, which reference, the outcome; never the value.
	s.log.Info("pii resolve", "request_id", infoOf(r).id, "tenant", tenant(r), "ref", ref, "ok", err == nil)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) forgetPII(w http.ResponseWriter, r *http.Request) error {
	ref := r.PathValue("ref")
	err := s.vault.Forget(r.Context(), tenant(r), ref)
	s.log.Info("pii forget", "request_id", infoOf(r).id, "tenant", tenant(r), "ref", ref, "ok", err == nil)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sessionWriteFailed answers a session write the store may have applied
// although no answer came back (a timeout after sending) as such, with the
// read that settles it, instead of 503 unavailable, which says nothing was
// done.
func sessionWriteFailed(err error, r *http.Request, user, rest string) error {
	if outcomeUnknown(err) {
		return writeOutcomeUnknown(err, sessionLocation(sessionID(r))+rest+"?user_id="+url.QueryEscape(user))
	}
	return err
}
