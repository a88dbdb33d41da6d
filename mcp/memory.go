package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/search"
	"github.com/mementohq/memento/session"
)

// MaxEvidence bounds how many messages one memory_add may cite.
const MaxEvidence = 20

type searchIn struct {
	Query     string `json:"query" jsonschema:"what to look for, in words"`
	Namespace string `json:"namespace,omitempty" jsonschema:"only this namespace (for example giftgenius.recipients)"`
	K         int    `json:"k,omitempty" jsonschema:"how many hits (default 5, at most 50)"`
}

type getIn struct {
	Namespace string `json:"namespace,omitempty" jsonschema:"only this namespace"`
	Key       string `json:"key,omitempty" jsonschema:"only this key (needs namespace)"`
}

type addIn struct {
	Namespace   string  `json:"namespace" jsonschema:"where the fact belongs, for example preferences or giftgenius.recipients"`
	Key         string  `json:"key" jsonschema:"what the fact is about, one per fact: a new value for the same key replaces the old one and keeps it in history"`
	Value       any     `json:"value" jsonschema:"the fact as JSON: a string, number or object"`
	Text        string  `json:"text,omitempty" jsonschema:"the fact in one sentence, for search (rendered from key and value when empty)"`
	Category    string  `json:"category,omitempty" jsonschema:"preference, place, relation, ...; sensitive categories (health, ...) are held until the user confirms"`
	SessionID   string  `json:"session_id" jsonschema:"the session whose messages are the evidence"`
	MessageSeqs []int64 `json:"message_seqs" jsonschema:"seqs of the messages where the user said it (from message_append or messages_list); at least one must be the user's"`
	TTLSeconds  int64   `json:"ttl_seconds,omitempty" jsonschema:"forget the fact after this long; 0 keeps it until corrected"`
	Supersedes  string  `json:"supersedes,omitempty" jsonschema:"the memory_id this corrects, when you read it first: a concurrent correction then fails instead of being lost"`
}

type forgetIn struct {
	Namespace string `json:"namespace,omitempty" jsonschema:"forget only this namespace; empty forgets everything kept about the user"`
	Reason    string `json:"reason" jsonschema:"why, in the user's words (kept in the audit record, without the content)"`
}

// claimOut is a claim as a model sees it: the fact and where it came from.
type claimOut struct {
	MemoryID   string            `json:"memory_id"`
	Namespace  string            `json:"namespace"`
	Key        string            `json:"key"`
	Value      json.RawMessage   `json:"value"`
	Text       string            `json:"text"`
	Category   string            `json:"category,omitempty"`
	Status     memory.Status     `json:"status"`
	Provenance memory.Provenance `json:"provenance"`
	ValidFrom  time.Time         `json:"valid_from"`
	ExpiresAt  *time.Time        `json:"expires_at,omitempty"`
	Supersedes string            `json:"supersedes,omitempty"`
	Score      *float64          `json:"score,omitempty"`
}

func claimView(c memory.Claim) claimOut {
	return claimOut{MemoryID: c.MemoryID, Namespace: c.Namespace, Key: c.Key, Value: c.Value, Text: c.Text, Category: c.Category,
		Status: c.Status, Provenance: c.Provenance, ValidFrom: c.ValidFrom, ExpiresAt: c.ExpiresAt, Supersedes: c.Supersedes}
}

