package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mementohq/memento/internal/localschema"

	"github.com/mementohq/memento/internal/jsoncheck"
)

// Defaults and bounds, each overridable through Options.
const (
	DefaultTTL             = 30 * time.Minute
	DefaultMaxTTL          = 7 * 24 * time.Hour
	MinTTL                 = 100 * time.Millisecond
	DefaultMaxMessages     = 200
	DefaultMaxMessageBytes = 16 << 10
	DefaultMaxStateBytes   = 64 << 10
	DefaultMaxAppendBatch  = 100
	DefaultListLimit       = 50
	MaxListLimit           = 1000
	MaxIDLength            = 256
	MaxRoleLength          = 64
)

// Options configure a Service. Zero values take the defaults above.
type Options struct {
	DefaultTTL      time.Duration
	MaxTTL          time.Duration
	MaxMessages     int // cap per session; the oldest are trimmed beyond it
	MaxMessageBytes int // content plus metadata of one message
	MaxStateBytes   int // state, and the summary, as stored
	MaxAppendBatch  int
	// Redactor replaces personal data before anything is stored; nil stores
	// text as given. The engine wires the pii vault here by default.
	Redactor Redactor
}

// Service applies the session rules (validation, limits, merge patch,
// redaction, schemas) on top of a Store. Redaction runs before the store
// write, so a write refused by the store (a stale revision, say) may leave
// values in the vault that no session references; the vault's retention
// removes them.
type Service struct {
	store Store
	opts  Options

	mu      sync.RWMutex
	schemas map[string]*jsonschema.Schema
}

// NewService wires a Service to a Store.
func NewService(store Store, opts Options) *Service {
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = DefaultTTL
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultMaxTTL
	}
	if opts.DefaultTTL > opts.MaxTTL {
		opts.DefaultTTL = opts.MaxTTL
	}
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = DefaultMaxMessages
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxStateBytes <= 0 {
		opts.MaxStateBytes = DefaultMaxStateBytes
	}
	if opts.MaxAppendBatch <= 0 {
		opts.MaxAppendBatch = DefaultMaxAppendBatch
	}
	return &Service{store: store, opts: opts, schemas: map[string]*jsonschema.Schema{}}
}

// Options returns the effective options.
func (s *Service) Options() Options { return s.opts }

// Store returns the underlying store.
func (s *Service) Store() Store { return s.store }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// ValidID checks a caller-chosen identifier (session id, user id, app).
func ValidID(kind, id string) error {
	if id == "" {
		return invalid("%s is required", kind)
	}
	if len(id) > MaxIDLength {
		return invalid("%s is longer than %d bytes", kind, MaxIDLength)
	}
	if !utf8.ValidString(id) {
		return invalid("%s is not valid UTF-8", kind)
	}
	for _, r := range id {
		if r < 0x21 || r == 0x7f || r == '/' || r == '?' || r == '#' || r == '%' {
			return invalid("%s contains a character that is not allowed (space, control, '/', '?', '#', '%%')", kind)
		}
	}
	if id == "." || id == ".." {
		// A URL path cannot name it: clients and servers resolve dot segments.
		return invalid("%s must not be %q", kind, id)
	}
	return nil
}

// wrapOnce adds the operation's context to a store error unless the store
// already did (the SQLite and Redis stores do), so no detail repeats its
// prefix ("get session s: get session s: ...").
func wrapOnce(op string, err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, op+":") {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

func checkIDs(tenantID, sessionID, userID string) error {
	if tenantID == "" {
		return invalid("tenant is required")
	}
	if err := ValidID("session_id", sessionID); err != nil {
		return err
	}
	return ValidID("user_id", userID)
}

// RegisterSchema sets the JSON Schema the state of sessions of app must
// match (app "" covers sessions without an app). The schema sees the state
// as stored, after redaction: a field that may hold personal data holds a
// "pii:<kind>:<id>" reference, so declare it as a plain string.
func (s *Service) RegisterSchema(app string, schema []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return fmt.Errorf("parse session schema %q: %w", app, err)
	}
	c := localschema.NewCompiler()
	url := fmt.Sprintf("memento:///sessions/%s.json", app)
	if err := c.AddResource(url, doc); err != nil {
		return fmt.Errorf("add session schema %q: %w", app, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("compile session schema %q: %w", app, err)
	}
	s.mu.Lock()
	s.schemas[app] = sch
	s.mu.Unlock()
	return nil
}

func (s *Service) validateSchema(app string, state json.RawMessage) error {
	s.mu.RLock()
	sch := s.schemas[app]
	s.mu.RUnlock()
	if sch == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(state))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSchemaValidation, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%w: app %q: %v", ErrSchemaValidation, app, err)
	}
	return nil
}

