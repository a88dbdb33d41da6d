package redis

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
)

var (
	_ session.Store = (*Store)(nil)
	_ pii.Store     = (*Store)(nil)
)

// DefaultPrefix starts every key unless configured.
const DefaultPrefix = "memento:"

// indexGrace tolerates clock skew between this process and Redis when the
// user index is read with this process's clock.
const indexGrace = 5 * time.Second

// maxIndexScan bounds how many index members one listing examines.
const maxIndexScan = 2000

// Options configure a Store.
type Options struct {
	// Prefix of every key; "" means DefaultPrefix. Tests use a random one.
	Prefix string
	// StateCacheBytes bounds the memory of the last states seen, which
	// saves a patch its read; 0 means DefaultStateCacheBytes, negative
	// turns the cache off (every patch then reads the state first).
	StateCacheBytes int
}

// Store keeps sessions and the vault in Redis. It is safe for concurrent use.
type Store struct {
	c      goredis.UniversalClient
	prefix string
	owned  bool
	cache  *stateCache
	// appends shares round trips between concurrent appends (combine.go).
	appends *combiner
}

// Open connects to a redis:// or rediss:// URL, checks it answers and loads
// the scripts. A URL with addr parameters names a Redis Cluster by several
// seed addresses, go-redis's cluster URL form:
// redis://h1:p1?addr=h2:p2&addr=h3:p3. Every key of a session shares one
// hash slot, so each script runs on one node.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	c, where, err := dial(url)
	if err != nil {
		return nil, fmt.Errorf("open redis: %w", err)
	}
	s := New(c, o)
	s.owned = true
	if err := s.Ping(ctx); err != nil {
		s.c.Close()
		return nil, fmt.Errorf("open redis %s: %w", where, err)
	}
	if err := s.loadScripts(ctx); err != nil {
		s.c.Close()
		return nil, fmt.Errorf("open redis %s: %w", where, err)
	}
	return s, nil
}

// IsClusterURL reports whether url names a Redis Cluster (seed addresses
// in addr parameters).
func IsClusterURL(url string) bool {
	u, err := neturl.Parse(url)
	return err == nil && u.Query().Has("addr")
}

// dial makes the client a URL names, and says where it points (no password).
//
// The client does not send a command again after a network error (unless
// the URL sets max_retries): an append or a write script whose answer was
// lost may have run, and running it again would apply it twice. The error
// goes up instead, and the API answers that the outcome is unknown.
func dial(url string) (goredis.UniversalClient, string, error) {
	noRetry := !strings.Contains(url, "max_retries=")
	if IsClusterURL(url) {
		opts, err := goredis.ParseClusterURL(url)
		if err != nil {
			return nil, "", err
		}
		if noRetry {
			opts.MaxRetries = -1
		}
		return goredis.NewClusterClient(opts), "cluster " + strings.Join(opts.Addrs, ","), nil
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, "", err
	}
	if noRetry {
		opts.MaxRetries = -1
	}
	return goredis.NewClient(opts), opts.Addr, nil
}

// New wraps a client the caller owns (a cluster client works: all keys of one
// script share a hash tag). Close then leaves the client open.
func New(c goredis.UniversalClient, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	switch {
	case o.StateCacheBytes == 0:
		o.StateCacheBytes = DefaultStateCacheBytes
	case o.StateCacheBytes < 0:
		o.StateCacheBytes = 0
	}
	s := &Store{c: c, prefix: o.Prefix, cache: newStateCache(o.StateCacheBytes)}
	s.appends = &combiner{c: c, load: s.loadScripts}
	return s
}

// Client returns the underlying client.
func (s *Store) Client() goredis.UniversalClient { return s.c }

// Prefix returns the key prefix in use.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the client if Open made it.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.c.Close(); err != nil {
		return fmt.Errorf("close redis: %w", err)
	}
	return nil
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}

// loadScripts puts every script in the server's cache, so pipelines can use
// EVALSHA (a pipeline cannot fall back to EVAL per command).
func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("load script: %w", err)
		}
	}
	return nil
}

