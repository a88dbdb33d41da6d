package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/session"
)

type sessionIn struct {
	SessionID string `json:"session_id" jsonschema:"the session id the app gave this conversation"`
}

type sessionPutIn struct {
	SessionID  string         `json:"session_id" jsonschema:"the session id the app gave this conversation"`
	State      map[string]any `json:"state" jsonschema:"the whole session state, a JSON object: step, choices, ids; never whole documents"`
	TTLSeconds int64          `json:"ttl_seconds,omitempty" jsonschema:"inactivity after which the session is gone; 0 is the server default"`
}

type sessionPatchIn struct {
	SessionID        string         `json:"session_id" jsonschema:"the session id"`
	Patch            map[string]any `json:"patch" jsonschema:"a JSON merge patch (RFC 7386) of the state: members set, null removes"`
	ExpectedRevision int64          `json:"expected_revision,omitempty" jsonschema:"apply only if the state is still at this revision (from session_get); 0 applies to whatever is current"`
}

type messageIn struct {
	Role    string `json:"role" jsonschema:"user, assistant, system or tool"`
	Content string `json:"content" jsonschema:"the message text"`
}

type appendIn struct {
	SessionID string      `json:"session_id" jsonschema:"the session id"`
	Messages  []messageIn `json:"messages" jsonschema:"the messages to append, oldest first"`
	// A tool call retried after a lost answer must not append twice.
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"optional: a key of your own for this append; calling again with the same key and messages appends nothing and answers the first call's messages (replayed true)"`
}

type listIn struct {
	SessionID string `json:"session_id" jsonschema:"the session id"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many of the latest messages (default 20, at most 200)"`
}

// sessionOut is a session as a model sees it.
type sessionOut struct {
	SessionID    string          `json:"session_id"`
	UserID       string          `json:"user_id"`
	State        json.RawMessage `json:"state"`
	Revision     int64           `json:"revision"`
	MessageCount int             `json:"message_count"`
	ExpiresAt    time.Time       `json:"expires_at"`
	Created      *bool           `json:"created,omitempty"`
}

func sessionView(s session.Session) sessionOut {
	return sessionOut{SessionID: s.SessionID, UserID: s.UserID, State: s.State, Revision: s.Revision, MessageCount: s.MessageCount, ExpiresAt: s.ExpiresAt}
}

