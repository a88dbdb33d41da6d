package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"

	"github.com/mementohq/memento/internal/jsoncheck"
)

// Defaults and bounds, each overridable through Options.
const (
	DefaultNamespace     = "default"
	DefaultListLimit     = 100
	MaxListLimit         = 1000
	DefaultSearchK       = 10
	MaxSearchK           = 200
	DefaultMaxValueBytes = 16 << 10
	MaxTextBytes         = 8 << 10
	MaxIDBytes           = 256
	MaxQueryBytes        = 4 << 10
	// maxInsertRetries bounds retries when a concurrent write moved the
	// current claim of a key between the read and the insert.
	maxInsertRetries = 8
)

// Embedder turns texts into normalised vectors; llm's embedders implement it.
type Embedder interface {
	Model() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options configure a Service.
type Options struct {
	// Embedder, when set, embeds every claim's text and enables vector and
	// hybrid search; nil leaves full text only.
	Embedder Embedder
	// Extractor turns messages into candidates for Extract; nil refuses Extract.
	Extractor Extractor
	// CountTokens measures a profile's text; nil approximates (bytes/4).
	CountTokens func(string) int
	// TokenizerName names CountTokens in a profile's accounting.
	TokenizerName string
	MaxValueBytes int
	Now           func() time.Time
	// DefaultMode is the search mode of a query that names none ("" is
	// hybrid). The engine sets full text when its embedder is the offline
	// hashing one, whose vectors carry words, not meaning: fused with full
	// text they lowered recall (bench locomo: hybrid 0.74 against full text
	// 0.81 at 10); with a real embedder hybrid is the default.
	DefaultMode string
	// DigestKey keys the value digests claims and their tombstones keep
	// (HMAC-SHA256, with the tenant): a tombstone outlives the value it
	// blocks, and an unkeyed digest of a short value (a PIN, a birth date)
	// gives the value back to anyone who can read it and guess. Nil keeps
	// the unkeyed ValueDigest. The engine derives it from the PII key.
	DigestKey []byte
}

// Service applies the long-term memory rules (provenance, consent,
// supersession, duplicates, policy, tombstones) over a Store, and serves
// search and profiles from per-subject caches that one cheap read of the
// subject version keeps exact on every instance.
type Service struct {
	store    Store
	opts     Options
	index    *subjectCache
	profiles *profileCache
	keys     keyLocks
}

// NewService wires a Service to a Store.
func NewService(store Store, opts Options) *Service {
	if opts.MaxValueBytes <= 0 {
		opts.MaxValueBytes = DefaultMaxValueBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CountTokens == nil {
		opts.CountTokens = approxTokens
		opts.TokenizerName = "approx-bytes/4"
	}
	return &Service{store: store, opts: opts, index: newSubjectCache(store, opts.Embedder, 1024), profiles: newProfileCache(4096)}
}

// Store is the store the service writes to.
func (s *Service) Store() Store { return s.store }

func (s *Service) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }

// Outcome says what a write did with a claim.
type Outcome string

// The outcomes of an add or an extracted candidate.
const (
	OutcomeAdded      Outcome = "added"
	OutcomeSuperseded Outcome = "superseded" // added, and the former current claim is superseded
	OutcomeMerged     Outcome = "merged"     // an exact duplicate: the existing claim was refreshed
	OutcomeRefused    Outcome = "refused"    // not kept; Reason says why
	OutcomeHeld       Outcome = "held"       // kept aside until confirmed
)

// AddInput is a claim as a writer gives it: ids, digests and times are the service's.
type AddInput struct {
	SubjectID     string          `json:"subject_id"`
	Namespace     string          `json:"namespace"`
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	Text          string          `json:"text"`
	Category      string          `json:"category"`
	SchemaVersion int             `json:"schema_version"`
	Provenance    Provenance      `json:"provenance"`
	Confidence    *float64        `json:"confidence"`
	ValidFrom     *time.Time      `json:"valid_from"`
	ExpiresAt     *time.Time      `json:"expires_at"`
	TTLSeconds    int64           `json:"ttl_seconds"`
	ConsentBasis  string          `json:"consent_basis"`
	// Supersedes, when set, must name the key's current claim: a writer that
	// read a claim and corrects it says so, and a concurrent correction makes
	// this one ErrConflict instead of silently replacing the other.
	Supersedes string `json:"supersedes"`
}

// AddResult says what Add did.
type AddResult struct {
	Claim      Claim   `json:"claim"`
	Outcome    Outcome `json:"outcome"`
	Reason     string  `json:"reason,omitempty"`
	Superseded string  `json:"superseded,omitempty"`  // the claim this one superseded
	MergedInto string  `json:"merged_into,omitempty"` // the claim an exact duplicate refreshed
}

// Refusal is a claim that policy did not keep (OutcomeRefused); errors.Is
// with the sentinel in Err holds (ErrTombstoned, ErrNoConsent, ...).
type Refusal struct {
	Reason string
	Err    error
}

func (r *Refusal) Error() string { return r.Reason }
func (r *Refusal) Unwrap() error { return r.Err }

// ErrRefused is the sentinel of policy refusals that are not otherwise typed.
var ErrRefused = errors.New("refused by memory policy")

// Add writes a claim under the rules: provenance required, consent in a
// personal namespace, inferred or transient facts refused, sensitive ones
// held, an exact duplicate refreshing the current claim, a new value
// superseding it, a forgotten one blocked by its tombstone. A refusal is a
// *Refusal error and writes nothing.
func (s *Service) Add(ctx context.Context, tenantID string, in AddInput) (AddResult, error) {
	res, _, err := s.AddKeyed(ctx, tenantID, in, "")
	return res, err
}

// addKeySpace names the claim ids AddKeyed derives from idempotency keys.
var addKeySpace = uuid.MustParse("2b7e1516-28ae-5d2a-a6f7-15884d09cf4f")

// AddKeyed is Add under an idempotency key: the claim's id is derived from
// the tenant and the key, so a retry of a write that kept a claim (added,
// superseded, held) finds it and answers as the first time did, with
// replayed true, and the key sent with another claim (subject, namespace,
// key, value or provenance) is ErrIdempotencyMismatch. A retry of a write
// that kept nothing (refused) or refreshed an existing claim (merged) is
// decided again, and so answers the same.
func (s *Service) AddKeyed(ctx context.Context, tenantID string, in AddInput, idempotencyKey string) (res AddResult, replayed bool, err error) {
	if len(idempotencyKey) > MaxIDBytes {
		return AddResult{}, false, fmt.Errorf("%w: Idempotency-Key is longer than %d bytes", ErrInvalidInput, MaxIDBytes)
	}
	c, ns, err := s.prepare(ctx, tenantID, in)
	if err != nil {
		return AddResult{}, false, err
	}
	if idempotencyKey == "" {
		res, err := s.add(ctx, c, ns, in.Supersedes)
		return res, false, err
	}
	c.MemoryID = uuid.NewSHA1(addKeySpace, []byte(tenantID+"\x00"+idempotencyKey)).String()
	if res, ok, err := s.replay(ctx, c); ok || err != nil {
		return res, ok, err
	}
	res, err = s.add(ctx, c, ns, in.Supersedes)
	if err == nil && res.MergedInto == c.MemoryID {
		// A concurrent request under the same key kept it just before.
		return s.replay(ctx, c)
	}
	if err != nil {
		// A concurrent request under the same key may have kept it first:
		// with this claim that is a replay, with another a mismatch.
		prev, ok, rerr := s.replay(ctx, c)
		if ok && rerr == nil {
			return prev, true, nil
		}
		if errors.Is(rerr, ErrIdempotencyMismatch) {
			return AddResult{}, false, rerr
		}
	}
	return res, false, err
}

// replay answers a keyed add whose claim (c.MemoryID) exists already.
func (s *Service) replay(ctx context.Context, c Claim) (AddResult, bool, error) {
	prev, err := s.store.Get(ctx, c.TenantID, c.MemoryID)
	if errors.Is(err, ErrNotFound) {
		return AddResult{}, false, nil
	}
	if err != nil {
		return AddResult{}, false, fmt.Errorf("read claim %s: %w", c.MemoryID, err)
	}
	if prev.SubjectID != c.SubjectID || !sameFact(prev, c) || !sameSource(prev.Provenance, c.Provenance) {
		return AddResult{}, false, fmt.Errorf("claim %s: %w", prev.MemoryID, ErrIdempotencyMismatch)
	}
	res := AddResult{Claim: prev, Outcome: OutcomeAdded, Superseded: prev.Supersedes}
	switch {
	case prev.Status == StatusHeld:
		res.Outcome, res.Reason = OutcomeHeld, heldReason(prev)
	case prev.Supersedes != "":
		res.Outcome = OutcomeSuperseded
	}
	return res, true, nil
}

// sameSource tells whether two provenances name the same source, message
// for message.
func sameSource(a, b Provenance) bool {
	return sameOrigin(a, b) && a.SourceVersion == b.SourceVersion && slices.Equal(a.MessageIDs, b.MessageIDs)
}

// sameOrigin tells whether two provenances come from one source, run and event.
func sameOrigin(a, b Provenance) bool {
	return a.SourceType == b.SourceType && a.SourceID == b.SourceID && a.RunID == b.RunID && a.EventSeq == b.EventSeq
}

// add applies policy to a prepared claim and writes it.
func (s *Service) add(ctx context.Context, c Claim, ns Namespace, supersedes string) (AddResult, error) {
	if r := policy(c, ns); r != nil {
		if r.held {
			c.Status = StatusHeld
		} else {
			return AddResult{Outcome: OutcomeRefused, Reason: r.reason}, &Refusal{Reason: r.reason, Err: r.err}
		}
	}
	return s.write(ctx, c, supersedes)
}

// prepare validates in and builds the claim to write (status current).
func (s *Service) prepare(ctx context.Context, tenantID string, in AddInput) (Claim, Namespace, error) {
	if in.Namespace == "" {
		in.Namespace = DefaultNamespace
	}
	in.Namespace = NormalizeNamespace(in.Namespace)
	for _, f := range []struct{ name, v string }{{"subject_id", in.SubjectID}, {"namespace", in.Namespace}} {
		if err := checkPathID(f.name, f.v); err != nil {
			return Claim{}, Namespace{}, err
		}
	}
	if err := checkID("key", in.Key); err != nil {
		return Claim{}, Namespace{}, err
	}
	in.Key = NormalizeKey(in.Key)
	if in.Supersedes != "" {
		if err := checkID("supersedes", in.Supersedes); err != nil {
			return Claim{}, Namespace{}, err
		}
	}
	if len(bytes.TrimSpace(in.Value)) == 0 || !json.Valid(in.Value) {
		return Claim{}, Namespace{}, fmt.Errorf("%w: value must be JSON", ErrInvalidInput)
	}
	if len(in.Value) > s.opts.MaxValueBytes {
		return Claim{}, Namespace{}, fmt.Errorf("%w: value is %d bytes, over the limit of %d", ErrInvalidInput, len(in.Value), s.opts.MaxValueBytes)
	}
	if string(bytes.TrimSpace(in.Value)) == "null" {
		return Claim{}, Namespace{}, fmt.Errorf("%w: value must not be null: invalidate the claim instead", ErrInvalidInput)
	}
	// What the HTTP API refuses before any store (a NUL, invalid UTF-8, a
	// lone surrogate): one store would keep it, another refuse it.
	if err := jsoncheck.Check(in.Value, jsoncheck.MaxDepth); err != nil {
		return Claim{}, Namespace{}, fmt.Errorf("%w: value: %v", ErrInvalidInput, err)
	}
	if len(in.Text) > MaxTextBytes || !jsoncheck.Keepable(in.Text) {
		return Claim{}, Namespace{}, fmt.Errorf("%w: text must be UTF-8 without NUL of at most %d bytes", ErrInvalidInput, MaxTextBytes)
	}
	if len(in.Category) > 64 || len(in.ConsentBasis) > 256 {
		return Claim{}, Namespace{}, fmt.Errorf("%w: category or consent basis too long", ErrInvalidInput)
	}
	if !jsoncheck.Keepable(in.Category) || !jsoncheck.Keepable(in.ConsentBasis) {
		return Claim{}, Namespace{}, fmt.Errorf("%w: category and consent basis must be UTF-8 without NUL", ErrInvalidInput)
	}
	if err := checkProvenance(in.Provenance); err != nil {
		return Claim{}, Namespace{}, err
	}
	if in.SchemaVersion < 0 || in.SchemaVersion > 1<<30 {
		return Claim{}, Namespace{}, fmt.Errorf("%w: schema_version out of range", ErrInvalidInput)
	}
	if in.SchemaVersion == 0 {
		in.SchemaVersion = 1
	}
	conf := 1.0
	if in.Confidence != nil {
		conf = *in.Confidence
		if conf < 0 || conf > 1 || conf != conf {
			return Claim{}, Namespace{}, fmt.Errorf("%w: confidence must be within [0, 1]", ErrInvalidInput)
		}
	}
	if in.TTLSeconds < 0 || in.TTLSeconds > 100*365*24*3600 {
		return Claim{}, Namespace{}, fmt.Errorf("%w: ttl_seconds out of range", ErrInvalidInput)
	}
	if in.TTLSeconds > 0 && in.ExpiresAt != nil {
		return Claim{}, Namespace{}, fmt.Errorf("%w: give expires_at or ttl_seconds, not both", ErrInvalidInput)
	}
	now := s.now()
	ns, err := s.store.GetNamespace(ctx, tenantID, in.Namespace)
	if err != nil {
		return Claim{}, Namespace{}, fmt.Errorf("read namespace %s: %w", in.Namespace, err)
	}
	if ns.Personal && strings.TrimSpace(in.ConsentBasis) == "" {
		return Claim{}, Namespace{}, fmt.Errorf("namespace %s: %w", in.Namespace, ErrNoConsent)
	}
	// Without valid_from the claim holds from when it is written: write
	// sets it then, under the key's turn, so a claim that waited for a
	// concurrent one is not taken for an older fact arriving late.
	var validFrom time.Time
	if in.ValidFrom != nil {
		validFrom = in.ValidFrom.UTC().Truncate(time.Microsecond)
		if validFrom.After(now.Add(time.Minute)) {
			return Claim{}, Namespace{}, fmt.Errorf("%w: valid_from is in the future", ErrInvalidInput)
		}
	}
	var expires *time.Time
	switch {
	case in.ExpiresAt != nil:
		e := in.ExpiresAt.UTC().Truncate(time.Microsecond)
		if !e.After(now) {
			return Claim{}, Namespace{}, fmt.Errorf("%w: expires_at is not in the future", ErrInvalidInput)
		}
		expires = &e
	case in.TTLSeconds > 0:
		e := now.Add(time.Duration(in.TTLSeconds) * time.Second)
		expires = &e
	case ns.TTL > 0:
		e := now.Add(ns.TTL)
		expires = &e
	}
	value := compactJSON(in.Value)
	text := strings.TrimSpace(in.Text)
	if text == "" {
		text = RenderText(in.Key, value)
	}
	prov := in.Provenance
	prov.MessageIDs = append([]string(nil), prov.MessageIDs...)
	return Claim{
		MemoryID:      uuid.NewString(),
		TenantID:      tenantID,
		SubjectID:     in.SubjectID,
		Namespace:     in.Namespace,
		Key:           in.Key,
		Value:         value,
		SchemaVersion: in.SchemaVersion,
		Text:          text,
		Category:      strings.ToLower(strings.TrimSpace(in.Category)),
		Provenance:    prov,
		Confidence:    conf,
		ValidFrom:     validFrom,
		ExpiresAt:     expires,
		Status:        StatusCurrent,
		ConsentBasis:  strings.TrimSpace(in.ConsentBasis),
		ValueDigest:   s.digest(tenantID, in.Namespace, in.Key, value),
		CreatedAt:     now,
		ConfirmedAt:   now,
		Confirmations: 1,
	}, ns, nil
}

// write stores c (current or held) against the key's current claim:
// refresh an exact duplicate, supersede another value, or add.
func (s *Service) write(ctx context.Context, c Claim, supersedes string) (AddResult, error) {
	unlock, err := s.keys.lock(ctx, c.TenantID+"\x00"+c.SubjectID+"\x00"+c.Namespace+"\x00"+c.Key)
	if err != nil {
		return AddResult{}, fmt.Errorf("write claim for key %s: %w", c.Key, err)
	}
	defer unlock()
	implicitFrom := c.ValidFrom.IsZero()
	var vec *Vector
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// Another process moved the key's current claim: let it finish.
			if err := backoff(ctx, attempt); err != nil {
				return AddResult{}, fmt.Errorf("write claim for key %s: %w", c.Key, err)
			}
		}
		cur, ok, err := s.currentOf(ctx, c.TenantID, c.SubjectID, c.Namespace, c.Key)
		if err != nil {
			return AddResult{}, err
		}
		if supersedes != "" && (!ok || cur.MemoryID != supersedes) {
			return AddResult{}, fmt.Errorf("claim %s is not the current claim of key %s: %w", supersedes, c.Key, ErrConflict)
		}
		now := s.now()
		if implicitFrom {
			c.ValidFrom = now
		}
		if c.Status == StatusHeld {
			// A held claim asked again (a retry, the same message extracted
			// again) is the one already waiting, or settled by the user's no.
			if res, done, err := s.heldBefore(ctx, c, now); err != nil || done {
				return res, err
			}
		}
		if ok && c.Status == StatusCurrent && cur.Live(now) && c.ValidFrom.Before(cur.ValidFrom) && !sameFact(cur, c) {
			// A fact that arrives late but held before the current one does
			// not replace it: the current claim is the later truth, and
			// taking the older one would leave two claims in force at once
			// in valid time.
			r := fmt.Sprintf("valid_from %s is before that of the key's current claim %s (%s): a claim supersedes only an earlier one",
				c.ValidFrom.Format(time.RFC3339), cur.MemoryID, cur.ValidFrom.Format(time.RFC3339))
			return AddResult{Outcome: OutcomeRefused, Reason: r}, &Refusal{Reason: r, Err: ErrRefused}
		}
		if ok && sameFact(cur, c) && cur.Live(now) && c.Status == StatusCurrent && !outlives(c, cur) {
			if sameEvidence(c.Provenance, cur.Provenance) {
				// The same message read again (a replay) is no new confirmation.
				return AddResult{Claim: cur, Outcome: OutcomeMerged, MergedInto: cur.MemoryID}, nil
			}
			got, err := s.store.Refresh(ctx, c.TenantID, cur.MemoryID, now)
			if errors.Is(err, ErrConflict) && attempt < maxInsertRetries {
				continue
			}
			if err != nil {
				return AddResult{}, fmt.Errorf("refresh claim %s: %w", cur.MemoryID, err)
			}
			s.profiles.drop(c.TenantID, c.SubjectID)
			return AddResult{Claim: got, Outcome: OutcomeMerged, MergedInto: got.MemoryID}, nil
		}
		p := InsertParams{Claim: c}
		if strings.HasPrefix(c.ValueDigest, keyedDigestPrefix) {
			p.LegacyDigest = ValueDigest(c.Namespace, c.Key, c.Value)
		}
		if c.Status == StatusCurrent {
			if vec == nil && s.opts.Embedder != nil {
				if vec, err = s.index.embed(ctx, c); err != nil {
					return AddResult{}, err
				}
			}
			p.Vector = vec
			if ok {
				p.Supersede = cur.MemoryID
				p.SupersededAt = maxTime(cur.ValidFrom, c.ValidFrom)
				c.Supersedes = cur.MemoryID
				p.Claim.Supersedes = cur.MemoryID
			}
		}
		got, err := s.store.Insert(ctx, p)
		if errors.Is(err, ErrConflict) && attempt < maxInsertRetries && supersedes == "" {
			continue
		}
		if errors.Is(err, ErrTombstoned) {
			r := fmt.Sprintf("key %s of subject %s was forgotten with this value; its tombstone blocks it (a new value is taken)", c.Key, c.SubjectID)
			return AddResult{Outcome: OutcomeRefused, Reason: r}, &Refusal{Reason: r, Err: ErrTombstoned}
		}
		if err != nil {
			return AddResult{}, fmt.Errorf("insert claim for key %s: %w", c.Key, err)
		}
		s.profiles.drop(c.TenantID, c.SubjectID)
		res := AddResult{Claim: got, Outcome: OutcomeAdded}
		switch {
		case got.Status == StatusHeld:
			res.Outcome, res.Reason = OutcomeHeld, heldReason(got)
		case p.Supersede != "":
			res.Superseded = p.Supersede
			if cur.Live(now) {
				res.Outcome = OutcomeSuperseded
			}
		}
		return res, nil
	}
}

