package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/problem"
)

var memorySentinels = []sentinel{
	// ErrNoExtractor is also ErrInvalidInput: it comes first.
	{memory.ErrNoExtractor, problem.ExtractorNotConfigured, 0},
	{memory.ErrNotFound, problem.MemoryNotFound, 0},
	{memory.ErrNoProvenance, problem.MemoryProvenanceRequired, 0},
	{memory.ErrNoConsent, problem.MemoryConsentRequired, 0},
	{memory.ErrTombstoned, problem.MemoryForgotten, 0},
	{memory.ErrRefused, problem.MemoryRefused, 0},
	{memory.ErrConflict, problem.MemoryConflict, 0},
	{memory.ErrIdempotencyMismatch, problem.IdempotencyMismatch, 0},
	{memory.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
}

// Long-term memory. The routes are registered whether or not the server has
// a memory service, so the API document is the same on every server; without
// one (Options.Memory nil) each answers 404 not-found saying so.
//
// GET /v1/memories/held and the POSTs to /v1/memories/search and
// /v1/memories/extract sit next to /v1/memories/{memory_id}: ServeMux picks
// the literal segment, the more specific pattern, so no memory id can
// shadow them (ids are UUIDs the server makes).
func (s *Server) memoryRoutes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/memories", Handler: s.withMemory(s.addMemory)},
		{Method: http.MethodGet, Path: "/v1/memories", Handler: s.withMemory(s.listMemories)},
		{Method: http.MethodGet, Path: "/v1/memories/held", Handler: s.withMemory(s.heldMemories)},
		// Search changes nothing: a reader may search, as it may list.
		{Method: http.MethodPost, Path: "/v1/memories/search", Role: RoleReader, Handler: s.withMemory(s.searchMemories)},
		{Method: http.MethodPost, Path: "/v1/memories/extract", Handler: s.withMemory(s.extractMemories)},
		{Method: http.MethodGet, Path: "/v1/memories/{memory_id}", Handler: s.withMemory(s.getMemory)},
		{Method: http.MethodGet, Path: "/v1/memories/{memory_id}/history", Handler: s.withMemory(s.memoryHistory)},
		{Method: http.MethodPost, Path: "/v1/memories/{memory_id}/invalidate", Handler: s.withMemory(s.invalidateMemory)},
		{Method: http.MethodPost, Path: "/v1/memories/{memory_id}/confirm", Handler: s.withMemory(s.confirmMemory)},
		{Method: http.MethodPost, Path: "/v1/memories/{memory_id}/reject", Handler: s.withMemory(s.rejectMemory)},
		{Method: http.MethodDelete, Path: "/v1/subjects/{subject_id}/memories", Handler: s.withMemory(s.forgetSubject)},
		{Method: http.MethodGet, Path: "/v1/subjects/{subject_id}/profile", Handler: s.withMemory(s.memoryProfile)},
		// A namespace policy decides what needs consent or confirmation:
		// declaring one is an admin's act.
		{Method: http.MethodPut, Path: "/v1/memory-namespaces/{namespace}", Role: RoleAdmin, Handler: s.withMemory(s.putMemoryNamespace)},
		{Method: http.MethodGet, Path: "/v1/memory-namespaces/{namespace}", Handler: s.withMemory(s.getMemoryNamespace)},
	}
}

// withMemory answers 404 when the server has no memory service.
func (s *Server) withMemory(h HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.memory == nil {
			return newError(problem.NotFound, "long-term memory is not configured on this server")
		}
		return h(w, r)
	}
}

func memoryID(r *http.Request) string { return r.PathValue("memory_id") }

func memoryLocation(id string) string { return "/v1/memories/" + url.PathEscape(id) }