// esc keeps ids from forging key structure: ':', '{', '}' and '%' are
// percent-encoded, so distinct (tenant, session) pairs never share a key.
var esc = strings.NewReplacer("%", "%25", ":", "%3A", "{", "%7B", "}", "%7D")

// sessionKey is the one key of a session; its hash tag keeps it, and any
// key ever added beside it, in one cluster slot.
func (s *Store) sessionKey(tenantID, sessionID string) string {
	return s.prefix + "{t:" + esc.Replace(tenantID) + ":s:" + esc.Replace(sessionID) + "}"
}

func (s *Store) sessionKeys(tenantID, sessionID string) []string {
	return []string{s.sessionKey(tenantID, sessionID)}
}

func (s *Store) indexKey(tenantID, userID string) string {
	return s.prefix + "{t:" + esc.Replace(tenantID) + ":u:" + esc.Replace(userID) + "}:ix"
}

func (s *Store) vaultKey(tenantID, id string) string {
	return s.prefix + "{t:" + esc.Replace(tenantID) + ":v:" + esc.Replace(id) + "}"
}

func micros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func atoi(v any) int64 {
	switch t := v.(type) {
	case int64:
		return t
	case string:
		n, _ := strconv.ParseInt(t, 10, 64)
		return n
	}
	return 0
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// value reads one reply value: a string, or a number Lua sent as an
// integer; nil and false (a missing field) are "".
func value(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case int64:
		return strconv.FormatInt(t, 10)
	}
	return ""
}

// fromValues builds a session from record values in recordFields order,
// followed by the state when vals has it. It returns the generation too.
func fromValues(tenantID, sessionID string, vals []any) (session.Session, string, error) {
	num := func(i int) int64 {
		switch t := vals[i].(type) {
		case int64:
			return t
		case string:
			n, _ := strconv.ParseInt(t, 10, 64)
			return n
		}
		return 0
	}
	ss := session.Session{
		TenantID: tenantID, SessionID: sessionID, UserID: value(vals[fUser]), App: value(vals[fApp]),
		Revision:       num(fRev),
		MessageCount:   int(num(fCount)),
		LastSeq:        num(fLastSeq),
		TTL:            time.Duration(num(fTTL)) * time.Millisecond,
		CreatedAt:      micros(num(fCreated)),
		LastActivityAt: micros(num(fActivity)),
		ExpiresAt:      micros(num(fExpiry)),
	}
	if len(vals) > fState && vals[fState] != nil {
		ss.State = json.RawMessage(value(vals[fState]))
	}
	if sm := value(vals[fSummary]); sm != "" {
		var sum session.Summary
		if err := json.Unmarshal([]byte(sm), &sum); err != nil {
			return session.Session{}, "", fmt.Errorf("decode summary: %w", err)
		}
		sum.UpdatedAt = micros(num(fSummaryAt))
		ss.Summary = &sum
	}
	return ss, value(vals[fGen]), nil
}

// result is a decoded script reply.
type result struct {
	vals []any
}