// currentOf is the key's current claim, expired or not (it still holds the
// key until something supersedes it).
func (s *Service) currentOf(ctx context.Context, tenantID, subjectID, namespace, key string) (Claim, bool, error) {
	cs, err := s.store.List(ctx, ListQuery{TenantID: tenantID, SubjectID: subjectID, Namespace: NormalizeNamespace(namespace), Key: NormalizeKey(key),
		Statuses: []Status{StatusCurrent}, Limit: 2})
	if err != nil {
		return Claim{}, false, fmt.Errorf("read current claim of key %s: %w", key, err)
	}
	if len(cs) == 0 {
		return Claim{}, false, nil
	}
	return cs[0], true, nil
}

// Get returns one claim in any status.
func (s *Service) Get(ctx context.Context, tenantID, memoryID string) (Claim, error) {
	if err := checkID("memory_id", memoryID); err != nil {
		return Claim{}, err
	}
	c, err := s.store.Get(ctx, tenantID, memoryID)
	if err != nil {
		return Claim{}, err // the store names the claim
	}
	s.markExpired(&c, s.now())
	return c, nil
}

// markExpired sets c.Expired for a current claim past its expiry.
func (s *Service) markExpired(c *Claim, now time.Time) {
	c.Expired = c.Status == StatusCurrent && !c.Live(now)
}