// memoryWriteFailed words a failed memory write: policy refusals carry
// outcome "refused" and the reason, and a write whose outcome is unknown
// says how to settle it.
func memoryWriteFailed(err error, reread string) error {
	if outcomeUnknown(err) {
		return writeOutcomeUnknown(err, reread)
	}
	var ref *memory.Refusal
	if errors.As(err, &ref) {
		return err
	}
	if errors.Is(err, memory.ErrNoProvenance) || errors.Is(err, memory.ErrNoConsent) {
		return &memory.Refusal{Reason: err.Error(), Err: err}
	}
	return err
}

// MemoryWriteResponse is a claim as a write left it, with what the write
// did: outcome (added, superseded, merged, held) and the ids involved.
type MemoryWriteResponse struct {
	memory.Claim
	Outcome memory.Outcome `json:"outcome"`
	Reason  string         `json:"reason,omitempty"`
	// Superseded is the claim this one replaced; MergedInto the existing
	// claim an exact duplicate refreshed (the claim answered).
	Superseded string `json:"superseded,omitempty"`
	MergedInto string `json:"merged_into,omitempty"`
}

func writeResponse(res memory.AddResult) MemoryWriteResponse {
	return MemoryWriteResponse{Claim: res.Claim, Outcome: res.Outcome, Reason: res.Reason, Superseded: res.Superseded, MergedInto: res.MergedInto}
}

func (s *Server) addMemory(w http.ResponseWriter, r *http.Request) error {
	var in memory.AddInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	res, replayed, err := s.memory.AddKeyed(r.Context(), tenant(r), in, r.Header.Get("Idempotency-Key"))
	if err != nil {
		reread := "/v1/memories?subject_id=" + url.QueryEscape(in.SubjectID) + "&key=" + url.QueryEscape(in.Key)
		err = memoryWriteFailed(err, reread)
		if ref := (*memory.Refusal)(nil); errors.As(err, &ref) {
			s.metrics.memoryWrites.WithLabelValues(string(memory.OutcomeRefused)).Inc()
		}
		return err
	}
	s.metrics.memoryWrites.WithLabelValues(string(res.Outcome)).Inc()
	status := http.StatusCreated
	if res.Outcome == memory.OutcomeMerged {
		status = http.StatusOK
	}
	w.Header().Set("Location", memoryLocation(res.Claim.MemoryID))
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, writeResponse(res))
	return nil
}

// memoryQuery reads the list filters: subject_id (required), namespace,
// key, schema_version, cursor, limit and, for List, as_of.
func memoryQuery(r *http.Request) (memory.Query, error) {
	q, err := query(r)
	if err != nil {
		return memory.Query{}, err
	}
	mq := memory.Query{SubjectID: q.Get("subject_id"), Namespace: q.Get("namespace"), Key: q.Get("key"), Cursor: q.Get("cursor")}
	if mq.SubjectID == "" {
		return memory.Query{}, badRequest("query parameter subject_id is required: memory is read one subject at a time")
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return memory.Query{}, err
	}
	mq.Limit = int(min(limit, memory.MaxListLimit+1)) // over the maximum: the service refuses it
	sv, err := queryInt(q, "schema_version")
	if err != nil {
		return memory.Query{}, err
	}
	mq.SchemaVersion = int(min(sv, 1<<31-1))
	if v := q.Get("as_of"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return memory.Query{}, badRequest("query parameter as_of must be an RFC 3339 time, not %q", v)
		}
		mq.AsOf = &t
	}
	return mq, nil
}

func (s *Server) listMemories(w http.ResponseWriter, r *http.Request) error {
	mq, err := memoryQuery(r)
	if err != nil {
		return err
	}
	cs, next, err := s.memory.List(r.Context(), tenant(r), mq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(cs, next))
	return nil
}