func (s *Store) run(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (result, error) {
	return scriptResult(sc.Run(ctx, s.c, keys, args...).Result())
}

// scriptResult decodes a script's reply: an error for a status other than "ok".
func scriptResult(v any, err error) (result, error) {
	if err != nil {
		return result{}, err
	}
	vals, ok := v.([]any)
	if !ok || len(vals) == 0 {
		return result{}, fmt.Errorf("unexpected script reply %T", v)
	}
	switch str(vals[0]) {
	case "ok", "replay":
		return result{vals: vals}, nil
	case "mismatch":
		return result{}, session.ErrIdempotencyMismatch
	case "nf":
		return result{}, session.ErrNotFound
	case "stale":
		return result{}, fmt.Errorf("revision is %s: %w", value(vals[1]), session.ErrPreconditionFailed)
	case "gen":
		return result{}, errGeneration
	}
	return result{}, fmt.Errorf("unexpected script status %v", vals[0])
}

// errGeneration is a compare-and-set that found the expected revision in a
// session created after the one the caller read.
var errGeneration = fmt.Errorf("the session was closed and created again: %w", session.ErrPreconditionFailed)

// sessionFromReply reads {"ok", flag, index_score, record..., [state]}.
func sessionFromReply(tenantID, sessionID string, vals []any) (session.Session, string, error) {
	if len(vals) < 3+len(recordFields) {
		return session.Session{}, "", fmt.Errorf("short script reply (%d values)", len(vals))
	}
	return fromValues(tenantID, sessionID, vals[3:])
}

// genArg is the generation a compare-and-set expects: "-" stands for a
// session created before generations existed.
func genArg(gen string) string {
	if gen == "" {
		return "-"
	}
	return gen
}

func newGeneration() string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// refreshIndex records in the user index a score the script asked for (0:
// nothing to do). A failure here leaves the session written; the listing
// may then miss it until a later write, so the next write is made to retry.
func (s *Store) refreshIndex(ctx context.Context, tenantID, sessionID, userID string, score int64) {
	if score <= 0 {
		return
	}
	if err := indexScript.Run(ctx, s.c, []string{s.indexKey(tenantID, userID)}, score, sessionID).Err(); err != nil {
		_ = s.c.HSet(ctx, s.sessionKey(tenantID, sessionID), "ix", "0").Err()
	}
}

// Put implements session.Store.
func (s *Store) Put(ctx context.Context, p session.PutParams) (session.Session, bool, error) {
	keys := s.sessionKeys(p.TenantID, p.SessionID)
	r, err := s.run(ctx, putScript, keys, p.UserID, p.App, string(p.State), p.TTL.Milliseconds(), p.ExpectedRevision, newGeneration())
	if err != nil {
		s.cache.drop(keys[0])
		return session.Session{}, false, fmt.Errorf("put session %s: %w", p.SessionID, err)
	}
	s.refreshIndex(ctx, p.TenantID, p.SessionID, p.UserID, atoi(r.vals[2]))
	ss, gen, err := sessionFromReply(p.TenantID, p.SessionID, r.vals)
	if err != nil {
		return session.Session{}, false, fmt.Errorf("put session %s: %w", p.SessionID, err)
	}
	ss.State = p.State
	s.cache.put(keys[0], cacheEntry{user: ss.UserID, gen: gen, app: ss.App, rev: ss.Revision, state: string(p.State)})
	return ss, atoi(r.vals[1]) == 1, nil
}

// Get implements session.Store: one HMGET of the record and the state (the
// messages stay on the server). Expiry is Redis's own.
func (s *Store) Get(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	ss, _, err := s.get(ctx, s.sessionKey(tenantID, sessionID), tenantID, sessionID, userID)
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", sessionID, err)
	}
	return ss, nil
}

// get reads the session at key and returns it with its generation; it
// remembers the state for a patch that may follow.
func (s *Store) get(ctx context.Context, key, tenantID, sessionID, userID string) (session.Session, string, error) {
	vals, err := s.c.HMGet(ctx, key, getFields...).Result()
	if err != nil {
		return session.Session{}, "", err
	}
	if len(vals) != len(getFields) {
		return session.Session{}, "", fmt.Errorf("HMGET returned %d values", len(vals))
	}
	if u := value(vals[fUser]); u == "" || u != userID {
		return session.Session{}, "", session.ErrNotFound
	}
	ss, gen, err := fromValues(tenantID, sessionID, vals)
	if err != nil {
		return session.Session{}, "", err
	}
	// The key's own expiry has millisecond steps; the session's is in
	// microseconds, as the scripts compare it. A read in between is late.
	if !ss.ExpiresAt.After(time.Now()) {
		return session.Session{}, "", session.ErrNotFound
	}
	s.cache.put(key, cacheEntry{user: userID, gen: gen, app: ss.App, rev: ss.Revision, state: value(vals[fState])})
	return ss, gen, nil
}