// Query selects the claims a read returns.
type Query struct {
	SubjectID string
	Namespace string
	Key       string
	// AsOf, when set, reads the claims in force at that time (valid time).
	AsOf *time.Time
	// SchemaVersion, when > 0, is the newest claim schema the reader understands.
	SchemaVersion int
	Cursor        string
	Limit         int
}

// List returns the subject's claims served now (current, unexpired), or in
// force at q.AsOf, with a cursor to the next page.
func (s *Service) List(ctx context.Context, tenantID string, q Query) ([]Claim, string, error) {
	lq, err := s.listQuery(tenantID, q)
	if err != nil {
		return nil, "", err
	}
	at := s.now()
	if q.AsOf != nil {
		at = q.AsOf.UTC()
		lq.AsOf = true
	} else {
		lq.Statuses = []Status{StatusCurrent}
	}
	lq.LiveAt = &at
	return s.page(ctx, lq)
}

// Held lists the subject's claims held for confirmation.
func (s *Service) Held(ctx context.Context, tenantID string, q Query) ([]Claim, string, error) {
	lq, err := s.listQuery(tenantID, q)
	if err != nil {
		return nil, "", err
	}
	lq.Statuses = []Status{StatusHeld}
	cs, next, err := s.page(ctx, lq)
	if err != nil {
		return nil, "", err
	}
	// One that expired while held can no longer be confirmed: not asked.
	now := s.now()
	live := cs[:0]
	for _, c := range cs {
		if c.ExpiresAt == nil || c.ExpiresAt.After(now) {
			live = append(live, c)
		}
	}
	return live, next, nil
}

