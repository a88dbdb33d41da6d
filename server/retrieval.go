package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/retrieval"
)

var retrievalSentinels = []sentinel{
	{retrieval.ErrConflict, problem.DocumentConflict, 0},
	{retrieval.ErrNotFound, problem.DocumentNotFound, 0},
	{retrieval.ErrInvalidInput, problem.InvalidRequest, http.StatusUnprocessableEntity},
}

// Retrieval with provenance. The routes are registered whether or not the
// server has a retrieval service, so the API document is the same on every
// server; without one (Options.Retrieval nil) each answers 404 saying so.
func (s *Server) retrievalRoutes() []Route {
	return []Route{
		// Room for the largest content the service takes, JSON-escaped
		// (\uXXXX is 6 bytes for a 1 to 3 byte character).
		{Method: http.MethodPut, Path: "/v1/documents/{document_id}", Handler: s.withRetrieval(s.putDocument), MaxBody: documentBodyBytes},
		{Method: http.MethodGet, Path: "/v1/documents/{document_id}", Handler: s.withRetrieval(s.getDocument)},
		{Method: http.MethodDelete, Path: "/v1/documents/{document_id}", Handler: s.withRetrieval(s.deleteDocument)},
		// Retrieval stores a snapshot but changes no document: a reader may retrieve.
		{Method: http.MethodPost, Path: "/v1/retrieve", Role: RoleReader, Handler: s.withRetrieval(s.retrieve)},
		{Method: http.MethodGet, Path: "/v1/retrieval-snapshots/{snapshot_id}", Role: RoleReader, Handler: s.withRetrieval(s.getSnapshot)},
		// Membership is access control: an admin's act.
		{Method: http.MethodPut, Path: "/v1/groups/{group}/members/{principal}", Role: RoleAdmin, Handler: s.withRetrieval(s.putMember)},
		{Method: http.MethodDelete, Path: "/v1/groups/{group}/members/{principal}", Role: RoleAdmin, Handler: s.withRetrieval(s.deleteMember)},
		{Method: http.MethodGet, Path: "/v1/invalidations", Handler: s.withRetrieval(s.listInvalidations)},
	}
}

func (s *Server) withRetrieval(h HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.retrieval == nil {
			return newError(problem.NotFound, "documents and retrieval are not configured on this server")
		}
		return h(w, r)
	}
}

// DocumentRequest is PUT /v1/documents/{document_id}.
type DocumentRequest struct {
	SourceURI     string `json:"source_uri"`
	SourceVersion string `json:"source_version"`
	// Content is required: a PUT replaces the whole document, and one sent
	// without content would silently empty it.
	Content  *string         `json:"content"`
	ACL      []string        `json:"acl"`
	Metadata json.RawMessage `json:"metadata"`
}