func (s *Service) tooLarge(n int) error {
	return fmt.Errorf("%w: %d bytes, limit %d; keep large tool results as references (URI and digest)", ErrStateTooLarge, n, s.opts.MaxStateBytes)
}

// decodeState parses a state document: a JSON object within the size limit.
func (s *Service) decodeState(state json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(state)) == 0 {
		return map[string]any{}, nil
	}
	if len(state) > s.opts.MaxStateBytes {
		return nil, s.tooLarge(len(state))
	}
	if err := checkDoc("state", state); err != nil {
		return nil, err
	}
	v, err := decodeJSON(state)
	if err != nil {
		return nil, invalid("state is not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, invalid("state must be a JSON object")
	}
	return v, nil
}

// finishState redacts (through b), re-encodes and checks the size and schema
// of a decoded state.
// It returns the vault references it made, for the caller to forget if
// the write then fails; it forgets them itself when it refuses the state.
func (s *Service) finishState(ctx context.Context, tenantID, app string, v any) (json.RawMessage, []string, error) {
	var b batch
	d := b.addDoc(v)
	if err := b.protect(ctx, s.opts.Redactor, tenantID); err != nil {
		return nil, nil, err
	}
	out, err := s.checkState(app, &b, d)
	if err != nil {
		s.unprotect(ctx, tenantID, b.created)
		return nil, nil, err
	}
	return out, b.created, nil
}