// History returns every claim of the memory's key, oldest first: the
// supersession chain with each claim's provenance and status.
func (s *Service) History(ctx context.Context, tenantID, memoryID string) ([]Claim, error) {
	c, err := s.Get(ctx, tenantID, memoryID)
	if err != nil {
		return nil, err
	}
	var out []Claim
	lq := ListQuery{TenantID: tenantID, SubjectID: c.SubjectID, Namespace: c.Namespace, Key: c.Key, Limit: MaxListLimit}
	for {
		cs, err := s.store.List(ctx, lq)
		if err != nil {
			return nil, fmt.Errorf("history of memory %s: %w", memoryID, err)
		}
		now := s.now()
		for i := range cs {
			s.markExpired(&cs[i], now)
		}
		out = append(out, cs...)
		if len(cs) < lq.Limit {
			return out, nil
		}
		lq.AfterCreated, lq.AfterID = cs[len(cs)-1].CreatedAt, cs[len(cs)-1].MemoryID
	}
}

func (s *Service) listQuery(tenantID string, q Query) (ListQuery, error) {
	if err := checkID("subject_id", q.SubjectID); err != nil {
		return ListQuery{}, err
	}
	for _, f := range []struct{ name, v string }{{"namespace", q.Namespace}, {"key", q.Key}} {
		if f.v != "" {
			if err := checkID(f.name, f.v); err != nil {
				return ListQuery{}, err
			}
		}
	}
	if q.Limit < 0 || q.Limit > MaxListLimit {
		return ListQuery{}, fmt.Errorf("%w: limit must be within [1, %d]", ErrInvalidInput, MaxListLimit)
	}
	if q.Limit == 0 {
		q.Limit = DefaultListLimit
	}
	if q.SchemaVersion < 0 {
		return ListQuery{}, fmt.Errorf("%w: schema_version must not be negative", ErrInvalidInput)
	}
	lq := ListQuery{TenantID: tenantID, SubjectID: q.SubjectID, Namespace: NormalizeNamespace(q.Namespace), Key: NormalizeKey(q.Key), MaxSchemaVersion: q.SchemaVersion, Limit: q.Limit}
	if q.Cursor != "" {
		t, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return ListQuery{}, err
		}
		lq.AfterCreated, lq.AfterID = t, id
	}
	return lq, nil
}