// SetState implements session.Store.
func (s *Store) SetState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, state json.RawMessage) (session.Session, error) {
	ss, err := s.setState(ctx, s.sessionKey(tenantID, sessionID), tenantID, sessionID, userID, expectedRevision, "", state)
	if err != nil {
		return session.Session{}, fmt.Errorf("set state of session %s: %w", sessionID, err)
	}
	return ss, nil
}

// setState is the compare-and-set on revision and, unless gen is "", on
// generation.
func (s *Store) setState(ctx context.Context, key, tenantID, sessionID, userID string, expectedRevision int64, gen string, state json.RawMessage) (session.Session, error) {
	st := string(state)
	r, err := s.run(ctx, setStateScript, []string{key}, userID, expectedRevision, st, gen)
	if err != nil {
		s.cache.drop(key)
		return session.Session{}, err
	}
	s.refreshIndex(ctx, tenantID, sessionID, userID, atoi(r.vals[2]))
	ss, g, err := sessionFromReply(tenantID, sessionID, r.vals)
	if err != nil {
		return session.Session{}, err
	}
	ss.State = state
	s.cache.put(key, cacheEntry{user: userID, gen: g, app: ss.App, rev: ss.Revision, state: st})
	return ss, nil
}

// PatchState implements session.StatePatcher. With the state at
// expectedRevision in the cache it is one round trip (the compare-and-set);
// otherwise it reads first, as Get then SetState would.
func (s *Store) PatchState(ctx context.Context, tenantID, sessionID, userID string, expectedRevision int64, merge func(session.Session) (json.RawMessage, error)) (session.Session, error) {
	key := s.sessionKey(tenantID, sessionID)
	if e, ok := s.cache.get(key); ok && e.user == userID && e.rev == expectedRevision {
		state, err := merge(session.Session{TenantID: tenantID, SessionID: sessionID, UserID: userID, App: e.app,
			State: json.RawMessage(e.state), Revision: e.rev})
		if err != nil {
			return session.Session{}, err
		}
		ss, err := s.setState(ctx, key, tenantID, sessionID, userID, expectedRevision, genArg(e.gen), state)
		if !errors.Is(err, errGeneration) {
			if err != nil {
				return session.Session{}, fmt.Errorf("set state of session %s: %w", sessionID, err)
			}
			return ss, nil
		}
		// Closed and created again since the cached read: read the new one.
	}
	cur, gen, err := s.get(ctx, key, tenantID, sessionID, userID)
	if err != nil {
		return session.Session{}, fmt.Errorf("get session %s: %w", sessionID, err)
	}
	if cur.Revision != expectedRevision {
		return session.Session{}, fmt.Errorf("at revision %d (current %d): %w", expectedRevision, cur.Revision, session.ErrPreconditionFailed)
	}
	state, err := merge(cur)
	if err != nil {
		return session.Session{}, err
	}
	ss, err := s.setState(ctx, key, tenantID, sessionID, userID, expectedRevision, genArg(gen), state)
	if err != nil {
		return session.Session{}, fmt.Errorf("set state of session %s: %w", sessionID, err)
	}
	return ss, nil
}

// wireMessage is the JSON of one list element after "seq|created_us|".
type wireMessage struct {
	Role     string          `json:"r"`
	Content  string          `json:"c"`
	Metadata json.RawMessage `json:"m,omitempty"`
}

