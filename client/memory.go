package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/problem"
)

// memorySentinels lets errors.Is(err, memory.ErrTombstoned) (and the
// others) work on the answers of memory calls, as it does against the library.
var memorySentinels = map[string]error{
	problem.MemoryNotFound:           memory.ErrNotFound,
	problem.MemoryRefused:            memory.ErrRefused,
	problem.MemoryProvenanceRequired: memory.ErrNoProvenance,
	problem.MemoryConsentRequired:    memory.ErrNoConsent,
	problem.MemoryForgotten:          memory.ErrTombstoned,
	problem.MemoryConflict:           memory.ErrConflict,
	problem.ExtractorNotConfigured:   memory.ErrNoExtractor,
	problem.IdempotencyMismatch:      memory.ErrIdempotencyMismatch,
}

// memoryErr adds the memory sentinel of a problem to err, keeping the
// *Error; a refusal (outcome "refused") is also a *memory.Refusal, so
// errors.As finds its reason as it would against the library.
func memoryErr(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	s, ok := memorySentinels[e.Kind()]
	if !ok {
		if e.Kind() == problem.InvalidRequest && e.Status == http.StatusUnprocessableEntity {
			return alsoIs(err, memory.ErrInvalidInput)
		}
		return err
	}
	if e.Outcome == string(memory.OutcomeRefused) {
		return alsoIs(err, &memory.Refusal{Reason: e.Reason, Err: s})
	}
	return alsoIs(err, s)
}

func memoryPath(id string, rest ...string) string { return itemPath("memories", id, rest...) }

func subjectPath(id, rest string) string { return itemPath("subjects", id, rest) }

// wireWrite is a write's answer: the claim's fields and what the write did.
type wireWrite struct {
	memory.Claim
	Outcome    memory.Outcome `json:"outcome"`
	Reason     string         `json:"reason"`
	Superseded string         `json:"superseded"`
	MergedInto string         `json:"merged_into"`
}

func (w wireWrite) result() memory.AddResult {
	return memory.AddResult{Claim: w.Claim, Outcome: w.Outcome, Reason: w.Reason, Superseded: w.Superseded, MergedInto: w.MergedInto}
}

// AddMemory writes a claim with its provenance and says what happened:
// added, superseded (Superseded names the replaced claim), merged into an
// exact duplicate (MergedInto) or held for confirmation. A claim policy
// does not keep is an error that errors.As makes a *memory.Refusal. With
// IdempotencyKey, a retry answers as the first add did.
func (c *Client) AddMemory(ctx context.Context, in memory.AddInput, opts ...CallOption) (memory.AddResult, error) {
	var out wireWrite
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/memories", body: addBody(in)}, &out, opts...)
	if err != nil {
		return memory.AddResult{}, memoryErr(err)
	}
	return out.result(), nil
}

// addBody leaves out the fields the caller did not set, so the server's
// defaults apply.
func addBody(in memory.AddInput) map[string]any {
	b := map[string]any{"subject_id": in.SubjectID, "key": in.Key, "value": in.Value, "provenance": in.Provenance}
	if len(in.Value) == 0 {
		delete(b, "value")
	}
	for k, v := range map[string]string{"namespace": in.Namespace, "text": in.Text, "category": in.Category, "consent_basis": in.ConsentBasis, "supersedes": in.Supersedes} {
		if v != "" {
			b[k] = v
		}
	}
	if in.SchemaVersion != 0 {
		b["schema_version"] = in.SchemaVersion
	}
	if in.Confidence != nil {
		b["confidence"] = *in.Confidence
	}
	if in.ValidFrom != nil {
		b["valid_from"] = in.ValidFrom
	}
	if in.ExpiresAt != nil {
		b["expires_at"] = in.ExpiresAt
	}
	if in.TTLSeconds != 0 {
		b["ttl_seconds"] = in.TTLSeconds
	}
	return b
}