// checkState encodes the protected state and checks its size and schema.
func (s *Service) checkState(app string, b *batch, d *jsonDoc) (json.RawMessage, error) {
	out, err := b.doc(d)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	if len(out) > s.opts.MaxStateBytes {
		return nil, s.tooLarge(len(out))
	}
	if err := s.validateSchema(app, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Forgetter is an optional Redactor capability (pii.Vault has it): delete
// a reference it made, so that a request that fails after its personal
// data was protected leaves none of it behind.
type Forgetter interface {
	Forget(ctx context.Context, tenantID, ref string) error
}

// unprotect forgets the vault references a failed request made. It runs
// detached from the request (which may have failed by its deadline), with
// a bound of its own; a reference it cannot delete expires with the vault's
// retention.
func (s *Service) unprotect(ctx context.Context, tenantID string, refs []string) {
	f, ok := s.opts.Redactor.(Forgetter)
	if !ok || len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, ref := range refs {
		_ = f.Forget(ctx, tenantID, ref)
	}
}

func (s *Service) ttl(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return s.opts.DefaultTTL, nil
	case d < MinTTL:
		return 0, invalid("ttl must be at least %s", MinTTL)
	case d > s.opts.MaxTTL:
		return 0, invalid("ttl must be at most %s", s.opts.MaxTTL)
	}
	return d, nil
}

// Put creates the session or replaces its state (messages and summary are
// kept). created tells which.
func (s *Service) Put(ctx context.Context, tenantID, sessionID string, req PutRequest) (Session, bool, error) {
	if err := checkIDs(tenantID, sessionID, req.UserID); err != nil {
		return Session{}, false, err
	}
	if req.App != "" {
		if err := ValidID("app", req.App); err != nil {
			return Session{}, false, err
		}
	}
	if req.ExpectedRevision < 0 {
		return Session{}, false, invalid("expected revision must not be negative")
	}
	ttl, err := s.ttl(req.TTL)
	if err != nil {
		return Session{}, false, err
	}
	v, err := s.decodeState(req.State)
	if err != nil {
		return Session{}, false, err
	}
	state, refs, err := s.finishState(ctx, tenantID, req.App, v)
	if err != nil {
		return Session{}, false, err
	}
	sess, created, err := s.store.Put(ctx, PutParams{
		TenantID: tenantID, SessionID: sessionID, UserID: req.UserID, App: req.App,
		State: state, TTL: ttl, ExpectedRevision: req.ExpectedRevision,
	})
	if err != nil {
		s.unprotect(ctx, tenantID, refs)
		return Session{}, false, wrapOnce(fmt.Sprintf("put session %s", sessionID), err)
	}
	return sess, created, nil
}

// Get returns a live session of the user.
func (s *Service) Get(ctx context.Context, tenantID, sessionID, userID string) (Session, error) {
	if err := checkIDs(tenantID, sessionID, userID); err != nil {
		return Session{}, err
	}
	sess, err := s.store.Get(ctx, tenantID, sessionID, userID)
	if err != nil {
		return Session{}, wrapOnce(fmt.Sprintf("get session %s", sessionID), err)
	}
	return sess, nil
}

// Patch applies a JSON Merge Patch (RFC 7386) to the state if the session is
// at expectedRevision; a stale revision is ErrPreconditionFailed and changes
// nothing. The patch must be a JSON object (a non-object would replace the
// whole state with a non-object). Only the patch is redacted: the stored
// state was redacted when it was written, and its references stay as they are.
func (s *Service) Patch(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, patch json.RawMessage) (Session, error) {
	if err := checkIDs(tenantID, sessionID, userID); err != nil {
		return Session{}, err
	}
	if expectedRevision <= 0 {
		return Session{}, ErrPreconditionRequired
	}
	if len(patch) > s.opts.MaxStateBytes {
		return Session{}, s.tooLarge(len(patch))
	}
	if err := checkDoc("patch", patch); err != nil {
		return Session{}, err
	}
	pv, err := decodeJSON(patch)
	if err != nil {
		return Session{}, invalid("patch is not valid JSON: %v", err)
	}
	if _, ok := pv.(map[string]any); !ok {
		return Session{}, invalid("a merge patch of session state must be a JSON object")
	}
	var refs []string
	if !s.cleanJSON(patch) {
		var b batch
		d := b.addDoc(pv)
		if err := b.protect(ctx, s.opts.Redactor, tenantID); err != nil {
			return Session{}, err
		}
		i := d.start
		pv = substitute(d.v, b.texts, &i)
		refs = b.created
	}
	p := pv.(map[string]any)
	var mergeErr error
	merge := func(cur Session) (json.RawMessage, error) {
		out, err := mergeState(cur.State, p)
		switch {
		case err != nil:
			mergeErr = wrapOnce(fmt.Sprintf("patch session %s", sessionID), err)
		case len(out) > s.opts.MaxStateBytes:
			mergeErr = s.tooLarge(len(out))
		case checkDoc("the patched state", out) != nil:
			// The result, not only the patch, is what gets stored.
			mergeErr = checkDoc("the patched state", out)
		default:
			mergeErr = s.validateSchema(cur.App, out)
		}
		if mergeErr != nil {
			return nil, mergeErr
		}
		return out, nil
	}
	var sess Session
	if sp, ok := s.store.(StatePatcher); ok {
		sess, err = sp.PatchState(ctx, tenantID, sessionID, userID, expectedRevision, merge)
	} else {
		sess, err = s.readMergeSet(ctx, tenantID, sessionID, userID, expectedRevision, merge)
	}
	if err != nil {
		s.unprotect(ctx, tenantID, refs)
		if mergeErr != nil && err == mergeErr {
			return Session{}, err
		}
		return Session{}, wrapOnce(fmt.Sprintf("patch session %s", sessionID), err)
	}
	return sess, nil
}

// readMergeSet is a patch on a store without StatePatcher: read, merge,
// compare-and-set.
func (s *Service) readMergeSet(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, merge func(Session) (json.RawMessage, error)) (Session, error) {
	cur, err := s.store.Get(ctx, tenantID, sessionID, userID)
	if err != nil {
		return Session{}, err
	}
	if cur.Revision != expectedRevision {
		return Session{}, fmt.Errorf("at revision %d (current %d): %w", expectedRevision, cur.Revision, ErrPreconditionFailed)
	}
	state, err := merge(cur)
	if err != nil {
		return Session{}, err
	}
	return s.store.SetState(ctx, tenantID, sessionID, userID, expectedRevision, state)
}

// cleanJSON reports that redaction would change nothing in b.
func (s *Service) cleanJSON(b []byte) bool {
	if s.opts.Redactor == nil {
		return true
	}
	sc, ok := s.opts.Redactor.(JSONScreener)
	return ok && sc.CleanJSON(b)
}

// plainMetadata returns message metadata that needs no redaction as it
// may be stored (compacted), without decoding it; ok is false when it must
// take the decoding path (personal data possible, or invalid: that path
// words the error).
func (s *Service) plainMetadata(meta []byte) (json.RawMessage, bool) {
	if !s.cleanJSON(meta) || !utf8.Valid(meta) || !json.Valid(meta) {
		return nil, false
	}
	if meta[0] != '{' {
		return nil, false
	}
	if bytes.ContainsAny(meta, " \t\r\n") {
		var buf bytes.Buffer
		if json.Compact(&buf, meta) != nil {
			return nil, false
		}
		return buf.Bytes(), true
	}
	return meta, true
}

// Append adds messages; beyond the cap the oldest are trimmed in the same
// atomic step and the result says how many.
func (s *Service) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []MessageInput) (AppendResult, error) {
	return s.AppendKeyed(ctx, tenantID, sessionID, userID, msgs, "")
}