func (s *Service) page(ctx context.Context, lq ListQuery) ([]Claim, string, error) {
	limit := lq.Limit
	lq.Limit = limit + 1
	cs, err := s.store.List(ctx, lq)
	if err != nil {
		return nil, "", fmt.Errorf("list memories of subject %s: %w", lq.SubjectID, err)
	}
	next := ""
	if len(cs) > limit {
		cs = cs[:limit]
		last := cs[limit-1]
		next = encodeCursor(last.CreatedAt, last.MemoryID)
	}
	return cs, next, nil
}

// Invalidate ends a current or held claim with a reason; it stays in the
// history and is never served again.
func (s *Service) Invalidate(ctx context.Context, tenantID, memoryID, reason string) (Claim, error) {
	if err := checkID("memory_id", memoryID); err != nil {
		return Claim{}, err
	}
	reason = strings.TrimSpace(reason)
	if reason == "" || len(reason) > 1024 || !utf8.ValidString(reason) {
		return Claim{}, fmt.Errorf("%w: an invalidation needs a reason of at most 1024 bytes", ErrInvalidInput)
	}
	c, err := s.store.Transition(ctx, TransitionParams{TenantID: tenantID, MemoryID: memoryID, From: []Status{StatusCurrent, StatusHeld}, To: StatusInvalidated, At: s.now(), Reason: reason})
	if err != nil {
		return Claim{}, transitionErr("invalidate", memoryID, err)
	}
	s.forgetCached(tenantID, c.SubjectID, c.MemoryID)
	return c, nil
}

