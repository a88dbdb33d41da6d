package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/session"
)

// sessionSentinels lets errors.Is(err, session.ErrPreconditionFailed) work on
// the answers of session calls, as it does against the library.
var sessionSentinels = map[string]error{
	problem.SessionNotFound:      session.ErrNotFound,
	problem.PreconditionFailed:   session.ErrPreconditionFailed,
	problem.PreconditionRequired: session.ErrPreconditionRequired,
	problem.StateTooLarge:        session.ErrStateTooLarge,
	problem.MessageTooLarge:      session.ErrMessageTooLarge,
	problem.SchemaValidation:     session.ErrSchemaValidation,
	problem.PIINotFound:          pii.ErrNotFound,
	problem.IdempotencyMismatch:  session.ErrIdempotencyMismatch,
}

// sessionErr adds the session sentinel of a problem to err, keeping the *Error.
func sessionErr(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if s, ok := sessionSentinels[e.Kind()]; ok {
		return alsoIs(err, s)
	}
	if e.Kind() == problem.InvalidRequest && e.Status == http.StatusUnprocessableEntity {
		return alsoIs(err, session.ErrInvalidInput)
	}
	return err
}

func sessionPath(id string, rest ...string) string { return itemPath("sessions", id, rest...) }

func userQuery(userID string) url.Values { return url.Values{"user_id": {userID}} }

// PutSessionRequest creates or replaces a session.
type PutSessionRequest struct {
	UserID string
	App    string
	State  json.RawMessage
	// TTL of inactivity, whole seconds; 0 means the server default.
	TTL time.Duration
	// IfRevision, when > 0, replaces only at that revision (If-Match).
	IfRevision int64
}

// PutSession creates (created=true) or replaces a session.
func (c *Client) PutSession(ctx context.Context, sessionID string, req PutSessionRequest) (s session.Session, created bool, err error) {
	body := map[string]any{"user_id": req.UserID}
	if req.App != "" {
		body["app"] = req.App
	}
	if len(req.State) > 0 {
		body["state"] = req.State
	}
	if req.TTL > 0 {
		body["ttl_seconds"] = int64((req.TTL + time.Second - 1) / time.Second)
	}
	r := request{method: http.MethodPut, path: sessionPath(sessionID), body: body}
	if req.IfRevision > 0 {
		r.header = revisionHeader("If-Match", req.IfRevision)
	}
	resp, err := c.do(ctx, r, &s)
	if err != nil {
		return session.Session{}, false, sessionErr(err)
	}
	return s, resp.Status == http.StatusCreated, nil
}

// GetSession reads a session of the user; its Revision is the ETag.
func (c *Client) GetSession(ctx context.Context, sessionID, userID string) (session.Session, error) {
	var s session.Session
	_, err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(sessionID), query: userQuery(userID)}, &s)
	return s, sessionErr(err)
}

// PatchSession applies a JSON Merge Patch to the state if the session is at
// revision; otherwise errors.Is(err, session.ErrPreconditionFailed).
func (c *Client) PatchSession(ctx context.Context, sessionID, userID string, revision int64, patch json.RawMessage) (session.Session, error) {
	var s session.Session
	_, err := c.do(ctx, request{method: http.MethodPatch, path: sessionPath(sessionID), query: userQuery(userID),
		body: patch, header: revisionHeader("If-Match", revision)}, &s)
	return s, sessionErr(err)
}

// AppendMessages appends messages; the result says how many old ones the cap trimmed.
func (c *Client) AppendMessages(ctx context.Context, sessionID, userID string, msgs ...session.MessageInput) (session.AppendResult, error) {
	return c.AppendMessagesKeyed(ctx, sessionID, userID, "", msgs...)
}