// DocumentResponse is a document version as indexed, without its content,
// and what the write did: created, replaced or unchanged (only refreshed).
type DocumentResponse struct {
	DocumentID    string          `json:"document_id"`
	SourceURI     string          `json:"source_uri"`
	SourceVersion string          `json:"source_version"`
	Version       int64           `json:"version"`
	Chunks        int             `json:"chunks"`
	ACL           []string        `json:"acl"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	UpdatedAt     time.Time       `json:"updated_at"`
	IndexedAt     time.Time       `json:"indexed_at"`
	Outcome       string          `json:"outcome,omitempty"`
}

func documentResponse(d retrieval.Document, outcome string) DocumentResponse {
	return DocumentResponse{DocumentID: d.DocumentID, SourceURI: d.SourceURI, SourceVersion: d.SourceVersion, Version: d.Version,
		Chunks: d.Chunks, ACL: d.ACL, Metadata: d.Metadata, UpdatedAt: d.UpdatedAt, IndexedAt: d.IndexedAt, Outcome: outcome}
}

func documentLocation(id string) string { return "/v1/documents/" + url.PathEscape(id) }

func docNotFound(err error, what string) error {
	if errors.Is(err, retrieval.ErrNotFound) {
		return &apiError{kind: problem.DocumentNotFound, cause: err, detail: what + " does not exist in this tenant"}
	}
	return err
}

// documentBodyBytes is the body limit of PUT /v1/documents/{id}.
const documentBodyBytes = 6*retrieval.MaxContentBytes + 64<<10

func (s *Server) putDocument(w http.ResponseWriter, r *http.Request) error {
	var in DocumentRequest
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Content == nil {
		return unprocessable("content is required: a PUT replaces the whole document (send \"\" for an empty one)")
	}
	id := r.PathValue("document_id")
	d, created, err := s.retrieval.Put(r.Context(), tenant(r), retrieval.PutRequest{DocumentID: id, SourceURI: in.SourceURI,
		SourceVersion: in.SourceVersion, Content: *in.Content, ACL: in.ACL, Metadata: in.Metadata})
	if err != nil {
		return err
	}
	status, outcome := http.StatusOK, "replaced"
	switch {
	case created:
		status, outcome = http.StatusCreated, "created"
	case d.UpdatedAt.Before(d.IndexedAt):
		outcome = "unchanged"
	}
	w.Header().Set("Location", documentLocation(id))
	writeJSON(w, status, documentResponse(d, outcome))
	return nil
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request) error {
	d, err := s.retrieval.Get(r.Context(), tenant(r), r.PathValue("document_id"))
	if err != nil {
		return docNotFound(err, "the document")
	}
	writeJSON(w, http.StatusOK, documentResponse(d, ""))
	return nil
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.retrieval.Delete(r.Context(), tenant(r), r.PathValue("document_id")); err != nil {
		return docNotFound(err, "the document")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) error {
	var in retrieval.RetrieveRequest
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	snap, err := s.retrieval.Retrieve(r.Context(), tenant(r), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) error {
	snap, err := s.retrieval.Snapshot(r.Context(), tenant(r), r.PathValue("snapshot_id"))
	if err != nil {
		if errors.Is(err, retrieval.ErrNotFound) {
			return &apiError{kind: problem.RetrievalSnapshotNotFound, cause: err, detail: "no such snapshot in this tenant (or retention removed it)"}
		}
		return err
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

// Membership is the answer of PUT /v1/groups/{group}/members/{principal}.
type Membership struct {
	Group     string `json:"group"`
	Principal string `json:"principal"`
	Member    bool   `json:"member"`
	// Changed is false when the principal already was a member.
	Changed bool `json:"changed"`
}

func (s *Server) putMember(w http.ResponseWriter, r *http.Request) error {
	// No fields: a body, if any, must be an empty object ({"member":false}
	// would otherwise add the member it meant to remove).
	if _, err := s.decodeOptionalJSON(w, r, &struct{}{}); err != nil {
		return err
	}
	g, p := r.PathValue("group"), r.PathValue("principal")
	changed, err := s.retrieval.SetMember(r.Context(), tenant(r), g, p, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Membership{Group: g, Principal: p, Member: true, Changed: changed})
	return nil
}

func (s *Server) deleteMember(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.retrieval.SetMember(r.Context(), tenant(r), r.PathValue("group"), r.PathValue("principal"), false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listInvalidations(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	var after int64
	if c := q.Get("cursor"); c != "" {
		if after, err = strconv.ParseInt(c, 10, 64); err != nil || after < 0 {
			return unprocessable("malformed cursor %q: pass the next_cursor of a page this endpoint answered", c)
		}
	}
	limit, err := queryInt(q, "limit")
	if err != nil {
		return err
	}
	if limit < 0 || limit > 1000 {
		return unprocessable("limit must be within 1 and 1000 (default 100)")
	}
	evs, err := s.retrieval.Invalidations(r.Context(), tenant(r), after, int(limit))
	if err != nil {
		return err
	}
	next := ""
	if n := len(evs); n > 0 && (n == int(limit) || (limit == 0 && n == 100)) {
		next = strconv.FormatInt(evs[n-1].IndexVersion, 10)
	}
	writeJSON(w, http.StatusOK, listOf(evs, next))
	return nil
}