// Confirm makes a held claim current (the user confirmed it), superseding
// the key's current claim.
func (s *Service) Confirm(ctx context.Context, tenantID, memoryID string) (AddResult, error) {
	held, err := s.Get(ctx, tenantID, memoryID)
	if err != nil {
		return AddResult{}, err
	}
	if held.Status != StatusHeld {
		return AddResult{}, fmt.Errorf("confirm memory %s: it is %s, not held: %w", memoryID, held.Status, ErrConflict)
	}
	if held.ExpiresAt != nil && !held.ExpiresAt.After(s.now()) {
		return AddResult{}, fmt.Errorf("confirm memory %s: it expired at %s while held: %w", memoryID, held.ExpiresAt.Format(time.RFC3339), ErrConflict)
	}
	ns, err := s.store.GetNamespace(ctx, tenantID, held.Namespace)
	if err != nil {
		return AddResult{}, fmt.Errorf("read namespace %s: %w", held.Namespace, err)
	}
	if ns.Personal && held.ConsentBasis == "" {
		// The namespace became personal while the claim waited.
		return AddResult{}, fmt.Errorf("confirm memory %s: namespace %s: %w", memoryID, held.Namespace, ErrNoConsent)
	}
	var vec *Vector
	if s.opts.Embedder != nil {
		if vec, err = s.index.embed(ctx, held); err != nil {
			return AddResult{}, err
		}
	}
	for attempt := 0; ; attempt++ {
		cur, ok, err := s.currentOf(ctx, tenantID, held.SubjectID, held.Namespace, held.Key)
		if err != nil {
			return AddResult{}, err
		}
		if ok && cur.CreatedAt.After(held.CreatedAt) {
			// The key moved on while this claim waited: confirming it would
			// put the older statement over the newer one.
			return AddResult{}, fmt.Errorf("confirm memory %s: a newer claim of key %s (memory %s) was made after it; add it again to make it current: %w",
				memoryID, held.Key, cur.MemoryID, ErrConflict)
		}
		now := s.now()
		if ok && cur.Live(now) && held.ValidFrom.Before(cur.ValidFrom) && !sameFact(cur, held) {
			// As in write: a fact that held before the current one does not
			// replace it, or two claims would be in force at once in valid time.
			return AddResult{}, fmt.Errorf("confirm memory %s: its valid_from %s is before that of the key's current claim %s (%s): a claim supersedes only an earlier one: %w",
				memoryID, held.ValidFrom.Format(time.RFC3339), cur.MemoryID, cur.ValidFrom.Format(time.RFC3339), ErrConflict)
		}
		p := TransitionParams{TenantID: tenantID, MemoryID: memoryID, From: []Status{StatusHeld}, To: StatusCurrent, At: now, Vector: vec}
		if ok {
			p.Supersede, p.SupersededAt = cur.MemoryID, maxTime(cur.ValidFrom, held.ValidFrom)
		}
		c, err := s.store.Transition(ctx, p)
		if errors.Is(err, ErrConflict) && attempt < maxInsertRetries {
			if again, gerr := s.store.Get(ctx, tenantID, memoryID); gerr == nil && again.Status == StatusHeld {
				continue
			}
		}
		if err != nil {
			return AddResult{}, transitionErr("confirm", memoryID, err)
		}
		s.profiles.drop(tenantID, c.SubjectID)
		res := AddResult{Claim: c, Outcome: OutcomeAdded}
		if ok {
			res.Superseded = cur.MemoryID
			if cur.Live(now) {
				res.Outcome = OutcomeSuperseded
			}
		}
		return res, nil
	}
}

