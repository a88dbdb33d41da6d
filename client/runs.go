package client

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/mementohq/memento/run"
)

func runPath(id string, rest ...string) string { return itemPath("runs", id, rest...) }

// CreateRun creates a run. created is false when the server replayed an
// earlier create under the same IdempotencyKey.
func (c *Client) CreateRun(ctx context.Context, req run.CreateRequest, opts ...CallOption) (r run.Run, created bool, err error) {
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/runs", body: req}, &r, opts...)
	if err != nil {
		return run.Run{}, false, err
	}
	return r, resp.Header.Get("Idempotent-Replayed") != "true", nil
}

// GetRun returns a run; its StateRevision is also the run's ETag.
func (c *Client) GetRun(ctx context.Context, runID string) (run.Run, error) {
	var r run.Run
	_, err := c.do(ctx, request{method: http.MethodGet, path: runPath(runID)}, &r)
	return r, err
}

// GetRunIfChanged returns the run unless its revision is still knownRevision,
// in which case changed is false and no body travels (If-None-Match).
func (c *Client) GetRunIfChanged(ctx context.Context, runID string, knownRevision int64) (r run.Run, changed bool, err error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: runPath(runID), header: revisionHeader("If-None-Match", knownRevision)}, &r)
	if err != nil {
		return run.Run{}, false, err
	}
	if resp.Status == http.StatusNotModified {
		return run.Run{}, false, nil
	}
	return r, true, nil
}

// ListRunsOptions filter and page ListRuns.
type ListRunsOptions struct {
	Status   run.Status
	Workflow string
	Cursor   string
	Limit    int
}

// ListRuns returns one page of runs, oldest first.
func (c *Client) ListRuns(ctx context.Context, o ListRunsOptions) (Page[run.Run], error) {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", string(o.Status))
	}
	if o.Workflow != "" {
		q.Set("workflow", o.Workflow)
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Limit != 0 { // a negative one is the server's to refuse
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var p Page[run.Run]
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/runs", query: q}, &p)
	return p, err
}

// Runs iterates over every run matching o, fetching pages as it goes. It
// stops at the first error, which it yields.
func (c *Client) Runs(ctx context.Context, o ListRunsOptions) iter.Seq2[run.Run, error] {
	return func(yield func(run.Run, error) bool) {
		for {
			p, err := c.ListRuns(ctx, o)
			if err != nil {
				yield(run.Run{}, err)
				return
			}
			for _, r := range p.Items {
				if !yield(r, nil) {
					return
				}
			}
			if p.NextCursor == "" {
				return
			}
			o.Cursor = p.NextCursor
		}
	}
}

// Events returns the events with seq > after, at most limit (0: server default).
// A non-empty NextCursor is the seq to pass as after for the next page.
func (c *Client) Events(ctx context.Context, runID string, after int64, limit int) (Page[run.Event], error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p Page[run.Event]
	_, err := c.do(ctx, request{method: http.MethodGet, path: runPath(runID, "events"), query: q}, &p)
	return p, err
}

type leaseRequest struct {
	Owner string `json:"owner"`
	TTLMs int64  `json:"ttl_ms,omitempty"`
	Epoch int64  `json:"epoch,omitempty"`
}

// AcquireLease takes the run's lease for owner (or extends it if owner holds it).
// The returned lease carries the epoch, the fencing token commits must present.
func (c *Client) AcquireLease(ctx context.Context, runID, owner string, ttl time.Duration) (run.Lease, error) {
	var l run.Lease
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "lease"),
		body: leaseRequest{Owner: owner, TTLMs: ttl.Milliseconds()}}, &l)
	return l, err
}

// RenewLease extends a held lease; it fails with lease-lost if the lease
// expired or changed hands since.
func (c *Client) RenewLease(ctx context.Context, runID string, l run.Lease, ttl time.Duration) (run.Lease, error) {
	var out run.Lease
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "lease"),
		body: leaseRequest{Owner: l.Owner, Epoch: l.Epoch, TTLMs: ttl.Milliseconds()}}, &out)
	return out, err
}

// ReleaseLease gives the lease back.
func (c *Client) ReleaseLease(ctx context.Context, runID string, l run.Lease) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: runPath(runID, "lease"),
		body: struct {
			Lease run.Lease `json:"lease"`
		}{l}}, nil)
	return err
}

// commitJSON writes a commit request as encoding/json would (omitempty
// omits zero numbers too), without HTML escaping.
var commitJSON = jsonv2.JoinOptions(jsonv1.OmitEmptyWithLegacySemantics(true), jsontext.EscapeForHTML(false))

// CommitResult is the run as committed and the event appended.
type CommitResult struct {
	Run   run.Run   `json:"run"`
	Event run.Event `json:"event"`
}

// Commit appends one event and replaces the state, guarded by
// req.ExpectedRevision (also sent as If-Match) and req.Lease. A stale
// revision is kind revision-conflict, a lost lease lease-lost; both match
// run.ErrRevisionConflict / run.ErrLeaseLost with errors.Is.
func (c *Client) Commit(ctx context.Context, runID string, req run.CommitRequest, opts ...CallOption) (CommitResult, error) {
	r := request{method: http.MethodPost, path: runPath(runID, "commit"), body: req}
	// Commits are the hot path: encoded and decoded with json v2, which
	// does not HTML-escape (a state full of '<' and '&' costs what plain
	// text does) and is faster than encoding/json.
	if b, err := jsonv2.Marshal(&req, commitJSON); err == nil {
		r.rawBody = b
	}
	if req.ExpectedRevision > 0 {
		r.header = revisionHeader("If-Match", req.ExpectedRevision)
	}
	var out CommitResult
	r.decode = func(raw []byte) bool { return jsonv2.Unmarshal(raw, &out) == nil }
	_, err := c.do(ctx, r, &out, opts...)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.ExpectedRevision == 0 {
			ce.ExpectedRevision = req.ExpectedRevision
		}
		return CommitResult{}, err
	}
	return out, nil
}

// CreateCheckpoint labels a revision of the run (0: the current one).
func (c *Client) CreateCheckpoint(ctx context.Context, runID, label string, revision int64) (run.Checkpoint, error) {
	var cp run.Checkpoint
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "checkpoints"),
		body: struct {
			Label    string `json:"label"`
			Revision int64  `json:"revision,omitempty"`
		}{label, revision}}, &cp)
	return cp, err
}

// Checkpoints lists the run's checkpoints.
func (c *Client) Checkpoints(ctx context.Context, runID string) ([]run.Checkpoint, error) {
	var all []run.Checkpoint
	cursor := ""
	for {
		p, err := c.ListCheckpoints(ctx, runID, cursor, run.MaxListLimit)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all, nil
		}
		cursor = p.NextCursor
	}
}

// ListCheckpoints returns one page of a run's checkpoints, by revision then
// label, from cursor ("" for the first page); limit 0 is the server's default.
func (c *Client) ListCheckpoints(ctx context.Context, runID, cursor string, limit int) (Page[run.Checkpoint], error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p Page[run.Checkpoint]
	_, err := c.do(ctx, request{method: http.MethodGet, path: runPath(runID, "checkpoints"), query: q}, &p)
	return p, err
}

// Fork creates a new run from a past revision or checkpoint of runID.
// With IdempotencyKey, a retried fork answers the run the first one made.
func (c *Client) Fork(ctx context.Context, runID string, req run.ForkRequest, opts ...CallOption) (run.Run, error) {
	var r run.Run
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "fork"), body: req}, &r, opts...)
	return r, err
}