// AppendKeyed is Append made safe to retry under an idempotency key: an
// append that repeats one of the session's last MaxAppendKeys keyed
// appends (same key, same messages) appends nothing and answers the
// earlier append's messages with Replayed set; the key with other messages
// is ErrIdempotencyMismatch. An empty key is a plain Append.
func (s *Service) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []MessageInput, key string) (AppendResult, error) {
	if err := checkIDs(tenantID, sessionID, userID); err != nil {
		return AppendResult{}, err
	}
	if len(key) > MaxIDLength || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return AppendResult{}, invalid("idempotency key must be valid UTF-8 without NUL, at most %d bytes", MaxIDLength)
	}
	if len(msgs) == 0 {
		return AppendResult{}, invalid("no messages to append")
	}
	if len(msgs) > s.opts.MaxAppendBatch {
		return AppendResult{}, invalid("at most %d messages per append, got %d", s.opts.MaxAppendBatch, len(msgs))
	}
	var b batch
	type ref struct {
		role    int // redacted too: a role is free text, and some put a name or address there
		content int
		meta    *jsonDoc
		plain   json.RawMessage // metadata that needs no redaction
	}
	refs := make([]ref, len(msgs))
	for i, m := range msgs {
		if m.Role == "" || len(m.Role) > MaxRoleLength || !utf8.ValidString(m.Role) {
			return AppendResult{}, invalid("message %d: role is required, at most %d bytes", i, MaxRoleLength)
		}
		if !utf8.ValidString(m.Content) {
			return AppendResult{}, invalid("message %d: content is not valid UTF-8", i)
		}
		if m.Content == "" && emptyMetadata(m.Metadata) {
			// Nothing to remember: most likely a misspelt field ("text").
			return AppendResult{}, invalid("message %d: content is required (or metadata, for a message such as a tool call without text)", i)
		}
		// Text columns (PostgreSQL) cannot hold NUL; no backend takes it.
		if strings.IndexByte(m.Content, 0) >= 0 || strings.IndexByte(m.Role, 0) >= 0 {
			return AppendResult{}, invalid("message %d: role and content must not contain NUL characters", i)
		}
		if n := len(m.Content) + len(m.Metadata); n > s.opts.MaxMessageBytes {
			return AppendResult{}, fmt.Errorf("%w: message %d has %d bytes, limit %d", ErrMessageTooLarge, i, n, s.opts.MaxMessageBytes)
		}
		refs[i].role, refs[i].content = b.addText(m.Role), b.addText(m.Content)
		if meta := bytes.TrimSpace(m.Metadata); len(meta) > 0 && string(meta) != "null" {
			// The label is formatted only for a refusal: this is the hot path.
			if err := jsoncheck.Check(meta, MaxDepth); err != nil {
				return AppendResult{}, invalid("message %d: metadata: %v", i, err)
			}
			if plain, ok := s.plainMetadata(meta); ok {
				refs[i].plain = plain
			} else {
				v, err := decodeJSON(m.Metadata)
				if err != nil {
					return AppendResult{}, invalid("message %d: metadata is not valid JSON: %v", i, err)
				}
				if _, ok := v.(map[string]any); !ok {
					return AppendResult{}, invalid("message %d: metadata must be a JSON object", i)
				}
				refs[i].meta = b.addDoc(v)
			}
		}
	}
	if err := b.protect(ctx, s.opts.Redactor, tenantID); err != nil {
		return AppendResult{}, err
	}
	fail := func(err error) (AppendResult, error) {
		s.unprotect(ctx, tenantID, b.created)
		return AppendResult{}, err
	}
	out := make([]MessageInput, len(msgs))
	for i := range msgs {
		out[i] = MessageInput{Role: b.texts[refs[i].role], Content: b.texts[refs[i].content], Metadata: refs[i].plain}
		if refs[i].meta != nil {
			meta, err := b.doc(refs[i].meta)
			if err != nil {
				return fail(fmt.Errorf("encode metadata: %w", err))
			}
			out[i].Metadata = meta
		}
		if n := len(out[i].Content) + len(out[i].Metadata); n > s.opts.MaxMessageBytes {
			return fail(fmt.Errorf("%w: message %d has %d bytes after personal data was replaced by references, limit %d", ErrMessageTooLarge, i, n, s.opts.MaxMessageBytes))
		}
	}
	// The hot path formats nothing: the operation is named on failure only.
	op := func() string { return "append to session " + sessionID }
	if key == "" {
		res, err := s.store.Append(ctx, tenantID, sessionID, userID, out, s.opts.MaxMessages)
		if err != nil {
			return fail(wrapOnce(op(), err))
		}
		return res, nil
	}
	res, replay, err := s.store.AppendKeyed(ctx, tenantID, sessionID, userID, out, s.opts.MaxMessages, AppendKey{Key: key, Digest: messagesDigest(msgs)})
	if err != nil {
		op := op()
		// The key goes in once, beside the session the store may have named.
		if u := errors.Unwrap(err); u != nil && strings.HasPrefix(err.Error(), op+":") {
			err = u
		}
		return fail(fmt.Errorf("%s under idempotency key %q: %w", op, key, err))
	}
	if replay == nil {
		return res, nil
	}
	// The personal data of this try went to the vault for nothing: the
	// messages of the first try hold references of their own.
	s.unprotect(ctx, tenantID, b.created)
	return s.replayed(ctx, tenantID, sessionID, userID, *replay)
}