// heldBefore finds the claims of c's key with c's value that are waiting
// for confirmation or were rejected: a waiting one is what c merges into
// (no second question for one fact), a rejected one refuses c (the user
// said no to it already).
func (s *Service) heldBefore(ctx context.Context, c Claim, now time.Time) (AddResult, bool, error) {
	cs, err := s.store.List(ctx, ListQuery{TenantID: c.TenantID, SubjectID: c.SubjectID, Namespace: c.Namespace, Key: c.Key,
		Statuses: []Status{StatusHeld, StatusRejected}, Limit: MaxListLimit})
	if err != nil {
		return AddResult{}, false, fmt.Errorf("list held claims of key %s: %w", c.Key, err)
	}
	for _, h := range cs {
		if !sameFact(h, c) {
			continue
		}
		if h.Status == StatusRejected {
			r := fmt.Sprintf("the same claim was rejected before (memory %s)", h.MemoryID)
			return AddResult{Outcome: OutcomeRefused, Reason: r}, true, &Refusal{Reason: r, Err: ErrConflict}
		}
		if h.ExpiresAt == nil || h.ExpiresAt.After(now) {
			return AddResult{Claim: h, Outcome: OutcomeMerged, MergedInto: h.MemoryID}, true, nil
		}
	}
	return AddResult{}, false, nil
}

// transitionErr words a failed transition once: the store's error names
// the claim and the transition too, which a caller would read twice.
func transitionErr(verb, memoryID string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, memoryID)
	}
	return fmt.Errorf("%s memory %s: %w", verb, memoryID, err)
}

// Reject ends a held claim: it is never served.
func (s *Service) Reject(ctx context.Context, tenantID, memoryID, reason string) (Claim, error) {
	if err := checkID("memory_id", memoryID); err != nil {
		return Claim{}, err
	}
	if len(reason) > 1024 || !utf8.ValidString(reason) {
		return Claim{}, fmt.Errorf("%w: reason must be UTF-8 of at most 1024 bytes", ErrInvalidInput)
	}
	c, err := s.store.Transition(ctx, TransitionParams{TenantID: tenantID, MemoryID: memoryID, From: []Status{StatusHeld}, To: StatusRejected, At: s.now(), Reason: strings.TrimSpace(reason)})
	if err != nil {
		return Claim{}, transitionErr("reject", memoryID, err)
	}
	return c, nil
}

// Forget deletes the subject's memory (one namespace, or all when ""),
// everywhere it is kept: the primary store, its full-text and vector
// projections, and this instance's caches (other instances see the subject
// version move and every hit is re-checked against the store). Tombstones
// stop the same claims from coming back; the audit record keeps no content.
func (s *Service) Forget(ctx context.Context, tenantID, subjectID, namespace, reason string) (ForgetRecord, error) {
	if err := checkID("subject_id", subjectID); err != nil {
		return ForgetRecord{}, err
	}
	if namespace != "" {
		if err := checkID("namespace", namespace); err != nil {
			return ForgetRecord{}, err
		}
	}
	if len(reason) > 1024 || !utf8.ValidString(reason) {
		return ForgetRecord{}, fmt.Errorf("%w: reason must be UTF-8 of at most 1024 bytes", ErrInvalidInput)
	}
	namespace = NormalizeNamespace(namespace)
	rec := ForgetRecord{ForgetID: uuid.NewString(), TenantID: tenantID, SubjectID: subjectID, Namespace: namespace, Reason: strings.TrimSpace(reason), CreatedAt: s.now()}
	got, err := s.store.Forget(ctx, ForgetParams{TenantID: tenantID, SubjectID: subjectID, Namespace: namespace, Record: rec})
	if err != nil {
		return ForgetRecord{}, fmt.Errorf("forget subject %s: %w", subjectID, err)
	}
	s.index.drop(tenantID, subjectID)
	s.profiles.drop(tenantID, subjectID)
	return got, nil
}

// DeclareNamespace stores a tenant's policy for a namespace.
func (s *Service) DeclareNamespace(ctx context.Context, ns Namespace) (Namespace, error) {
	if err := checkPathID("namespace", ns.Name); err != nil {
		return Namespace{}, err
	}
	ns.Name = NormalizeNamespace(ns.Name)
	if ns.TTL < 0 {
		return Namespace{}, fmt.Errorf("%w: ttl must not be negative", ErrInvalidInput)
	}
	if ns.Personal {
		// Claims written before the namespace became personal have no
		// consent basis; declaring it personal over them would keep serving
		// what the policy now forbids. They go first, by the caller's choice.
		n, err := s.store.Unconsented(ctx, ns.TenantID, ns.Name)
		if err != nil {
			return Namespace{}, fmt.Errorf("declare namespace %s: %w", ns.Name, err)
		}
		if n > 0 {
			return Namespace{}, fmt.Errorf("namespace %s holds %d current %s without a consent basis; invalidate or forget %s before declaring it personal: %w",
				ns.Name, n, plural(n, "claim", "claims"), plural(n, "it", "them"), ErrNoConsent)
		}
	}
	if err := s.store.PutNamespace(ctx, ns); err != nil {
		return Namespace{}, fmt.Errorf("declare namespace %s: %w", ns.Name, err)
	}
	return ns, nil
}

