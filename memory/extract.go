package memory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Extraction bounds.
const (
	MaxExtractMessages     = 200
	MaxExtractMessageBytes = 16 << 10
)

// Outcomes only extraction gives.
const (
	// OutcomeFailed is a candidate the store could not write; nothing of it was kept.
	OutcomeFailed Outcome = "failed"
	// OutcomeInvalidated is a retraction ("I don't live in Paris anymore"):
	// the current claim was invalidated, nothing was added.
	OutcomeInvalidated Outcome = "invalidated"
)

// ExtractInput is one Extract call.
type ExtractInput struct {
	SubjectID string
	Namespace string
	Messages  []Message
	// Apply writes the candidates; false only reports what would happen.
	Apply bool
	// SourceType and SourceID name where the messages come from (a session
	// id, say); the default is the messages themselves.
	SourceType    string
	SourceID      string
	SourceVersion string
	RunID         string
	ConsentBasis  string
	TTLSeconds    int64
}

// ExtractItem is what happened to one candidate.
type ExtractItem struct {
	Candidate  Candidate `json:"candidate"`
	Outcome    Outcome   `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	MemoryID   string    `json:"memory_id,omitempty"`
	Superseded string    `json:"superseded,omitempty"`
	MergedInto string    `json:"merged_into,omitempty"`
	// Contradicted lists claims of other keys this one made false, now invalidated.
	Contradicted []string `json:"contradicted,omitempty"`
}

// ExtractResult reports every candidate and every message that gave none.
type ExtractResult struct {
	Items     []ExtractItem    `json:"items"`
	Skipped   []SkippedMessage `json:"skipped"`
	Usage     Usage            `json:"usage"`
	Extractor string           `json:"extractor"`
	Applied   bool             `json:"applied"`
}

// Extract turns messages into candidate claims with the configured
// extractor and passes each through the same rules as Add. Every candidate
// gets an outcome and every message without a candidate is listed with the
// reason: nothing is dropped silently.
func (s *Service) Extract(ctx context.Context, tenantID string, in ExtractInput) (ExtractResult, error) {
	if s.opts.Extractor == nil {
		return ExtractResult{}, ErrNoExtractor
	}
	if err := checkPathID("subject_id", in.SubjectID); err != nil {
		return ExtractResult{}, err
	}
	if in.Namespace == "" {
		in.Namespace = DefaultNamespace
	}
	if err := checkPathID("namespace", in.Namespace); err != nil {
		return ExtractResult{}, err
	}
	in.Namespace = NormalizeNamespace(in.Namespace)
	if len(in.Messages) == 0 || len(in.Messages) > MaxExtractMessages {
		return ExtractResult{}, fmt.Errorf("%w: give 1 to %d messages", ErrInvalidInput, MaxExtractMessages)
	}
	roles := map[string]string{}
	msgs := make([]Message, len(in.Messages))
	for i, m := range in.Messages {
		if len(m.Content) > MaxExtractMessageBytes || !utf8.ValidString(m.Content) || strings.ContainsRune(m.Content, 0) {
			return ExtractResult{}, fmt.Errorf("%w: message %d must be UTF-8 without NUL, at most %d bytes", ErrInvalidInput, i, MaxExtractMessageBytes)
		}
		if !extractRoles[m.Role] {
			// "USER" or "human" would be taken for a role no rule trusts, and
			// every fact of the message refused or skipped without a word.
			return ExtractResult{}, fmt.Errorf("%w: message %d: role must be user, assistant, system or tool", ErrInvalidInput, i)
		}
		if m.ID == "" {
			sum := sha256.Sum256([]byte(m.Role + "\x00" + m.Content))
			m.ID = fmt.Sprintf("msg-%d-%s", i, hex.EncodeToString(sum[:6]))
		}
		if err := checkID("message id", m.ID); err != nil {
			return ExtractResult{}, err
		}
		if _, dup := roles[m.ID]; dup {
			return ExtractResult{}, fmt.Errorf("%w: message id %s appears twice", ErrInvalidInput, m.ID)
		}
		roles[m.ID] = m.Role
		msgs[i] = m
	}
	// What every candidate would be refused for is the request's fault, not
	// theirs: refuse the request.
	if in.SourceType != "" && !sourceTypes[in.SourceType] {
		return ExtractResult{}, fmt.Errorf("%w: source_type must be one of message, run_event, tool, user, operator, document, import", ErrInvalidInput)
	}
	for _, f := range []struct{ name, v string }{{"source_id", in.SourceID}, {"source_version", in.SourceVersion}, {"run_id", in.RunID}} {
		if f.v != "" {
			if err := checkID(f.name, f.v); err != nil {
				return ExtractResult{}, err
			}
		}
	}
	if len(in.ConsentBasis) > 256 || !utf8.ValidString(in.ConsentBasis) || strings.ContainsRune(in.ConsentBasis, 0) {
		return ExtractResult{}, fmt.Errorf("%w: consent_basis must be UTF-8 without NUL, at most 256 bytes", ErrInvalidInput)
	}
	if in.TTLSeconds < 0 || in.TTLSeconds > 100*365*24*3600 {
		return ExtractResult{}, fmt.Errorf("%w: ttl_seconds out of range", ErrInvalidInput)
	}
	ex, err := s.opts.Extractor.Extract(ctx, msgs)
	if err != nil {
		return ExtractResult{}, fmt.Errorf("extract candidates: %w", err)
	}
	// A candidate names namespaces and keys as the model spelled them; the
	// retractions and contradictions below look them up as stored.
	for i := range ex.Candidates {
		c := &ex.Candidates[i]
		if c.Namespace != "" {
			c.Namespace = NormalizeNamespace(c.Namespace)
		}
		c.Key = NormalizeKey(c.Key)
		for j, k := range c.Contradicts {
			c.Contradicts[j] = NormalizeKey(k)
		}
	}
	res := ExtractResult{Items: []ExtractItem{}, Skipped: ex.Skipped, Usage: ex.Usage, Extractor: s.opts.Extractor.Name(), Applied: in.Apply}
	if res.Skipped == nil {
		res.Skipped = []SkippedMessage{}
	}
	sourceType, sourceID := in.SourceType, in.SourceID
	if sourceType == "" {
		sourceType = SourceMessage
	}
	for _, rc := range ex.Rejected {
		res.Items = append(res.Items, ExtractItem{Candidate: rc.Candidate, Outcome: OutcomeRefused, Reason: rc.Reason})
	}
	var tombs map[string]bool
	failed, written := 0, 0
	later := laterInBatch(ex.Candidates, in.Namespace)
	for i, c := range ex.Candidates {
		item := ExtractItem{Candidate: c}
		if r := later[i]; r != "" {
			// Only the last word of these messages on a key is kept: the
			// earlier ones would only pile up as history, and again on
			// every re-extraction of the same messages.
			if item.Candidate.Namespace == "" {
				item.Candidate.Namespace = in.Namespace
			}
			item.Outcome, item.Reason = OutcomeRefused, r
			res.Items = append(res.Items, item)
			continue
		}
		if c.Namespace == "" {
			item.Candidate.Namespace = in.Namespace
		}
		if r := candidateProblem(c, roles); r != "" {
			item.Outcome, item.Reason = OutcomeRefused, r
			res.Items = append(res.Items, item)
			continue
		}
		if isNull(c.Value) {
			s.retract(ctx, tenantID, in.SubjectID, item.Candidate, in.Apply, &item)
			if item.Outcome == OutcomeInvalidated && in.Apply {
				written++
			}
			res.Items = append(res.Items, item)
			continue
		}
		sid := sourceID
		if sid == "" {
			sid = c.MessageIDs[0]
		}
		conf := c.Confidence
		if conf <= 0 || conf > 1 {
			conf = 1
		}
		add := AddInput{
			SubjectID: in.SubjectID, Namespace: item.Candidate.Namespace, Key: c.Key, Value: c.Value, Text: c.Text, Category: c.Category,
			Provenance: Provenance{SourceType: sourceType, SourceID: sid, SourceVersion: in.SourceVersion, RunID: in.RunID,
				MessageIDs: c.MessageIDs, ValidatedBy: c.ValidatedBy, Extractor: s.opts.Extractor.Name()},
			Confidence: &conf, ConsentBasis: in.ConsentBasis, TTLSeconds: in.TTLSeconds, ValidFrom: c.ValidFrom,
		}
		if !in.Apply {
			if tombs == nil {
				if tombs, err = s.tombstoneSet(ctx, tenantID, in.SubjectID); err != nil {
					return ExtractResult{}, err
				}
			}
			s.predict(ctx, tenantID, add, tombs, &item)
			res.Items = append(res.Items, item)
			continue
		}
		r, err := s.Add(ctx, tenantID, add)
		var ref *Refusal
		switch {
		case errors.As(err, &ref):
			item.Outcome, item.Reason = OutcomeRefused, ref.Reason
		case errors.Is(err, ErrNoProvenance), errors.Is(err, ErrNoConsent), errors.Is(err, ErrInvalidInput), errors.Is(err, ErrConflict):
			item.Outcome, item.Reason = OutcomeRefused, err.Error()
		case err != nil:
			if ctx.Err() != nil {
				return res, fmt.Errorf("extract: %w", ctx.Err())
			}
			failed++
			item.Outcome, item.Reason = OutcomeFailed, "the store did not take this candidate; nothing of it was written: retry"
		default:
			written++
			item.Outcome, item.Reason = r.Outcome, r.Reason
			item.MemoryID, item.Superseded, item.MergedInto = r.Claim.MemoryID, r.Superseded, r.MergedInto
			if r.Outcome != OutcomeHeld {
				item.Contradicted = s.contradict(ctx, tenantID, in.SubjectID, item.Candidate, r.Claim.MemoryID)
			}
		}
		res.Items = append(res.Items, item)
	}
	if failed > 0 && written == 0 {
		return ExtractResult{}, fmt.Errorf("extract: the store took none of %d candidates: %w", failed, errStoreUnavailable)
	}
	return res, nil
}

// laterInBatch marks, by index, the candidates a later candidate of the
// same extraction overrides: another value of the same key, or a key the
// later one contradicts ("I like jazz. I do not like jazz."). Candidates
// come in the order of the messages.
func laterInBatch(cs []Candidate, namespace string) map[int]string {
	out := map[int]string{}
	last := map[string]int{}
	nsOf := func(c Candidate) string { return cmp.Or(c.Namespace, namespace) }
	for i, c := range cs {
		last[nsOf(c)+"\x00"+NormalizeKey(c.Key)] = i
	}
	for i, c := range cs {
		k := nsOf(c) + "\x00" + NormalizeKey(c.Key)
		if j := last[k]; j > i {
			out[i] = fmt.Sprintf("a later statement in the same messages gives key %s another value", c.Key)
			continue
		}
		for j := i + 1; j < len(cs); j++ {
			if nsOf(cs[j]) == nsOf(c) && slices.ContainsFunc(cs[j].Contradicts, func(x string) bool { return NormalizeKey(x) == NormalizeKey(c.Key) }) {
				out[i] = fmt.Sprintf("a later statement in the same messages contradicts it (key %s)", cs[j].Key)
				break
			}
		}
	}
	return out
}

// extractRoles are the chat roles a message to extract from may have.
var extractRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true}

// errStoreUnavailable is an extraction the store refused whole.
var errStoreUnavailable = errors.New("memory store unavailable")

// candidateProblem is why a candidate cannot be a claim at all, or "".
func candidateProblem(c Candidate, roles map[string]string) string {
	if c.Key == "" || len(c.Value) == 0 {
		return "the extractor gave no key or value"
	}
	if len(c.MessageIDs) == 0 {
		return "the extractor named no source message"
	}
	userSaid := false
	for _, id := range c.MessageIDs {
		role, ok := roles[id]
		if !ok {
			return fmt.Sprintf("the extractor named message %s, which is not in the input", id)
		}
		if role == "user" {
			userSaid = true
		}
	}
	if c.Kind == "inference" && c.ValidatedBy != ValidatedModelInferred && !TransientCategory(c.Category) {
		return "an inference is not a statement: not kept long term"
	}
	if c.ValidatedBy == ValidatedUserStated && !userSaid {
		return "no user message says this: only what the user stated is kept"
	}
	return ""
}

// predict fills what Add would do, without writing.
func (s *Service) predict(ctx context.Context, tenantID string, in AddInput, tombs map[string]bool, item *ExtractItem) {
	c, ns, err := s.prepare(ctx, tenantID, in)
	if err != nil {
		item.Outcome, item.Reason = OutcomeRefused, err.Error()
		return
	}
	if v := policy(c, ns); v != nil {
		if v.held {
			item.Outcome, item.Reason = OutcomeHeld, heldReason(c)
		} else {
			item.Outcome, item.Reason = OutcomeRefused, v.reason
		}
		return
	}
	if tombs[c.ValueDigest] || tombs[ValueDigest(c.Namespace, c.Key, c.Value)] {
		item.Outcome, item.Reason = OutcomeRefused, fmt.Sprintf("key %s of subject %s was forgotten with this value; its tombstone blocks it (a new value is taken)", c.Key, c.SubjectID)
		return
	}
	cur, ok, err := s.currentOf(ctx, tenantID, c.SubjectID, c.Namespace, c.Key)
	switch {
	case err != nil:
		item.Outcome, item.Reason = OutcomeFailed, "the store did not answer"
	case ok && sameFact(cur, c) && cur.Live(s.now()):
		item.Outcome, item.MergedInto = OutcomeMerged, cur.MemoryID
	case ok:
		item.Outcome, item.Superseded = OutcomeSuperseded, cur.MemoryID
	default:
		item.Outcome = OutcomeAdded
	}
}

func (s *Service) tombstoneSet(ctx context.Context, tenantID, subjectID string) (map[string]bool, error) {
	ts, err := s.store.Tombstones(ctx, tenantID, subjectID)
	if err != nil {
		return nil, fmt.Errorf("read tombstones of subject %s: %w", subjectID, err)
	}
	m := make(map[string]bool, len(ts))
	for _, t := range ts {
		m[t.ValueDigest] = true
	}
	return m, nil
}

func isNull(v []byte) bool { return strings.TrimSpace(string(v)) == "null" }

// retract invalidates the key's current claim for a candidate with a null
// value, when the value it retracts (if named) is the current one.
func (s *Service) retract(ctx context.Context, tenantID, subjectID string, c Candidate, apply bool, item *ExtractItem) {
	cur, ok, err := s.currentOf(ctx, tenantID, subjectID, c.Namespace, c.Key)
	switch {
	case err != nil:
		item.Outcome, item.Reason = OutcomeFailed, "the store did not answer"
		return
	case !ok || !cur.Live(s.now()):
		// A claim of the key still held for confirmation is withdrawn by the
		// user's retraction: it must not be confirmed later.
		if held := s.heldToRetract(ctx, tenantID, subjectID, c); len(held) > 0 {
			item.MemoryID = held[0].MemoryID
			if apply {
				for _, h := range held {
					if _, err := s.Reject(ctx, tenantID, h.MemoryID, "retracted by the user in message "+strings.Join(c.MessageIDs, ", ")); err != nil && !errors.Is(err, ErrConflict) {
						item.Outcome, item.Reason = OutcomeFailed, "the store did not take the retraction: retry"
						return
					}
				}
			}
			item.Outcome, item.Reason = OutcomeInvalidated, "withdraws the claim held for confirmation"
			return
		}
		item.Outcome, item.Reason = OutcomeRefused, "a retraction of a key that holds no current claim"
		return
	case len(c.Retracts) > 0 && !isNull(c.Retracts) && !sameValue(c.Retracts, cur.Value):
		item.Outcome, item.Reason = OutcomeRefused, "the retracted value is not the current one"
		return
	}
	item.MemoryID = cur.MemoryID
	if !apply {
		item.Outcome = OutcomeInvalidated
		return
	}
	if _, err := s.Invalidate(ctx, tenantID, cur.MemoryID, "retracted by the user in message "+strings.Join(c.MessageIDs, ", ")); err != nil {
		item.Outcome, item.Reason = OutcomeFailed, "the store did not take the retraction: retry"
		return
	}
	item.Outcome = OutcomeInvalidated
}

// heldToRetract lists the key's claims held for confirmation that a
// retraction withdraws: all of them, or those of the value it names.
func (s *Service) heldToRetract(ctx context.Context, tenantID, subjectID string, c Candidate) []Claim {
	cs, err := s.store.List(ctx, ListQuery{TenantID: tenantID, SubjectID: subjectID, Namespace: c.Namespace, Key: NormalizeKey(c.Key), Statuses: []Status{StatusHeld}, Limit: MaxListLimit})
	if err != nil {
		return nil
	}
	var out []Claim
	for _, h := range cs {
		if len(c.Retracts) == 0 || isNull(c.Retracts) || sameValue(c.Retracts, h.Value) {
			out = append(out, h)
		}
	}
	return out
}

// contradict invalidates the current claims of the keys a new claim makes
// false, and returns their ids.
func (s *Service) contradict(ctx context.Context, tenantID, subjectID string, c Candidate, by string) []string {
	var out []string
	for _, k := range c.Contradicts {
		if k == c.Key || checkID("key", k) != nil {
			continue
		}
		cur, ok, err := s.currentOf(ctx, tenantID, subjectID, c.Namespace, k)
		if err != nil || !ok || !cur.Live(s.now()) {
			continue
		}
		if _, err := s.Invalidate(ctx, tenantID, cur.MemoryID, "contradicted by claim "+by); err == nil {
			out = append(out, cur.MemoryID)
		}
	}
	return out
}
