package compact

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
)

// Item is one entry of an owner's log as compaction sees it: a run event
// (Type its event_type) or a session message (Type its role, Payload the
// JSON object {"content", "metadata"}).
type Item struct {
	Seq     int64
	Type    string
	StepID  string
	Attempt int
	Payload json.RawMessage
	// Text is the message content (empty for events: their text is in Payload).
	Text      string
	CreatedAt time.Time
}

// Source reads an owner's log. Items returns the items with from <= seq <=
// to in seq order, only those that exist (a caller checks for holes); an
// unknown owner is the domain's not-found error (run.ErrNotFound,
// session.ErrNotFound). Bounds returns the lowest and highest seq the log
// holds (0, 0 when empty); a log only ever loses entries at its start (a
// session's cap), so the seqs between exist unless something broke.
type Source interface {
	Items(ctx context.Context, tenantID string, owner Owner, from, to int64) ([]Item, error)
	Bounds(ctx context.Context, tenantID string, owner Owner) (first, last int64, err error)
}

// Incarnated is a Source that also names the incarnation of an owner's
// log (a run or session created again under the same id is another one).
// Within one incarnation a log grows at its end, loses entries only at
// its start, and never changes an entry: a range whose digest matched
// once matches while the range is still in the log. Usable, which the
// context builder calls on every build, then trusts an earlier match for a
// while (verifiedTTL) instead of reading the whole range again; Verify
// always reads it.
type Incarnated interface {
	Source
	// Log is Bounds and the incarnation (non-empty).
	Log(ctx context.Context, tenantID string, owner Owner) (first, last int64, incarnation string, err error)
}

// DigestPrefix starts every SourceDigest.
const DigestPrefix = "sha256:"