func (s *Server) heldMemories(w http.ResponseWriter, r *http.Request) error {
	mq, err := memoryQuery(r)
	if err != nil {
		return err
	}
	if mq.AsOf != nil {
		return badRequest("as_of does not apply to held claims")
	}
	cs, next, err := s.memory.Held(r.Context(), tenant(r), mq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(cs, next))
	return nil
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request) error {
	c, err := s.memory.Get(r.Context(), tenant(r), memoryID(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// MemoryHistory is a key's supersession chain, oldest first.
type MemoryHistory struct {
	Items []memory.Claim `json:"items"`
}

func (s *Server) memoryHistory(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.memory.History(r.Context(), tenant(r), memoryID(r))
	if err != nil {
		return err
	}
	if cs == nil {
		cs = []memory.Claim{}
	}
	writeJSON(w, http.StatusOK, MemoryHistory{Items: cs})
	return nil
}

// MemorySearchRequest is the body of POST /v1/memories/search.
type MemorySearchRequest struct {
	Query     string `json:"query"`
	SubjectID string `json:"subject_id"`
	Namespace string `json:"namespace,omitempty"`
	K         int    `json:"k,omitempty"`
	Mode      string `json:"mode,omitempty"`
	// HalfLifeSeconds, when > 0, weighs each hit by its age (recency).
	HalfLifeSeconds int64 `json:"half_life_seconds,omitempty"`
}

// maxHalfLifeSeconds keeps a half-life inside a time.Duration.
const maxHalfLifeSeconds = 100 * 365 * 24 * 3600

func (s *Server) searchMemories(w http.ResponseWriter, r *http.Request) error {
	var req MemorySearchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.HalfLifeSeconds < 0 || req.HalfLifeSeconds > maxHalfLifeSeconds {
		return unprocessable("half_life_seconds must be within [0, %d]", maxHalfLifeSeconds)
	}
	res, err := s.memory.Search(r.Context(), tenant(r), memory.SearchQuery{
		Query: req.Query, SubjectID: req.SubjectID, Namespace: req.Namespace, K: req.K, Mode: req.Mode,
		HalfLife: time.Duration(req.HalfLifeSeconds) * time.Second,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// InvalidateMemoryRequest ends a claim with a reason.
type InvalidateMemoryRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) invalidateMemory(w http.ResponseWriter, r *http.Request) error {
	var req InvalidateMemoryRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	c, err := s.memory.Invalidate(r.Context(), tenant(r), memoryID(r), req.Reason)
	if err != nil {
		return memoryWriteFailed(err, memoryLocation(memoryID(r)))
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// decodeOptionalJSON decodes a body that may be absent (empty, or only
// whitespace) into dst with the checks of decodeJSON; present is false
// without one.
func (s *Server) decodeOptionalJSON(w http.ResponseWriter, r *http.Request, dst any) (present bool, err error) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return false, nil
	}
	if r.ContentLength < 0 { // chunked: only reading tells whether there is a body
		body, err := s.readBody(w, r, "")
		if err != nil {
			return true, err
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return false, nil
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	if err := s.decodeJSON(w, r, dst); err != nil {
		return true, err
	}
	return true, nil
}

func (s *Server) confirmMemory(w http.ResponseWriter, r *http.Request) error {
	// No fields: a body, if any, must be an empty object.
	if _, err := s.decodeOptionalJSON(w, r, &struct{}{}); err != nil {
		return err
	}
	res, err := s.memory.Confirm(r.Context(), tenant(r), memoryID(r))
	if err != nil {
		return memoryWriteFailed(err, memoryLocation(memoryID(r)))
	}
	s.metrics.memoryWrites.WithLabelValues(string(res.Outcome)).Inc()
	writeJSON(w, http.StatusOK, writeResponse(res))
	return nil
}

// RejectMemoryRequest ends a held claim; the reason is optional.
type RejectMemoryRequest struct {
	Reason string `json:"reason,omitempty"`
}

func (s *Server) rejectMemory(w http.ResponseWriter, r *http.Request) error {
	var req RejectMemoryRequest
	if _, err := s.decodeOptionalJSON(w, r, &req); err != nil {
		return err
	}
	c, err := s.memory.Reject(r.Context(), tenant(r), memoryID(r), req.Reason)
	if err != nil {
		return memoryWriteFailed(err, memoryLocation(memoryID(r)))
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// ForgetRequest is the optional body of DELETE /v1/subjects/{subject_id}/memories;
// the same two fields may come as query parameters instead.
type ForgetRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func (s *Server) forgetSubject(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	if q.Has("namespace") && q.Get("namespace") == "" {
		// Absent means every namespace; an empty one is more likely a
		// variable left unset than a wish to forget everything.
		return unprocessable("namespace is empty: name one, or leave the parameter out to forget every namespace")
	}
	req := ForgetRequest{Namespace: q.Get("namespace"), Reason: q.Get("reason")}
	// ForgetRequest with pointers: a namespace sent empty is told from one
	// left out (every namespace).
	var sent struct {
		Namespace *string `json:"namespace,omitempty"`
		Reason    *string `json:"reason,omitempty"`
	}
	if _, err := s.decodeOptionalJSON(w, r, &sent); err != nil {
		return err
	}
	if sent.Namespace != nil && *sent.Namespace == "" {
		return unprocessable("namespace is empty: name one, or leave it out to forget every namespace")
	}
	var body ForgetRequest
	if sent.Namespace != nil {
		body.Namespace = *sent.Namespace
	}
	if sent.Reason != nil {
		body.Reason = *sent.Reason
	}
	for _, f := range []struct {
		name      string
		fromQuery *string
		fromBody  string
	}{{"namespace", &req.Namespace, body.Namespace}, {"reason", &req.Reason, body.Reason}} {
		switch {
		case f.fromBody == "":
		case *f.fromQuery == "":
			*f.fromQuery = f.fromBody
		case *f.fromQuery != f.fromBody:
			return badRequest("%s is given in the query and the body with different values", f.name)
		}
	}
	subject := r.PathValue("subject_id")
	rec, err := s.memory.Forget(r.Context(), tenant(r), subject, req.Namespace, req.Reason)
	if err != nil {
		return memoryWriteFailed(err, "/v1/memories?subject_id="+url.QueryEscape(subject))
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

// ExtractMessage is one message given to extraction.
type ExtractMessage struct {
	Role string `json:"role"`
	// Content is required (a misspelt "text" must not pass as an empty
	// message); "" is allowed and skipped.
	Content *string `json:"content"`
	ID      string  `json:"id,omitempty"`
}

// ExtractRequest is the body of POST /v1/memories/extract.
type ExtractRequest struct {
	SubjectID string           `json:"subject_id"`
	Namespace string           `json:"namespace,omitempty"`
	Messages  []ExtractMessage `json:"messages"`
	// Apply writes the candidates; false (the default) only reports what
	// would happen to each.
	Apply         bool   `json:"apply,omitempty"`
	SourceType    string `json:"source_type,omitempty"`
	SourceID      string `json:"source_id,omitempty"`
	SourceVersion string `json:"source_version,omitempty"`
	RunID         string `json:"run_id,omitempty"`
	ConsentBasis  string `json:"consent_basis,omitempty"`
	TTLSeconds    int64  `json:"ttl_seconds,omitempty"`
}

// SkippedMessage is a message that gave no candidate, and why.
type SkippedMessage struct {
	MessageID string `json:"message_id"`
	Reason    string `json:"reason"`
}

// ExtractUsage is what extraction cost in model tokens (zero for rules).
type ExtractUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	Calls            int `json:"calls"`
}

// ExtractResponse reports every candidate with its outcome and every
// message that gave none: nothing is dropped silently.
type ExtractResponse struct {
	Items     []memory.ExtractItem `json:"items"`
	Skipped   []SkippedMessage     `json:"skipped"`
	Usage     ExtractUsage         `json:"usage"`
	Extractor string               `json:"extractor"`
	Applied   bool                 `json:"applied"`
}

func (s *Server) extractMemories(w http.ResponseWriter, r *http.Request) error {
	var req ExtractRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Messages) > memory.MaxExtractMessages {
		return unprocessable("give 1 to %d messages", memory.MaxExtractMessages)
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > maxHalfLifeSeconds {
		return unprocessable("ttl_seconds must be within [0, %d]", maxHalfLifeSeconds)
	}
	in := memory.ExtractInput{SubjectID: req.SubjectID, Namespace: req.Namespace, Apply: req.Apply,
		SourceType: req.SourceType, SourceID: req.SourceID, SourceVersion: req.SourceVersion, RunID: req.RunID,
		ConsentBasis: req.ConsentBasis, TTLSeconds: req.TTLSeconds, Messages: make([]memory.Message, len(req.Messages))}
	for i, m := range req.Messages {
		if m.Content == nil {
			return unprocessable("message %d has no content", i)
		}
		in.Messages[i] = memory.Message{ID: m.ID, Role: m.Role, Content: *m.Content}
	}
	res, err := s.memory.Extract(r.Context(), tenant(r), in)
	if err != nil {
		if req.Apply {
			return memoryWriteFailed(err, "/v1/memories?subject_id="+url.QueryEscape(req.SubjectID))
		}
		return err
	}
	out := ExtractResponse{Items: res.Items, Skipped: make([]SkippedMessage, len(res.Skipped)), Extractor: res.Extractor, Applied: res.Applied,
		Usage: ExtractUsage{PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens, Calls: res.Usage.Calls}}
	if out.Items == nil {
		out.Items = []memory.ExtractItem{}
	}
	for i, sk := range res.Skipped {
		out.Skipped[i] = SkippedMessage{MessageID: sk.MessageID, Reason: sk.Reason}
	}
	if req.Apply {
		for _, it := range res.Items {
			s.metrics.memoryWrites.WithLabelValues(string(it.Outcome)).Inc()
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) memoryProfile(w http.ResponseWriter, r *http.Request) error {
	p, err := s.memory.Profile(r.Context(), tenant(r), r.PathValue("subject_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// MemoryNamespace is a tenant's policy for one namespace.
type MemoryNamespace struct {
	Namespace string `json:"namespace"`
	// Personal namespaces take only claims with a consent basis.
	Personal bool `json:"personal"`
	// Sensitive namespaces hold every claim until the user confirms it.
	Sensitive bool `json:"sensitive"`
	// TTLSeconds, when > 0, is the default lifetime of a claim there.
	TTLSeconds int64 `json:"ttl_seconds"`
}

// MemoryNamespaceRequest is the body of PUT /v1/memory-namespaces/{namespace}.
type MemoryNamespaceRequest struct {
	Personal   bool  `json:"personal"`
	Sensitive  bool  `json:"sensitive"`
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

func namespaceView(ns memory.Namespace) MemoryNamespace {
	return MemoryNamespace{Namespace: ns.Name, Personal: ns.Personal, Sensitive: ns.Sensitive, TTLSeconds: int64(ns.TTL / time.Second)}
}

func (s *Server) putMemoryNamespace(w http.ResponseWriter, r *http.Request) error {
	var req MemoryNamespaceRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > maxHalfLifeSeconds {
		return unprocessable("ttl_seconds must be within [0, %d]", maxHalfLifeSeconds)
	}
	ns, err := s.memory.DeclareNamespace(r.Context(), memory.Namespace{TenantID: tenant(r), Name: r.PathValue("namespace"),
		Personal: req.Personal, Sensitive: req.Sensitive, TTL: time.Duration(req.TTLSeconds) * time.Second})
	if err != nil {
		return memoryWriteFailed(err, "/v1/memory-namespaces/"+url.PathEscape(r.PathValue("namespace")))
	}
	writeJSON(w, http.StatusOK, namespaceView(ns))
	return nil
}

func (s *Server) getMemoryNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.memory.Namespace(r.Context(), tenant(r), r.PathValue("namespace"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, namespaceView(ns))
	return nil
}

// memoryRefusal adds a refusal's outcome and reason to its problem.
func memoryRefusal(p *Problem, err error) {
	var ref *memory.Refusal
	if errors.As(err, &ref) {
		p.Outcome, p.Reason = string(memory.OutcomeRefused), ref.Reason
	}
}