// encodeMessage writes the wireMessage JSON of m without reflection; text
// that is not valid UTF-8 (which the service never passes) and metadata
// that is not valid JSON take encoding/json's way, to be fixed or refused.
func encodeMessage(m session.MessageInput) (string, error) {
	meta := m.Metadata
	if len(meta) > 0 && string(meta) == "null" {
		meta = nil
	}
	if !utf8.ValidString(m.Role) || !utf8.ValidString(m.Content) || (len(meta) > 0 && !json.Valid(meta)) {
		b, err := json.Marshal(wireMessage{Role: m.Role, Content: m.Content, Metadata: m.Metadata})
		return string(b), err
	}
	b := make([]byte, 0, len(m.Role)+len(m.Content)+len(meta)+32)
	b = append(b, `{"r":`...)
	b = appendJSONString(b, m.Role)
	b = append(b, `,"c":`...)
	b = appendJSONString(b, m.Content)
	if len(meta) > 0 {
		b = append(b, `,"m":`...)
		b = append(b, meta...)
	}
	b = append(b, '}')
	return string(b), nil
}

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Append implements session.Store.
func (s *Store) Append(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int) (session.AppendResult, error) {
	args, err := appendArgs(userID, maxMessages, msgs, 0)
	if err != nil {
		return session.AppendResult{}, fmt.Errorf("append to session %s: encode: %w", sessionID, err)
	}
	r, err := scriptResult(s.appends.run(ctx, appendScript, s.sessionKeys(tenantID, sessionID), args...))
	if err != nil {
		return session.AppendResult{}, fmt.Errorf("append to session %s: %w", sessionID, err)
	}
	return s.appended(ctx, tenantID, sessionID, userID, msgs, r), nil
}

// AppendKeyed implements session.Store with appendKeyedScript.
func (s *Store) AppendKeyed(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, maxMessages int, k session.AppendKey) (session.AppendResult, *session.AppendReplay, error) {
	args, err := appendArgs(userID, maxMessages, msgs, 2)
	if err != nil {
		return session.AppendResult{}, nil, fmt.Errorf("append to session %s: encode: %w", sessionID, err)
	}
	args = append(args, k.Key, k.Digest)
	v, err := s.run(ctx, appendKeyedScript, s.sessionKeys(tenantID, sessionID), args...)
	if err != nil {
		return session.AppendResult{}, nil, fmt.Errorf("append to session %s: %w", sessionID, err)
	}
	if str(v.vals[0]) == "replay" {
		return session.AppendResult{}, &session.AppendReplay{FirstSeq: atoi(v.vals[1]), Count: int(atoi(v.vals[2]))}, nil
	}
	return s.appended(ctx, tenantID, sessionID, userID, msgs, v), nil, nil
}

// appendArgs is ARGV of appendScript, with room for extra more.
func appendArgs(userID string, maxMessages int, msgs []session.MessageInput, extra int) ([]any, error) {
	args := make([]any, 0, len(msgs)+2+extra)
	args = append(args, userID, maxMessages)
	for _, m := range msgs {
		b, err := encodeMessage(m)
		if err != nil {
			return nil, err
		}
		args = append(args, b)
	}
	return args, nil
}

// appended reads appendScript's reply.
func (s *Store) appended(ctx context.Context, tenantID, sessionID, userID string, msgs []session.MessageInput, r result) session.AppendResult {
	s.refreshIndex(ctx, tenantID, sessionID, userID, atoi(r.vals[6]))
	first, t0 := atoi(r.vals[3]), atoi(r.vals[4])
	res := session.AppendResult{
		Trimmed:      int(atoi(r.vals[1])),
		MessageCount: int(atoi(r.vals[2])),
		ExpiresAt:    micros(atoi(r.vals[5])),
		Messages:     make([]session.Message, len(msgs)),
	}
	for i, m := range msgs {
		res.Messages[i] = session.Message{
			Seq: first + int64(i), Role: m.Role, Content: m.Content, Metadata: m.Metadata,
			CreatedAt: micros(t0 + int64(i)),
		}
	}
	return res
}

func parseMessage(e string) (session.Message, error) {
	p1 := strings.IndexByte(e, '|')
	if p1 < 0 {
		return session.Message{}, errors.New("malformed message entry")
	}
	p2 := strings.IndexByte(e[p1+1:], '|')
	if p2 < 0 {
		return session.Message{}, errors.New("malformed message entry")
	}
	p2 += p1 + 1
	seq, err1 := strconv.ParseInt(e[:p1], 10, 64)
	at, err2 := strconv.ParseInt(e[p1+1:p2], 10, 64)
	if err1 != nil || err2 != nil {
		return session.Message{}, errors.New("malformed message entry")
	}
	var w wireMessage
	if err := json.Unmarshal([]byte(e[p2+1:]), &w); err != nil {
		return session.Message{}, fmt.Errorf("malformed message entry: %w", err)
	}
	return session.Message{Seq: seq, Role: w.Role, Content: w.Content, Metadata: w.Metadata, CreatedAt: micros(at)}, nil
}

