package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/retrieval"
)

// retrievalErr adds the retrieval sentinel of a problem to err, so
// errors.Is(err, retrieval.ErrNotFound) works as against the library.
func retrievalErr(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Kind() {
	case problem.DocumentNotFound, problem.RetrievalSnapshotNotFound:
		return alsoIs(err, retrieval.ErrNotFound)
	case problem.DocumentConflict:
		return alsoIs(err, retrieval.ErrConflict)
	case problem.InvalidRequest:
		if e.Status == http.StatusUnprocessableEntity {
			return alsoIs(err, retrieval.ErrInvalidInput)
		}
	}
	return err
}

// DocumentResult is a document version as the server indexed it (without
// its content) and what the write did: created, replaced or unchanged.
type DocumentResult struct {
	DocumentID    string         `json:"document_id"`
	SourceURI     string         `json:"source_uri"`
	SourceVersion string         `json:"source_version"`
	Version       int64          `json:"version"`
	Chunks        int            `json:"chunks"`
	ACL           []string       `json:"acl"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	UpdatedAt     time.Time      `json:"updated_at"`
	IndexedAt     time.Time      `json:"indexed_at"`
	Outcome       string         `json:"outcome"`
}

// PutDocument indexes a source document version with its ACL.
func (c *Client) PutDocument(ctx context.Context, in retrieval.PutRequest) (DocumentResult, error) {
	body := map[string]any{"source_uri": in.SourceURI, "source_version": in.SourceVersion, "content": in.Content, "acl": in.ACL}
	if len(in.Metadata) > 0 {
		body["metadata"] = in.Metadata
	}
	var out DocumentResult
	if _, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/documents/" + url.PathEscape(in.DocumentID), body: body}, &out); err != nil {
		return DocumentResult{}, retrievalErr(err)
	}
	return out, nil
}

// GetDocument returns a document's current version, without its content.
func (c *Client) GetDocument(ctx context.Context, documentID string) (DocumentResult, error) {
	var out DocumentResult
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/documents/" + url.PathEscape(documentID)}, &out); err != nil {
		return DocumentResult{}, retrievalErr(err)
	}
	return out, nil
}

// DeleteDocument deletes a document and every projection row of it.
func (c *Client) DeleteDocument(ctx context.Context, documentID string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/documents/" + url.PathEscape(documentID)}, nil)
	return retrievalErr(err)
}

// Retrieve runs an ACL-filtered retrieval for principal; the answer is
// stored as a snapshot.
func (c *Client) Retrieve(ctx context.Context, in retrieval.RetrieveRequest) (retrieval.Snapshot, error) {
	var out retrieval.Snapshot
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/retrieve", body: in}, &out); err != nil {
		return retrieval.Snapshot{}, retrievalErr(err)
	}
	return out, nil
}

// RetrievalSnapshot returns a stored snapshot exactly as it was answered.
func (c *Client) RetrievalSnapshot(ctx context.Context, snapshotID string) (retrieval.Snapshot, error) {
	var out retrieval.Snapshot
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/retrieval-snapshots/" + url.PathEscape(snapshotID)}, &out); err != nil {
		return retrieval.Snapshot{}, retrievalErr(err)
	}
	return out, nil
}

// SetGroupMember adds principal to group (member true) or removes it.
func (c *Client) SetGroupMember(ctx context.Context, group, principal string, member bool) error {
	m := http.MethodPut
	if !member {
		m = http.MethodDelete
	}
	_, err := c.do(ctx, request{method: m, path: "/v1/groups/" + url.PathEscape(group) + "/members/" + url.PathEscape(principal)}, nil)
	return retrievalErr(err)
}

// Invalidations returns a page of invalidation events after cursor ("" for
// the first page).
func (c *Client) Invalidations(ctx context.Context, cursor string, limit int) (Page[retrieval.Invalidation], error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out Page[retrieval.Invalidation]
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/invalidations", query: q}, &out); err != nil {
		return Page[retrieval.Invalidation]{}, retrievalErr(err)
	}
	return out, nil
}