func (t *toolset) memoryTools(srv *gomcp.Server) {
	svc := t.s.svc.Memory
	add(t, srv, &gomcp.Tool{Name: "memory_search", Title: "Search long-term memory",
		Description: "Search what is known about this user long term (confirmed facts, each with its source). Search before asking the user something they may have said before.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, c call, in searchIn) (any, error) {
			switch {
			case in.K < 0 || in.K > 50:
				return nil, invalid("k must be between 1 and 50")
			case in.K == 0:
				in.K = 5
			}
			res, err := svc.Search(ctx, c.Tenant, memory.SearchQuery{Query: in.Query, SubjectID: c.User, Namespace: in.Namespace, K: in.K})
			if err != nil {
				return nil, err
			}
			hits := make([]claimOut, len(res.Items))
			for i, h := range res.Items {
				hits[i] = claimView(h.Claim)
				hits[i].Score = ptr(h.Score)
			}
			return map[string]any{"hits": hits, "mode": res.Mode}, nil
		})
	add(t, srv, &gomcp.Tool{Name: "memory_get", Title: "Read current memories",
		Description: "The current facts kept about this user, optionally of one namespace or one key: superseded, expired and invalidated facts are never returned.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, c call, in getIn) (any, error) {
			if in.Key != "" && in.Namespace == "" {
				return nil, invalid("key needs a namespace")
			}
			cs, next, err := svc.List(ctx, c.Tenant, memory.Query{SubjectID: c.User, Namespace: in.Namespace, Key: in.Key, Limit: 100})
			if err != nil {
				return nil, err
			}
			out := make([]claimOut, len(cs))
			for i, cl := range cs {
				out[i] = claimView(cl)
			}
			return map[string]any{"memories": out, "truncated": next != ""}, nil
		})
	add(t, srv, &gomcp.Tool{Name: "memory_add", Title: "Keep a fact long term",
		Description: "Keep one fact the user stated, citing the messages where they said it (session_id and message_seqs; at least one must be the user's own message). A new value for the same namespace and key supersedes the old one. Guesses are not kept: only what the user said, so every word and number of the value must be in the cited messages (or in the value it supersedes), a code of up to three letters may stand for the user's words (\"de\" with text \"answers in German\"), and neither value, text, key nor a member name may add a negation or a dislike (\"hates\") the user did not say.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(false)}},
		func(ctx context.Context, c call, in addIn) (any, error) {
			prov, said, err := t.evidence(ctx, c, in.SessionID, in.MessageSeqs)
			if err != nil {
				return nil, err
			}
			if in.Value == nil {
				return nil, invalid("value is required")
			}
			val, err := json.Marshal(in.Value)
			if err != nil {
				return nil, invalid("value: %v", err)
			}
			if in.Supersedes != "" {
				// A correction carries over what the value it replaces held
				// (grounded when it was kept): the new value is checked
				// against the cited messages and the old value.
				if old, err := svc.Get(ctx, c.Tenant, in.Supersedes); err == nil && old.SubjectID == c.User {
					said += "\n" + string(old.Value)
				}
			}
			if !grounded(in.Key, val, in.Text, said) {
				return nil, invalid("the value, text or key says what the user did not say in the cited messages (a word, number, negation or dislike of its own): cite the message where they said it (a fact inferred from what they said is not kept)")
			}
			if in.TTLSeconds < 0 {
				return nil, invalid("ttl_seconds must not be negative")
			}
			res, err := svc.Add(ctx, c.Tenant, memory.AddInput{SubjectID: c.User, Namespace: in.Namespace, Key: in.Key, Value: val,
				Text: in.Text, Category: in.Category, Provenance: prov, TTLSeconds: in.TTLSeconds, Supersedes: in.Supersedes})
			if err != nil {
				return nil, err
			}
			out := map[string]any{"outcome": res.Outcome, "memory": claimView(res.Claim)}
			if res.Reason != "" {
				out["reason"] = res.Reason
			}
			if res.Superseded != "" {
				out["superseded"] = res.Superseded
			}
			return out, nil
		})
	add(t, srv, &gomcp.Tool{Name: "memory_forget", Title: "Forget what is kept about the user",
		Description: "Forget the long-term facts kept about this user (or one namespace): the facts, their search index, vectors and caches, leaving tombstones so that they are not kept again. Use it when the user asks to be forgotten; delete their conversations with session_delete too. It cannot be undone.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}},
		func(ctx context.Context, c call, in forgetIn) (any, error) {
			if in.Reason == "" {
				return nil, invalid("reason is required")
			}
			rec, err := svc.Forget(ctx, c.Tenant, c.User, in.Namespace, in.Reason)
			if err != nil {
				return nil, err
			}
			return map[string]any{"forget_id": rec.ForgetID, "namespace": rec.Namespace, "forgotten": rec.Claims, "tombstones": rec.Tombstones}, nil
		})
}

// evidence checks that the cited messages exist in the user's session and
// that one of them is the user's: the claim is then user_stated, with the
// messages as its provenance. A model cannot cite what was not said.
func (t *toolset) evidence(ctx context.Context, c call, sessionID string, seqs []int64) (memory.Provenance, string, error) {
	if t.s.svc.Sessions == nil {
		return memory.Provenance{}, "", errors.New("memory_add needs session memory on this server")
	}
	if len(seqs) == 0 {
		return memory.Provenance{}, "", invalid("message_seqs must cite at least one message")
	}
	if len(seqs) > MaxEvidence {
		return memory.Provenance{}, "", invalid("message_seqs cites %d messages; at most %d", len(seqs), MaxEvidence)
	}
	want := slices.Clone(seqs)
	slices.Sort(want)
	want = slices.Compact(want)
	if want[0] < 1 {
		return memory.Provenance{}, "", invalid("message_seqs must be positive")
	}
	lo, hi := want[0], want[len(want)-1]
	if hi > 1<<53 {
		return memory.Provenance{}, "", invalid("message %d is not in session %s", hi, sessionID)
	}
	if hi-lo >= 500 {
		return memory.Provenance{}, "", invalid("message_seqs spans %d messages; cite messages within 500 of each other", hi-lo+1)
	}
	ms, err := t.s.svc.Sessions.Messages(ctx, c.Tenant, sessionID, c.User, session.MessageQuery{AfterSeq: lo - 1, BeforeSeq: hi + 1, Limit: int(hi - lo + 1)})
	if err != nil {
		return memory.Provenance{}, "", err
	}
	role := make(map[int64]string, len(ms))
	for _, m := range ms {
		role[m.Seq] = m.Role
	}
	ids := make([]string, len(want))
	byUser := false
	for i, s := range want {
		r, ok := role[s]
		if !ok {
			return memory.Provenance{}, "", invalid("message %d is not in session %s", s, sessionID)
		}
		byUser = byUser || r == "user"
		ids[i] = strconv.FormatInt(s, 10)
	}
	if !byUser {
		return memory.Provenance{}, "", invalid("none of the cited messages is the user's: only what the user said is kept long term")
	}
	var said strings.Builder
	for _, m := range ms {
		if m.Role == "user" && slices.Contains(want, m.Seq) {
			said.WriteString(m.Content)
			said.WriteByte('\n')
		}
	}
	return memory.Provenance{SourceType: memory.SourceMessage, SourceID: "session:" + sessionID, MessageIDs: ids,
		ValidatedBy: memory.ValidatedUserStated}, said.String(), nil
}

// grounded tells whether a claim is in what the user said in its cited
// messages. It is a floor, not a proof, against a claim the user did not
// make ("convicted of fraud" citing "hi", "5000 EUR" citing "I like jazz",
// "hates jazz" or "does not like jazz" citing "I like jazz"):
//   - every number of the value and text is one the user said;
//   - a negation ("not", "never", "n't", ...) or a dislike ("hates",
//     "dislikes") in the value, its member names, the text or the key is
//     one the user said too;
//   - every word of the value is the user's (stemmed) or a code of at most
//     three letters, a normal form ("de" for German, "EUR" for euros), and
//     the value or its text ("answers in German") shares a word with them;
//   - a value without words (true) needs a word of its text or key there.
//
// The text is the writer's own paraphrase: it must not add a number or a
// negation, but need not be in the user's words.
func grounded(key string, value json.RawMessage, text, said string) bool {
	heard := map[string]bool{}
	for _, t := range search.Analyze(said) {
		heard[t] = true
	}
	var leaves []string
	var names []string // member names: a meaning ({"hates":"jazz"}), not the user's words
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			leaves = append(leaves, x)
		case json.Number:
			leaves = append(leaves, x.String())
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				names = append(names, k)
				walk(e)
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	var v any
	if d.Decode(&v) == nil {
		walk(v)
	}
	valueText := strings.Join(leaves, " ")
	valueTerms, textTerms := search.Analyze(valueText), search.Analyze(text)
	shared := false
	for _, t := range append(append([]string(nil), valueTerms...), textTerms...) {
		if isNumber(t) && !heard[t] {
			return false
		}
		shared = shared || heard[t]
	}
	keyWords := strings.NewReplacer(".", " ", "_", " ", "-", " ", "/", " ", ":", " ").Replace(key)
	for _, t := range []string{valueText, text, keyWords, strings.Join(names, " ")} {
		if (negates(t) && !negates(said)) || (averse(t) && !averse(said)) {
			return false
		}
	}
	for _, t := range valueTerms {
		if !heard[t] && utf8.RuneCountInString(t) > 3 {
			return false
		}
	}
	if shared {
		return true
	}
	if len(valueTerms) == 0 && len(textTerms) == 0 {
		for _, t := range search.Analyze(keyWords) {
			if heard[t] {
				return true
			}
		}
	}
	return false
}

func isNumber(t string) bool {
	_, err := strconv.ParseFloat(t, 64)
	return err == nil
}

// negations are the words that turn a statement around.
var negations = map[string]bool{"not": true, "no": true, "never": true, "nor": true, "none": true, "nothing": true,
	"neither": true, "cannot": true, "without": true, "nobody": true, "nowhere": true}

// aversions are words that turn a liking around as a negation does: "the
// user hates jazz" citing "I like jazz" is the opposite of what was said.
var aversions = []string{"hate", "dislike", "loath", "detest", "despis", "abhor", "can't stand", "cannot stand"}

// averse tells whether text says a dislike ("hates", "dislikes", "loathes").
func averse(text string) bool {
	t := strings.ReplaceAll(strings.ToLower(text), "’", "'")
	for _, w := range aversions {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// negates tells whether text holds a negation ("not", "never", "don't").
func negates(text string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\'' && r != '’'
	}) {
		w = strings.Trim(w, "'’")
		if negations[w] || strings.HasSuffix(w, "n't") || strings.HasSuffix(w, "n’t") {
			return true
		}
	}
	return false
}