// Messages implements session.Store.
func (s *Store) Messages(ctx context.Context, tenantID, sessionID, userID string, q session.MessageQuery) ([]session.Message, error) {
	var since int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	r, err := s.run(ctx, messagesScript, s.sessionKeys(tenantID, sessionID), userID, q.Limit, since, q.AfterSeq, q.BeforeSeq)
	if err != nil {
		return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
	}
	out := make([]session.Message, 0, len(r.vals)-1)
	for i := len(r.vals) - 1; i >= 1; i-- { // newest first from the script
		m, err := parseMessage(str(r.vals[i]))
		if err != nil {
			return nil, fmt.Errorf("list messages of session %s: %w", sessionID, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// SetSummary implements session.Store.
func (s *Store) SetSummary(ctx context.Context, tenantID, sessionID, userID string, sum session.Summary) (session.Session, error) {
	sum.UpdatedAt = time.Time{}
	b, err := json.Marshal(struct {
		Text       string          `json:"text"`
		Data       json.RawMessage `json:"data,omitempty"`
		ThroughSeq int64           `json:"through_seq"`
	}{sum.Text, sum.Data, sum.ThroughSeq})
	if err != nil {
		return session.Session{}, fmt.Errorf("set summary of session %s: encode: %w", sessionID, err)
	}
	r, err := s.run(ctx, summaryScript, s.sessionKeys(tenantID, sessionID), userID, string(b))
	if err != nil {
		return session.Session{}, fmt.Errorf("set summary of session %s: %w", sessionID, err)
	}
	s.refreshIndex(ctx, tenantID, sessionID, userID, atoi(r.vals[2]))
	ss, _, err := sessionFromReply(tenantID, sessionID, r.vals)
	if err != nil {
		return session.Session{}, fmt.Errorf("set summary of session %s: %w", sessionID, err)
	}
	return ss, nil
}

// Delete implements session.Store: the script and the index cleanup go in one
// pipeline, one round trip.
func (s *Store) Delete(ctx context.Context, tenantID, sessionID, userID string) (session.Session, error) {
	keys := s.sessionKeys(tenantID, sessionID)
	s.cache.drop(keys[0])
	for attempt := 0; ; attempt++ {
		var cmd *goredis.Cmd
		_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			cmd = deleteScript.EvalSha(ctx, p, keys, userID)
			// Removing the id from this user's index is right whatever the
			// script answers: if the session is not theirs, it never belonged there.
			p.ZRem(ctx, s.indexKey(tenantID, userID), sessionID)
			return nil
		})
		if err != nil && goredis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") && attempt == 0 {
			if err := s.loadScripts(ctx); err != nil {
				return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, err)
			}
			continue
		}
		if err := cmd.Err(); err != nil {
			return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, err)
		}
		if err != nil {
			return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, err)
		}
		vals, _ := cmd.Val().([]any)
		if len(vals) < 3 || str(vals[0]) != "ok" {
			return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, session.ErrNotFound)
		}
		ss, _, err := sessionFromReply(tenantID, sessionID, vals)
		if err != nil {
			return session.Session{}, fmt.Errorf("close session %s: %w", sessionID, err)
		}
		return ss, nil
	}
}