type messageOut struct {
	Seq       int64     `json:"seq"`
	Role      string    `json:"role"`
	Content   string    `json:"content,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func (t *toolset) sessionTools(srv *gomcp.Server) {
	svc := t.s.svc.Sessions
	add(t, srv, &gomcp.Tool{Name: "session_get", Title: "Read session state",
		Description: "Read the state of a conversation session of this user: its state object, revision (for a conditional patch) and expiry. A session that does not exist, expired, or belongs to someone else is session-not-found.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, c call, in sessionIn) (any, error) {
			s, err := svc.Get(ctx, c.Tenant, in.SessionID, c.User)
			if err != nil {
				return nil, err
			}
			return sessionView(s), nil
		})
	add(t, srv, &gomcp.Tool{Name: "session_delete", Title: "Delete a session",
		Description: "Close a conversation session of this user and delete its state, messages and summary now, rather than at its expiry (when the conversation is over, or the user asks for it to be deleted). It cannot be undone.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}},
		func(ctx context.Context, c call, in sessionIn) (any, error) {
			s, err := svc.Close(ctx, c.Tenant, in.SessionID, c.User)
			if err != nil {
				return nil, err
			}
			return map[string]any{"session_id": s.SessionID, "deleted": true}, nil
		})
	add(t, srv, &gomcp.Tool{Name: "session_put", Title: "Create or replace a session",
		Description: "Create a session for this user, or replace the whole state of an existing one. Keep state small and explicit (step, profile draft, candidate ids); put long-term facts in memory_add instead.",
		Annotations: &gomcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(true)}},
		func(ctx context.Context, c call, in sessionPutIn) (any, error) {
			st, err := object("state", in.State)
			if err != nil {
				return nil, err
			}
			// Bounded before it becomes a Duration, which a large count of
			// seconds would overflow into a short or negative TTL.
			if maxTTL := int64(svc.Options().MaxTTL / time.Second); in.TTLSeconds < 0 || in.TTLSeconds > maxTTL {
				return nil, invalid("ttl_seconds must be between 0 and %d (0 is the server default)", maxTTL)
			}
			s, created, err := svc.Put(ctx, c.Tenant, in.SessionID, session.PutRequest{UserID: c.User, State: st, TTL: time.Duration(in.TTLSeconds) * time.Second})
			if err != nil {
				return nil, err
			}
			v := sessionView(s)
			v.Created = &created
			return v, nil
		})
	add(t, srv, &gomcp.Tool{Name: "session_patch", Title: "Patch session state",
		Description: "Change some members of the session state with a JSON merge patch ({\"step\":\"filter\",\"draft\":{\"budget\":120}}; null removes a member). Pass expected_revision from session_get to refuse a stale update.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(false)}},
		func(ctx context.Context, c call, in sessionPatchIn) (any, error) {
			p, err := object("patch", in.Patch)
			if err != nil {
				return nil, err
			}
			if in.ExpectedRevision < 0 {
				return nil, invalid("expected_revision must not be negative")
			}
			if in.ExpectedRevision > 0 {
				s, err := svc.Patch(ctx, c.Tenant, in.SessionID, c.User, in.ExpectedRevision, p)
				if err != nil {
					return nil, err
				}
				return sessionView(s), nil
			}
			// No revision named: a merge patch applies to whatever is current,
			// so one that lost a race to another writer is applied again.
			var s session.Session
			for attempt := 0; ; attempt++ {
				cur, err := svc.Get(ctx, c.Tenant, in.SessionID, c.User)
				if err != nil {
					return nil, err
				}
				s, err = svc.Patch(ctx, c.Tenant, in.SessionID, c.User, cur.Revision, p)
				if err == nil {
					break
				}
				if !errors.Is(err, session.ErrPreconditionFailed) || attempt == blindPatchAttempts-1 {
					return nil, err
				}
				// Writers in lockstep would collide again: wait a little, apart.
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(1+rand.IntN(4*(attempt+1))) * time.Millisecond):
				}
			}
			return sessionView(s), nil
		})
	add(t, srv, &gomcp.Tool{Name: "message_append", Title: "Append messages",
		Description: "Append messages to the session's history (the conversation as it happened). Returns each message's seq: memory_add cites seqs as its evidence.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(false)}},
		func(ctx context.Context, c call, in appendIn) (any, error) {
			if len(in.Messages) == 0 {
				return nil, invalid("messages must name at least one message")
			}
			msgs := make([]session.MessageInput, len(in.Messages))
			for i, m := range in.Messages {
				switch m.Role {
				case "user", "assistant", "system", "tool":
				default:
					return nil, invalid("messages[%d].role is %q: it is user, assistant, system or tool", i, m.Role)
				}
				msgs[i] = session.MessageInput{Role: m.Role, Content: m.Content}
			}
			res, err := svc.AppendKeyed(ctx, c.Tenant, in.SessionID, c.User, msgs, in.IdempotencyKey)
			if err != nil {
				return nil, err
			}
			out := make([]messageOut, len(res.Messages))
			for i, m := range res.Messages {
				out[i] = messageOut{Seq: m.Seq, Role: m.Role, CreatedAt: m.CreatedAt}
			}
			answer := map[string]any{"session_id": in.SessionID, "messages": out, "message_count": res.MessageCount, "trimmed": res.Trimmed}
			if res.Replayed {
				answer["replayed"] = true
			}
			return answer, nil
		})
	add(t, srv, &gomcp.Tool{Name: "messages_list", Title: "List recent messages",
		Description: "The latest messages of the session, oldest first, with their seq.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, c call, in listIn) (any, error) {
			switch {
			case in.Limit < 0 || in.Limit > 200:
				return nil, invalid("limit must be between 1 and 200")
			case in.Limit == 0:
				in.Limit = 20
			}
			ms, err := svc.Messages(ctx, c.Tenant, in.SessionID, c.User, session.MessageQuery{Limit: in.Limit})
			if err != nil {
				return nil, err
			}
			out := make([]messageOut, len(ms))
			for i, m := range ms {
				out[i] = messageOut{Seq: m.Seq, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt}
			}
			return map[string]any{"messages": out}, nil
		})
}

// blindPatchAttempts bounds how often a patch without a revision is applied
// again after losing a race to another writer.
const blindPatchAttempts = 10

func ptr[T any](v T) *T { return &v }