func memoryQueryValues(q memory.Query) url.Values {
	v := url.Values{"subject_id": {q.SubjectID}}
	for k, s := range map[string]string{"namespace": q.Namespace, "key": q.Key, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.SchemaVersion > 0 {
		v.Set("schema_version", strconv.Itoa(q.SchemaVersion))
	}
	if q.AsOf != nil {
		v.Set("as_of", q.AsOf.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// ListMemories returns a page of the subject's current claims (or those in
// force at q.AsOf); pass NextCursor as q.Cursor for the next.
func (c *Client) ListMemories(ctx context.Context, q memory.Query) (Page[memory.Claim], error) {
	var out Page[memory.Claim]
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/memories", query: memoryQueryValues(q)}, &out)
	return out, memoryErr(err)
}

// HeldMemories returns a page of the subject's claims held for confirmation.
func (c *Client) HeldMemories(ctx context.Context, q memory.Query) (Page[memory.Claim], error) {
	var out Page[memory.Claim]
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/memories/held", query: memoryQueryValues(q)}, &out)
	return out, memoryErr(err)
}

// GetMemory returns one claim in any status.
func (c *Client) GetMemory(ctx context.Context, memoryID string) (memory.Claim, error) {
	var out memory.Claim
	_, err := c.do(ctx, request{method: http.MethodGet, path: memoryPath(memoryID)}, &out)
	return out, memoryErr(err)
}

// MemoryHistory returns every claim of the memory's key, oldest first.
func (c *Client) MemoryHistory(ctx context.Context, memoryID string) ([]memory.Claim, error) {
	var out struct {
		Items []memory.Claim `json:"items"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: memoryPath(memoryID, "history")}, &out)
	return out.Items, memoryErr(err)
}

// SearchMemories ranks the subject's live claims; every hit carries its
// provenance and score parts.
func (c *Client) SearchMemories(ctx context.Context, q memory.SearchQuery) (memory.SearchResult, error) {
	body := map[string]any{"query": q.Query, "subject_id": q.SubjectID}
	if q.Namespace != "" {
		body["namespace"] = q.Namespace
	}
	if q.K > 0 {
		body["k"] = q.K
	}
	if q.Mode != "" {
		body["mode"] = q.Mode
	}
	if q.HalfLife > 0 {
		body["half_life_seconds"] = int64((q.HalfLife + time.Second - 1) / time.Second)
	}
	var out memory.SearchResult
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/memories/search", body: body}, &out)
	return out, memoryErr(err)
}

// InvalidateMemory ends a current or held claim with a reason.
func (c *Client) InvalidateMemory(ctx context.Context, memoryID, reason string) (memory.Claim, error) {
	var out memory.Claim
	_, err := c.do(ctx, request{method: http.MethodPost, path: memoryPath(memoryID, "invalidate"), body: map[string]string{"reason": reason}}, &out)
	return out, memoryErr(err)
}

// ConfirmMemory makes a held claim current (the user confirmed it).
func (c *Client) ConfirmMemory(ctx context.Context, memoryID string) (memory.AddResult, error) {
	var out wireWrite
	_, err := c.do(ctx, request{method: http.MethodPost, path: memoryPath(memoryID, "confirm")}, &out)
	if err != nil {
		return memory.AddResult{}, memoryErr(err)
	}
	return out.result(), nil
}

// RejectMemory ends a held claim; reason may be empty.
func (c *Client) RejectMemory(ctx context.Context, memoryID, reason string) (memory.Claim, error) {
	r := request{method: http.MethodPost, path: memoryPath(memoryID, "reject")}
	if reason != "" {
		r.body = map[string]string{"reason": reason}
	}
	var out memory.Claim
	_, err := c.do(ctx, r, &out)
	return out, memoryErr(err)
}

// ForgetSubject deletes the subject's memory (one namespace, or all when
// "") everywhere it is kept and leaves tombstones; the record keeps counts,
// never content.
func (c *Client) ForgetSubject(ctx context.Context, subjectID, namespace, reason string) (memory.ForgetRecord, error) {
	v := url.Values{}
	if namespace != "" {
		v.Set("namespace", namespace)
	}
	if reason != "" {
		v.Set("reason", reason)
	}
	var out memory.ForgetRecord
	_, err := c.do(ctx, request{method: http.MethodDelete, path: subjectPath(subjectID, "memories"), query: v}, &out)
	return out, memoryErr(err)
}

// ExtractMemories turns messages into candidate claims with the server's
// extractor; with in.Apply they are written under the same rules as
// AddMemory. Every candidate has an outcome and every message without one
// is in Skipped.
func (c *Client) ExtractMemories(ctx context.Context, in memory.ExtractInput) (memory.ExtractResult, error) {
	msgs := make([]map[string]string, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = map[string]string{"role": m.Role, "content": m.Content}
		if m.ID != "" {
			msgs[i]["id"] = m.ID
		}
	}
	body := map[string]any{"subject_id": in.SubjectID, "messages": msgs, "apply": in.Apply}
	for k, v := range map[string]string{"namespace": in.Namespace, "source_type": in.SourceType, "source_id": in.SourceID,
		"source_version": in.SourceVersion, "run_id": in.RunID, "consent_basis": in.ConsentBasis} {
		if v != "" {
			body[k] = v
		}
	}
	if in.TTLSeconds > 0 {
		body["ttl_seconds"] = in.TTLSeconds
	}
	var out struct {
		Items   []memory.ExtractItem `json:"items"`
		Skipped []struct {
			MessageID string `json:"message_id"`
			Reason    string `json:"reason"`
		} `json:"skipped"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			Calls            int `json:"calls"`
		} `json:"usage"`
		Extractor string `json:"extractor"`
		Applied   bool   `json:"applied"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/memories/extract", body: body}, &out); err != nil {
		return memory.ExtractResult{}, memoryErr(err)
	}
	res := memory.ExtractResult{Items: out.Items, Extractor: out.Extractor, Applied: out.Applied,
		Usage:   memory.Usage{PromptTokens: out.Usage.PromptTokens, CompletionTokens: out.Usage.CompletionTokens, Calls: out.Usage.Calls},
		Skipped: make([]memory.SkippedMessage, len(out.Skipped))}
	for i, s := range out.Skipped {
		res.Skipped[i] = memory.SkippedMessage{MessageID: s.MessageID, Reason: s.Reason}
	}
	return res, nil
}

// Profile returns the subject's current claims as one compact,
// token-counted view per namespace.
func (c *Client) Profile(ctx context.Context, subjectID string) (memory.Profile, error) {
	var out memory.Profile
	_, err := c.do(ctx, request{method: http.MethodGet, path: subjectPath(subjectID, "profile")}, &out)
	return out, memoryErr(err)
}

// wireNamespace is a namespace policy on the wire.
type wireNamespace struct {
	Namespace  string `json:"namespace"`
	Personal   bool   `json:"personal"`
	Sensitive  bool   `json:"sensitive"`
	TTLSeconds int64  `json:"ttl_seconds"`
}

func (w wireNamespace) policy() memory.Namespace {
	return memory.Namespace{Name: w.Namespace, Personal: w.Personal, Sensitive: w.Sensitive, TTL: time.Duration(w.TTLSeconds) * time.Second}
}

// DeclareNamespace stores a namespace policy (needs an admin key): personal
// namespaces need a consent basis, sensitive ones hold claims until
// confirmed, and TTL (whole seconds) is the default lifetime of a claim.
func (c *Client) DeclareNamespace(ctx context.Context, ns memory.Namespace) (memory.Namespace, error) {
	body := map[string]any{"personal": ns.Personal, "sensitive": ns.Sensitive}
	if ns.TTL > 0 {
		body["ttl_seconds"] = int64((ns.TTL + time.Second - 1) / time.Second)
	}
	var out wireNamespace
	if _, err := c.do(ctx, request{method: http.MethodPut, path: itemPath("memory-namespaces", ns.Name), body: body}, &out); err != nil {
		return memory.Namespace{}, memoryErr(err)
	}
	return out.policy(), nil
}

// MemoryNamespace returns a namespace policy (the zero policy if never declared).
func (c *Client) MemoryNamespace(ctx context.Context, name string) (memory.Namespace, error) {
	var out wireNamespace
	if _, err := c.do(ctx, request{method: http.MethodGet, path: itemPath("memory-namespaces", name)}, &out); err != nil {
		return memory.Namespace{}, memoryErr(err)
	}
	return out.policy(), nil
}