// ListByUser implements session.Store. The index may hold ids of sessions
// that expired, closed or were recreated by another user; each candidate is
// checked against its record and stale members are removed. A listing reads
// listFields of at most maxIndexScan candidates (those expiring soonest when
// a user has more), never a state, summary or message.
func (s *Store) ListByUser(ctx context.Context, tenantID, userID string, q session.ListQuery) ([]session.Session, error) {
	ik := s.indexKey(tenantID, userID)
	floor := time.Now().Add(-indexGrace).UnixMilli()
	ids, err := s.c.ZRangeArgs(ctx, goredis.ZRangeArgs{
		Key: ik, ByScore: true, Start: strconv.FormatInt(floor, 10), Stop: "+inf", Count: maxIndexScan,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("list sessions of user: %w", err)
	}
	cmds := make([]*goredis.SliceCmd, len(ids))
	if len(ids) > 0 {
		// On a cluster the pipeline goes to each candidate's node.
		_, err = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HMGet(ctx, s.sessionKey(tenantID, id), listFields...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list sessions of user: %w", err)
		}
	}
	var (
		out   []session.Session
		stale []any
	)
	for i, id := range ids {
		v := cmds[i].Val()
		if len(v) != len(listFields) || value(v[0]) != userID {
			stale = append(stale, id)
			continue
		}
		// v: u x a r n ls ttl c la; an expired key reads as missing.
		ss := session.Session{
			TenantID: tenantID, SessionID: id, UserID: userID, App: value(v[2]), Revision: atoi(v[3]),
			MessageCount: int(atoi(v[4])), LastSeq: atoi(v[5]), TTL: time.Duration(atoi(v[6])) * time.Millisecond,
			CreatedAt: micros(atoi(v[7])), LastActivityAt: micros(atoi(v[8])), ExpiresAt: micros(atoi(v[1])),
		}
		if q.AfterSessionID != "" {
			c := q.AfterActivity.Compare(ss.LastActivityAt)
			if c < 0 || (c == 0 && ss.SessionID <= q.AfterSessionID) {
				continue // at or before the cursor in the listing order
			}
		}
		out = append(out, ss)
	}
	// Housekeeping; a failure only leaves garbage the next listing removes.
	_, _ = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, ik, "-inf", "("+strconv.FormatInt(floor, 10))
		if len(stale) > 0 {
			p.ZRem(ctx, ik, stale...)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b session.Session) int {
		if c := b.LastActivityAt.Compare(a.LastActivityAt); c != 0 {
			return c
		}
		return strings.Compare(a.SessionID, b.SessionID)
	})
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// vaultValue is the stored JSON of one vault record.
type vaultValue struct {
	Kind    string `json:"k"`
	Sealed  []byte `json:"s"`
	Created int64  `json:"c"`
	Expires int64  `json:"x"`
}

// PutRecords implements pii.Store: one SET with native expiry per record, pipelined.
func (s *Store) PutRecords(ctx context.Context, recs []pii.Record) error {
	_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, r := range recs {
			b, err := json.Marshal(vaultValue{Kind: string(r.Kind), Sealed: r.Sealed, Created: r.CreatedAt.UnixMicro(), Expires: r.ExpiresAt.UnixMicro()})
			if err != nil {
				return err
			}
			p.SetArgs(ctx, s.vaultKey(r.TenantID, r.ID), b, goredis.SetArgs{ExpireAt: r.ExpiresAt})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put vault records: %w", err)
	}
	return nil
}

// GetRecord implements pii.Store.
func (s *Store) GetRecord(ctx context.Context, tenantID, id string) (pii.Record, error) {
	b, err := s.c.Get(ctx, s.vaultKey(tenantID, id)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return pii.Record{}, pii.ErrNotFound
	}
	if err != nil {
		return pii.Record{}, fmt.Errorf("get vault record: %w", err)
	}
	var v vaultValue
	if err := json.Unmarshal(b, &v); err != nil {
		return pii.Record{}, fmt.Errorf("get vault record: %w", err)
	}
	if v.Expires <= time.Now().UnixMicro() {
		return pii.Record{}, pii.ErrNotFound
	}
	return pii.Record{TenantID: tenantID, ID: id, Kind: pii.Kind(v.Kind), Sealed: v.Sealed,
		CreatedAt: micros(v.Created), ExpiresAt: micros(v.Expires)}, nil
}

// DeleteRecord implements pii.Store.
func (s *Store) DeleteRecord(ctx context.Context, tenantID, id string) error {
	if err := s.c.Del(ctx, s.vaultKey(tenantID, id)).Err(); err != nil {
		return fmt.Errorf("delete vault record: %w", err)
	}
	return nil
}