// replayed answers a repeated keyed append: the earlier append's messages
// still kept, and the session's count and expiry as they are now.
func (s *Service) replayed(ctx context.Context, tenantID, sessionID, userID string, rp AppendReplay) (AppendResult, error) {
	sess, err := s.store.Get(ctx, tenantID, sessionID, userID)
	if err != nil {
		return AppendResult{}, wrapOnce(fmt.Sprintf("read session %s", sessionID), err)
	}
	ms, err := s.store.Messages(ctx, tenantID, sessionID, userID, MessageQuery{AfterSeq: rp.FirstSeq - 1, BeforeSeq: rp.FirstSeq + int64(rp.Count), Limit: rp.Count})
	if err != nil {
		return AppendResult{}, wrapOnce(fmt.Sprintf("list messages of session %s", sessionID), err)
	}
	if ms == nil {
		ms = []Message{}
	}
	return AppendResult{Messages: ms, MessageCount: sess.MessageCount, ExpiresAt: sess.ExpiresAt, Replayed: true}, nil
}

// messagesDigest is the SHA-256 of the messages as the caller sent them
// (before personal data is replaced by references, which differ per try),
// over an unambiguous encoding.
func messagesDigest(msgs []MessageInput) string {
	h := sha256.New()
	for _, m := range msgs {
		meta := bytes.TrimSpace(m.Metadata)
		var buf bytes.Buffer
		if len(meta) > 0 && json.Compact(&buf, meta) == nil {
			meta = buf.Bytes()
		}
		for _, part := range [][]byte{[]byte(m.Role), []byte(m.Content), meta} {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write(part)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Messages lists messages: the latest q.Limit (default DefaultListLimit)
// after q.Since / q.AfterSeq, oldest first.
func (s *Service) Messages(ctx context.Context, tenantID, sessionID, userID string, q MessageQuery) ([]Message, error) {
	ms, _, err := s.MessagePage(ctx, tenantID, sessionID, userID, q, "")
	return ms, err
}

// MessagePage is Messages with a cursor: the first page (cursor "") holds
// the newest messages, each next page the ones before it. next is "" on the
// last page. A caller passes the same filters with every page.
func (s *Service) MessagePage(ctx context.Context, tenantID, sessionID, userID string, q MessageQuery, cursor string) ([]Message, string, error) {
	if err := checkIDs(tenantID, sessionID, userID); err != nil {
		return nil, "", err
	}
	switch {
	case q.Limit < 0:
		return nil, "", invalid("limit must not be negative")
	case q.Limit == 0:
		q.Limit = DefaultListLimit
	case q.Limit > MaxListLimit:
		return nil, "", invalid("limit must be at most %d", MaxListLimit)
	}
	if q.AfterSeq < 0 || q.BeforeSeq < 0 {
		return nil, "", invalid("after_seq and before_seq must not be negative")
	}
	if cursor != "" {
		b, err := decodeMessagesCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		if q.BeforeSeq == 0 || b < q.BeforeSeq {
			q.BeforeSeq = b
		}
	}
	limit := q.Limit
	q.Limit++ // one more tells whether an older page exists
	ms, err := s.store.Messages(ctx, tenantID, sessionID, userID, q)
	if err != nil {
		return nil, "", wrapOnce(fmt.Sprintf("list messages of session %s", sessionID), err)
	}
	next := ""
	if len(ms) > limit {
		ms = ms[len(ms)-limit:]
		next = messagesCursor(ms[0].Seq)
	}
	return ms, next, nil
}

// emptyMetadata reports metadata that holds nothing: absent, null or {}.
func emptyMetadata(m json.RawMessage) bool {
	t := bytes.TrimSpace(m)
	if len(t) == 0 || string(t) == "null" {
		return true
	}
	var o map[string]json.RawMessage
	return json.Unmarshal(t, &o) == nil && len(o) == 0
}

// SetSummary fills the summary slot. Text and Data are redacted like state.
func (s *Service) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum Summary) (Session, error) {
	if err := checkIDs(tenantID, sessionID, userID); err != nil {
		return Session{}, err
	}
	if sum.ThroughSeq < 0 {
		return Session{}, invalid("through_seq must not be negative")
	}
	if !utf8.ValidString(sum.Text) {
		return Session{}, invalid("summary text is not valid UTF-8")
	}
	if strings.IndexByte(sum.Text, 0) >= 0 {
		return Session{}, invalid("summary text must not contain NUL characters")
	}
	if n := len(sum.Text) + len(sum.Data); n > s.opts.MaxStateBytes {
		return Session{}, fmt.Errorf("%w: summary has %d bytes, limit %d", ErrStateTooLarge, n, s.opts.MaxStateBytes)
	}
	if sum.ThroughSeq > 0 {
		// A summary of messages that do not exist yet would hide the ones
		// appended next. Seqs only grow, so a check before the write holds.
		cur, err := s.store.Get(ctx, tenantID, sessionID, userID)
		if err != nil {
			return Session{}, wrapOnce(fmt.Sprintf("get session %s", sessionID), err)
		}
		if sum.ThroughSeq > cur.LastSeq {
			return Session{}, invalid("through_seq %d is past the session's last message (seq %d)", sum.ThroughSeq, cur.LastSeq)
		}
	}
	var b batch
	ti := b.addText(sum.Text)
	var d *jsonDoc
	if len(bytes.TrimSpace(sum.Data)) > 0 && string(bytes.TrimSpace(sum.Data)) != "null" {
		if err := checkDoc("summary data", sum.Data); err != nil {
			return Session{}, err
		}
		v, err := decodeJSON(sum.Data)
		if err != nil {
			return Session{}, invalid("summary data is not valid JSON: %v", err)
		}
		d = b.addDoc(v)
	}
	if err := b.protect(ctx, s.opts.Redactor, tenantID); err != nil {
		return Session{}, err
	}
	fail := func(err error) (Session, error) {
		s.unprotect(ctx, tenantID, b.created)
		return Session{}, err
	}
	out := Summary{Text: b.texts[ti], ThroughSeq: sum.ThroughSeq}
	if d != nil {
		data, err := b.doc(d)
		if err != nil {
			return fail(fmt.Errorf("encode summary data: %w", err))
		}
		out.Data = data
	}
	if n := len(out.Text) + len(out.Data); n > s.opts.MaxStateBytes {
		return fail(fmt.Errorf("%w: summary has %d bytes after redaction, limit %d", ErrStateTooLarge, n, s.opts.MaxStateBytes))
	}
	sess, err := s.store.SetSummary(ctx, tenantID, sessionID, userID, out)
	if err != nil {
		return fail(wrapOnce(fmt.Sprintf("set summary of session %s", sessionID), err))
	}
	return sess, nil
}

// Close ends the session: its state, messages and summary are deleted and
// the final session is returned, so the caller can checkpoint what matters.
func (s *Service) Close(ctx context.Context, tenantID, sessionID, userID string) (Session, error) {
	if err := checkIDs(tenantID, sessionID, userID); err != nil {
		return Session{}, err
	}
	sess, err := s.store.Delete(ctx, tenantID, sessionID, userID)
	if err != nil {
		return Session{}, wrapOnce(fmt.Sprintf("close session %s", sessionID), err)
	}
	return sess, nil
}

// ListUser returns the first page of the user's live sessions, most
// recently active first (see ListUserPage).
func (s *Service) ListUser(ctx context.Context, tenantID, userID string, limit int) ([]Session, error) {
	ss, _, err := s.ListUserPage(ctx, tenantID, userID, "", limit)
	return ss, err
}

// ListUserPage returns a page of the user's live sessions, most recently
// active first, and the cursor of the next page ("" on the last). Items
// carry no state or summary (Store.ListByUser).
func (s *Service) ListUserPage(ctx context.Context, tenantID, userID, cursor string, limit int) ([]Session, string, error) {
	if tenantID == "" {
		return nil, "", invalid("tenant is required")
	}
	if err := ValidID("user_id", userID); err != nil {
		return nil, "", err
	}
	switch {
	case limit < 0:
		return nil, "", invalid("limit must not be negative")
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		return nil, "", invalid("limit must be at most %d", MaxListLimit)
	}
	var q ListQuery
	if cursor != "" {
		var err error
		if q, err = decodeSessionsCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	q.Limit = limit + 1
	ss, err := s.store.ListByUser(ctx, tenantID, userID, q)
	if err != nil {
		return nil, "", fmt.Errorf("list sessions of user: %w", err)
	}
	next := ""
	if len(ss) > limit {
		ss = ss[:limit]
		next = sessionsCursor(ss[len(ss)-1])
	}
	return ss, next, nil
}
