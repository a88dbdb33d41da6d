package session

import (
	"encoding/json"
	"time"
)

// Session is the record of one conversation or work session. It belongs to
// exactly one tenant and one user; any access with another user or tenant
// behaves as if it did not exist.
//
// State is a JSON object the application shapes. A recommended shape, which
// keeps the state small, explicit and safe to hand to a model:
//
//	{
//	  "current_goal":          "find a gift for my sister",   // what the user wants now
//	  "current_step":          "collect_budget",              // where the flow is
//	  "user_choices":          {"recipient": "sister"},       // decisions the user made
//	  "collected_fields":      {"budget_eur": 50},            // validated inputs so far
//	  "pending_questions":     ["age range?"],                // what to ask next
//	  "tool_results":          [{"tool": "catalog.search", "ref": "artifact://...", "digest": "sha256:..."}],
//	  "temporary_constraints": {"ship_before": "2025-12-20"}  // valid for this session only
//	}
//
// Tool results travel as references (URI and digest), not payloads: state is
// size-limited and every write carries it. Personal data never stays in state
// as is: the redactor replaces it with "pii:<kind>:<id>" references.
//
// Revision counts changes of State (create is 1; replace and patch add one).
// Messages and the summary do not change it, so appending a message never
// makes a concurrent state patch stale.
type Session struct {
	TenantID       string          `json:"tenant_id"`
	SessionID      string          `json:"session_id"`
	UserID         string          `json:"user_id"`
	App            string          `json:"app,omitempty"`
	State          json.RawMessage `json:"state,omitempty"` // absent only in list items
	Revision       int64           `json:"revision"`
	Summary        *Summary        `json:"summary,omitempty"`
	MessageCount   int             `json:"message_count"`
	LastSeq        int64           `json:"last_seq"`
	TTL            time.Duration   `json:"-"`
	CreatedAt      time.Time       `json:"created_at"`
	LastActivityAt time.Time       `json:"last_activity_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
}

// sessionJSON adds ttl_seconds, which a time.Duration cannot carry as is.
type sessionJSON struct {
	sessionAlias
	TTLSeconds float64 `json:"ttl_seconds"`
}

type sessionAlias Session

// MarshalJSON writes the TTL as ttl_seconds.
func (s Session) MarshalJSON() ([]byte, error) {
	return json.Marshal(sessionJSON{sessionAlias: sessionAlias(s), TTLSeconds: s.TTL.Seconds()})
}

// UnmarshalJSON reads ttl_seconds back into TTL.
func (s *Session) UnmarshalJSON(b []byte) error {
	var v sessionJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Session(v.sessionAlias)
	s.TTL = time.Duration(v.TTLSeconds * float64(time.Second))
	return nil
}

// Summary is the session's summary slot: a lossy, rebuildable digest of the
// messages up to ThroughSeq. Data carries what must survive as structure
// (amounts, ids, decisions), not only prose. It never feeds back into State.
type Summary struct {
	Text       string          `json:"text"`
	Data       json.RawMessage `json:"data,omitempty"`
	ThroughSeq int64           `json:"through_seq"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// Message is one entry of a session's append-only message history. Seq grows
// by one per message; CreatedAt strictly increases within a session.
type Message struct {
	Seq       int64           `json:"seq"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// MessageInput is a message as a caller appends it.
type MessageInput struct {
	Role     string          `json:"role"`
	Content  string          `json:"content"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// AppendResult tells what an append stored and what the cap trimmed.
type AppendResult struct {
	// Messages are the appended messages with their seq and time.
	Messages []Message `json:"messages"`
	// Trimmed is how many of the oldest messages were dropped to keep the cap.
	Trimmed      int       `json:"trimmed"`
	MessageCount int       `json:"message_count"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Replayed is set when an append under an idempotency key repeated an
	// earlier one: nothing was appended, Messages are the earlier append's
	// (those the cap has not dropped since) and Trimmed is 0.
	Replayed bool `json:"replayed,omitempty"`
}

// MessageQuery selects messages: the latest Limit among those created after
// Since, with seq after AfterSeq and (when BeforeSeq > 0) before BeforeSeq,
// returned oldest first. A page cursor (Service.MessagePage) sets BeforeSeq:
// pages go from the newest messages to older ones.
type MessageQuery struct {
	Limit     int
	Since     time.Time
	AfterSeq  int64
	BeforeSeq int64
}

// PutRequest creates or replaces a session.
type PutRequest struct {
	UserID string          `json:"user_id"`
	App    string          `json:"app,omitempty"`
	State  json.RawMessage `json:"state,omitempty"`
	// TTL of inactivity after which the session is gone; 0 means the service default.
	TTL time.Duration `json:"-"`
	// ExpectedRevision, when > 0, makes the put conditional on the current revision.
	ExpectedRevision int64 `json:"-"`
}

// PutParams is a validated put as handed to a Store.
type PutParams struct {
	TenantID         string
	SessionID        string
	UserID           string
	App              string
	State            json.RawMessage
	TTL              time.Duration
	ExpectedRevision int64
}