// Namespace returns a tenant's policy for a namespace (the zero policy if undeclared).
func (s *Service) Namespace(ctx context.Context, tenantID, name string) (Namespace, error) {
	if err := checkID("namespace", name); err != nil {
		return Namespace{}, err
	}
	name = NormalizeNamespace(name)
	ns, err := s.store.GetNamespace(ctx, tenantID, name)
	if err != nil {
		return Namespace{}, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return ns, nil
}

func (s *Service) forgetCached(tenantID, subjectID, memoryID string) {
	s.index.remove(tenantID, subjectID, memoryID)
	s.profiles.drop(tenantID, subjectID)
}

// NormalizeKey is a claim's key as stored and looked up: keys name facts,
// and "Home.City" is the fact "home.city" is, so a claim cannot escape the
// supersession or the tombstone of its key by spelling it in other case.
func NormalizeKey(k string) string {
	return norm.NFC.String(strings.ToLower(strings.Join(strings.Fields(k), " ")))
}

// NormalizeNamespace is how namespaces are compared and stored: one name
// whatever its case or Unicode form, so that "Personal" is the policy of
// "personal" and a fact forgotten in one is forgotten in the other.
func NormalizeNamespace(ns string) string { return norm.NFC.String(strings.ToLower(ns)) }

func checkID(name, v string) error {
	if v == "" {
		return fmt.Errorf("%w: %s is required", ErrInvalidInput, name)
	}
	if len(v) > MaxIDBytes {
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidInput, name, MaxIDBytes)
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) || strings.TrimSpace(v) != v {
		return fmt.Errorf("%w: %s must be UTF-8 without NUL or surrounding spaces", ErrInvalidInput, name)
	}
	return nil
}

// checkPathID is checkID for an id that is also a URL path segment (a
// subject to forget, a namespace to declare): one a path cannot name, as
// its empty or dot segments are resolved away, would be stored beyond the
// reach of those calls.
func checkPathID(name, v string) error {
	if err := checkID(name, v); err != nil {
		return err
	}
	for _, seg := range strings.Split(v, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %s must not be . or .., nor have an empty or dot segment between slashes", ErrInvalidInput, name)
		}
	}
	return nil
}

var sourceTypes = map[string]bool{SourceMessage: true, SourceRunEvent: true, SourceTool: true, SourceUser: true, SourceOperator: true, SourceDocument: true, SourceImport: true}

var validations = map[string]bool{ValidatedUserStated: true, ValidatedUserConfirmed: true, ValidatedToolConfirmed: true, ValidatedOperator: true, ValidatedImported: true, ValidatedModelInferred: true}

func checkProvenance(p Provenance) error {
	switch {
	case p.SourceType == "" && p.SourceID == "" && p.ValidatedBy == "":
		return ErrNoProvenance
	case !sourceTypes[p.SourceType]:
		return fmt.Errorf("%w: provenance.source_type must be one of message, run_event, tool, user, operator, document, import", ErrNoProvenance)
	case p.SourceID == "":
		return fmt.Errorf("%w: provenance.source_id is required", ErrNoProvenance)
	case !validations[p.ValidatedBy]:
		return fmt.Errorf("%w: provenance.validated_by must be one of user_stated, user_confirmed, tool_confirmed, operator, imported, model_inferred", ErrNoProvenance)
	case p.EventSeq < 0:
		return fmt.Errorf("%w: provenance.event_seq must not be negative", ErrInvalidInput)
	case len(p.MessageIDs) > 1000:
		return fmt.Errorf("%w: provenance.message_ids has more than 1000 ids", ErrInvalidInput)
	}
	for _, f := range []struct{ name, v string }{{"source_id", p.SourceID}, {"source_version", p.SourceVersion}, {"run_id", p.RunID}, {"extractor", p.Extractor}} {
		if f.v != "" {
			if err := checkID("provenance."+f.name, f.v); err != nil {
				return err
			}
		}
	}
	for _, id := range p.MessageIDs {
		if err := checkID("provenance.message_ids", id); err != nil {
			return err
		}
	}
	return nil
}

func compactJSON(v json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return append(json.RawMessage(nil), v...)
	}
	return b.Bytes()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func approxTokens(s string) int { return (len(s) + 3) / 4 }

// outlives tells whether c would be kept longer than cur, which expires: a
// fact stated again without an end (or a later one) must not merge into a
// claim about to expire, or the fact would expire with it; it supersedes it.
func outlives(c, cur Claim) bool {
	return cur.ExpiresAt != nil && (c.ExpiresAt == nil || c.ExpiresAt.After(*cur.ExpiresAt))
}

// sameEvidence tells whether a restatement cites nothing the claim cites
// not (the same messages of the same source): a replay of its evidence.
func sameEvidence(a, b Provenance) bool {
	if !sameOrigin(a, b) || len(a.MessageIDs) == 0 {
		return false
	}
	for _, m := range a.MessageIDs {
		if !slices.Contains(b.MessageIDs, m) {
			return false
		}
	}
	return true
}

// backoff waits a random time that grows with the attempt (at most 5 ms
// times the attempt), or until ctx ends.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(attempt) * int64(5*time.Millisecond))))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
