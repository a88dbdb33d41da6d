package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mementohq/memento/run"
)

func schemaPath(workflow string, version int) string {
	return itemPath("workflows", workflow, "schemas", strconv.Itoa(version))
}

// PutSchema registers the JSON Schema of a workflow's state version. A
// version is immutable: created is false when this very schema was already
// registered; another schema for it is an *Error of kind schema-conflict.
func (c *Client) PutSchema(ctx context.Context, workflow string, version int, schema json.RawMessage) (s run.Schema, created bool, err error) {
	resp, err := c.do(ctx, request{method: http.MethodPut, path: schemaPath(workflow, version), rawBody: schema}, &s)
	if err != nil {
		return run.Schema{}, false, err
	}
	return s, resp.Status == http.StatusCreated, nil
}

// GetSchema returns a registered state schema (kind schema-not-found if none).
func (c *Client) GetSchema(ctx context.Context, workflow string, version int) (run.Schema, error) {
	var s run.Schema
	_, err := c.do(ctx, request{method: http.MethodGet, path: schemaPath(workflow, version)}, &s)
	return s, err
}

// ListSchemas returns one page of a workflow's registered state schemas by
// version, from cursor ("" for the first); limit 0 is the server's default.
func (c *Client) ListSchemas(ctx context.Context, workflow, cursor string, limit int) (Page[run.Schema], error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p Page[run.Schema]
	_, err := c.do(ctx, request{method: http.MethodGet, path: itemPath("workflows", workflow, "schemas"), query: q}, &p)
	return p, err
}