// SourceDigest is the digest a summary carries of exactly the items it
// covers, in seq order. The encoding, version 1:
//
//	SHA-256( "memento.summary.source/v1" || for each item:
//	           field(seq) field(type) field(step_id) field(attempt) field(payload) )
//	field(x) = 8-byte big-endian length of x || x
//
// where seq and attempt are base-10 ASCII, and payload is the item's
// payload in RFC 8785 canonical JSON (sorted keys, no spacing, numbers in
// their shortest form, an absent payload as null): PostgreSQL's jsonb
// re-spaces and re-orders what it stores, so only a canonical form gives
// the same digest on every backend. Times are left out: they are not what
// a summary says, and backends keep them at different precisions. The
// result is "sha256:" followed by 64 hex digits.
func SourceDigest(items []Item) (string, error) {
	h := sha256.New()
	h.Write([]byte("memento.summary.source/v1"))
	for _, it := range items {
		p, err := canonicalJSON(it.Payload)
		if err != nil {
			return "", fmt.Errorf("digest of seq %d: %w", it.Seq, err)
		}
		field(h, []byte(strconv.FormatInt(it.Seq, 10)))
		field(h, []byte(it.Type))
		field(h, []byte(it.StepID))
		field(h, []byte(strconv.Itoa(it.Attempt)))
		field(h, p)
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// ContentDigest is SHA-256 over a canonical encoding of what a summary
// says and what it stands for: owner, range, source digest, compactor,
// facts, questions, decisions, carried items, text, chain links and
// version. The service seals every summary it makes with it (Seal), and
// Verify recomputes it, so a summary edited where it is stored (a fact
// dropped, an amount changed) fails verification instead of being read.
func ContentDigest(s Summary) (string, error) {
	s.normalize() // nil and empty lists read back alike from every store
	body, err := json.Marshal(struct {
		Owner         Owner      `json:"owner"`
		Version       int        `json:"version"`
		Covers        Range      `json:"covers"`
		SourceDigest  string     `json:"source_digest"`
		Compactor     Identity   `json:"compactor"`
		Facts         []Fact     `json:"facts"`
		OpenQuestions []Question `json:"open_questions"`
		Decisions     []Decision `json:"decisions"`
		Carried       Carried    `json:"carried"`
		Text          string     `json:"text"`
		Previous      string     `json:"previous"`
		Supersedes    string     `json:"supersedes"`
	}{s.Owner, s.Version, s.Covers, s.SourceDigest, s.Compactor, s.Facts, s.OpenQuestions, s.Decisions, s.Carried, s.Text, s.Previous, s.Supersedes})
	if err != nil {
		return "", fmt.Errorf("content digest: %w", err)
	}
	c, err := canonicalJSON(body)
	if err != nil {
		return "", fmt.Errorf("content digest: %w", err)
	}
	h := sha256.New()
	h.Write([]byte("memento.summary.content/v1"))
	field(h, c)
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// Seal sets s.ContentDigest to ContentDigest(*s): a summary made outside
// the service (an import, a test) is sealed before it is stored.
func Seal(s *Summary) error {
	d, err := ContentDigest(*s)
	if err != nil {
		return err
	}
	s.ContentDigest = d
	return nil
}

func field(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// canonicalJSON is b in RFC 8785 form (jsontext's Canonicalize).
func canonicalJSON(b json.RawMessage) ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	v := jsontext.Value(append([]byte(nil), b...))
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return v, nil
}

// RunSource reads a run's events from a run.Store.
type RunSource struct{ Store run.Store }

// sourcePage is how many events or messages one read asks for.
const sourcePage = 500

// Items reads the events of [from, to] page by page.
func (s RunSource) Items(ctx context.Context, tenantID string, owner Owner, from, to int64) ([]Item, error) {
	var out []Item
	after := from - 1
	for after < to {
		limit := int(min(int64(sourcePage), to-after))
		evs, err := s.Store.ListEvents(ctx, tenantID, owner.ID, after, limit)
		if err != nil {
			return nil, fmt.Errorf("read events of run %s: %w", owner.ID, err)
		}
		for _, e := range evs {
			if e.Seq > to {
				break
			}
			out = append(out, Item{Seq: e.Seq, Type: e.EventType, StepID: e.StepID, Attempt: e.Attempt, Payload: e.Payload, CreatedAt: e.CreatedAt})
		}
		if len(evs) < limit {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	return out, nil
}

// Bounds is 1 and the run's state revision, the seq of its last event.
func (s RunSource) Bounds(ctx context.Context, tenantID string, owner Owner) (int64, int64, error) {
	first, last, _, err := s.Log(ctx, tenantID, owner)
	return first, last, err
}

// Log is Bounds and the run's creation time as its incarnation.
func (s RunSource) Log(ctx context.Context, tenantID string, owner Owner) (int64, int64, string, error) {
	r, err := s.Store.GetRun(ctx, tenantID, owner.ID)
	if err != nil {
		return 0, 0, "", fmt.Errorf("read run %s: %w", owner.ID, err)
	}
	return 1, r.StateRevision, incarnation(r.CreatedAt), nil
}

func incarnation(created time.Time) string { return created.UTC().Format(time.RFC3339Nano) }

// SessionSource reads a session's messages from a session.Store, as the
// owner's user. Messages trimmed by the session's cap are gone: a summary
// of them no longer verifies.
type SessionSource struct{ Store session.Store }

// Items reads the messages of [from, to] in windows of at most sourcePage seqs.
func (s SessionSource) Items(ctx context.Context, tenantID string, owner Owner, from, to int64) ([]Item, error) {
	var out []Item
	for a := from; a <= to; a += sourcePage {
		b := min(a+sourcePage-1, to)
		msgs, err := s.Store.Messages(ctx, tenantID, owner.ID, owner.UserID, session.MessageQuery{AfterSeq: a - 1, BeforeSeq: b + 1, Limit: int(b - a + 1)})
		if err != nil {
			return nil, fmt.Errorf("read messages of session %s: %w", owner.ID, err)
		}
		for _, m := range msgs {
			out = append(out, messageItem(m))
		}
	}
	return out, nil
}

func messageItem(m session.Message) Item {
	p := struct {
		Content  string          `json:"content"`
		Metadata json.RawMessage `json:"metadata,omitempty"`
	}{m.Content, m.Metadata}
	b, _ := json.Marshal(p) // a string and valid JSON: cannot fail
	return Item{Seq: m.Seq, Type: m.Role, Payload: b, Text: m.Content, CreatedAt: m.CreatedAt}
}

// Bounds is the session's oldest kept and newest message seq: messages
// are trimmed oldest first, so they are LastSeq-MessageCount+1..LastSeq.
func (s SessionSource) Bounds(ctx context.Context, tenantID string, owner Owner) (int64, int64, error) {
	first, last, _, err := s.Log(ctx, tenantID, owner)
	return first, last, err
}

// Log is Bounds and the session's creation time as its incarnation.
func (s SessionSource) Log(ctx context.Context, tenantID string, owner Owner) (int64, int64, string, error) {
	ss, err := s.Store.Get(ctx, tenantID, owner.ID, owner.UserID)
	if err != nil {
		return 0, 0, "", fmt.Errorf("read session %s: %w", owner.ID, err)
	}
	if ss.MessageCount == 0 {
		return 0, 0, incarnation(ss.CreatedAt), nil
	}
	return ss.LastSeq - int64(ss.MessageCount) + 1, ss.LastSeq, incarnation(ss.CreatedAt), nil
}

// ItemsFromMessages turns messages into items, for a caller that holds them.
func ItemsFromMessages(msgs []session.Message) []Item {
	out := make([]Item, len(msgs))
	for i, m := range msgs {
		out[i] = messageItem(m)
	}
	return out
}

// ItemsFromEvents turns run events into items, for a caller that holds them.
func ItemsFromEvents(evs []run.Event) []Item {
	out := make([]Item, len(evs))
	for i, e := range evs {
		out[i] = Item{Seq: e.Seq, Type: e.EventType, StepID: e.StepID, Attempt: e.Attempt, Payload: e.Payload, CreatedAt: e.CreatedAt}
	}
	return out
}