// AppendMessagesKeyed is AppendMessages safe to retry: sent again under
// the same idempotency key with the same messages (after a timeout, say),
// it appends nothing and answers the first append's messages with
// Replayed set; with other messages it is
// errors.Is(err, session.ErrIdempotencyMismatch). An empty key is a plain
// append.
func (c *Client) AppendMessagesKeyed(ctx context.Context, sessionID, userID, key string, msgs ...session.MessageInput) (session.AppendResult, error) {
	var res session.AppendResult
	req := request{method: http.MethodPost, path: sessionPath(sessionID, "messages"), query: userQuery(userID),
		body: map[string]any{"messages": msgs}}
	if key != "" {
		req.header = http.Header{"Idempotency-Key": {key}}
	}
	_, err := c.do(ctx, req, &res)
	return res, sessionErr(err)
}

// ListMessages returns the latest q.Limit messages after q.Since / q.AfterSeq, oldest first.
func (c *Client) ListMessages(ctx context.Context, sessionID, userID string, q session.MessageQuery) ([]session.Message, error) {
	p, err := c.ListMessagesPage(ctx, sessionID, userID, q, "")
	return p.Items, err
}

// ListMessagesPage is ListMessages a page at a time: each NextCursor
// continues with older messages ("" on the last page).
func (c *Client) ListMessagesPage(ctx context.Context, sessionID, userID string, q session.MessageQuery, cursor string) (Page[session.Message], error) {
	v := userQuery(userID)
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.AfterSeq > 0 {
		v.Set("after_seq", strconv.FormatInt(q.AfterSeq, 10))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	var out Page[session.Message]
	_, err := c.do(ctx, request{method: http.MethodGet, path: sessionPath(sessionID, "messages"), query: v}, &out)
	return out, sessionErr(err)
}

// SetSessionSummary fills the summary slot.
func (c *Client) SetSessionSummary(ctx context.Context, sessionID, userID string, sum session.Summary) (session.Session, error) {
	body := map[string]any{"text": sum.Text, "through_seq": sum.ThroughSeq}
	if len(sum.Data) > 0 {
		body["data"] = sum.Data
	}
	var s session.Session
	_, err := c.do(ctx, request{method: http.MethodPut, path: sessionPath(sessionID, "summary"), query: userQuery(userID), body: body}, &s)
	return s, sessionErr(err)
}

// CloseSession deletes the session and returns it as it was.
func (c *Client) CloseSession(ctx context.Context, sessionID, userID string) (session.Session, error) {
	var s session.Session
	_, err := c.do(ctx, request{method: http.MethodPost, path: sessionPath(sessionID, "close"), query: userQuery(userID)}, &s)
	return s, sessionErr(err)
}

// DeleteSession deletes the session (DELETE; no body back).
func (c *Client) DeleteSession(ctx context.Context, sessionID, userID string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: sessionPath(sessionID), query: userQuery(userID)}, nil)
	return sessionErr(err)
}

// ListSessions returns the first page of the user's live sessions, most
// recently active first. Items carry no state or summary.
func (c *Client) ListSessions(ctx context.Context, userID string, limit int) ([]session.Session, error) {
	p, err := c.ListSessionsPage(ctx, userID, "", limit)
	return p.Items, err
}

// ListSessionsPage returns a page of the user's live sessions; pass its
// NextCursor for the next ("" on the last page).
func (c *Client) ListSessionsPage(ctx context.Context, userID, cursor string, limit int) (Page[session.Session], error) {
	v := userQuery(userID)
	if limit != 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	var out Page[session.Session]
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/sessions", query: v}, &out)
	return out, sessionErr(err)
}

// ResolvePII returns the value behind a reference (needs an admin key).
func (c *Client) ResolvePII(ctx context.Context, ref string) (pii.Resolved, error) {
	var r pii.Resolved
	_, err := c.do(ctx, request{method: http.MethodGet, path: itemPath("pii", ref)}, &r)
	return r, sessionErr(err)
}

// ForgetPII deletes the value behind a reference (needs an admin key).
func (c *Client) ForgetPII(ctx context.Context, ref string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: itemPath("pii", ref)}, nil)
	return sessionErr(err)
}
