package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one Memento server. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	hc        *http.Client
	apiKey    string
	userAgent string
}

// defaultTransport is http.DefaultTransport with room to keep a connection
// per concurrent caller: its default of 2 idle connections per host makes
// a busy client close and reopen connections on most calls.
var defaultTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}()

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends the key as a Bearer token on every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient replaces the default http.Client (30s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:7700).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: server URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q must be http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, hc: &http.Client{Timeout: 30 * time.Second, Transport: defaultTransport}, userAgent: "memento-go-client/1"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL returns the server URL the client talks to.
func (c *Client) BaseURL() string { return c.base.String() }

// CallOption adjusts one request.
type CallOption func(*request)

// IdempotencyKey makes a create safe to retry: the server answers a repeat
// with the same key and body with the resource created the first time.
func IdempotencyKey(key string) CallOption {
	return func(r *request) { r.header.Set("Idempotency-Key", key) }
}

// ReturnMinimal asks a commit to answer without echoing the state
// (Prefer: return=minimal, RFC 7240): the CommitResult's Run then holds
// only RunID, StateRevision, Status and NextStep, its Event only Seq.
func ReturnMinimal() CallOption {
	return func(r *request) { r.header.Set("Prefer", "return=minimal") }
}

// Header sets an extra request header.
func Header(name, value string) CallOption {
	return func(r *request) { r.header.Set(name, value) }
}

// request is one call, built by the typed methods and the domain files.
type request struct {
	method string
	path   string // already escaped
	query  url.Values
	body   any
	// rawBody, when set, is body already encoded as JSON.
	rawBody []byte
	header  http.Header
	// decode, when set, tries to decode a 2xx body itself first; false
	// leaves it to json.Unmarshal.
	decode func(raw []byte) bool
}

// itemPath is the path of one item of a collection, /v1/<collection>/<id>,
// followed by rest (fixed segments, not escaped).
func itemPath(collection, id string, rest ...string) string {
	if len(rest) == 1 { // the usual case, in one concatenation
		return "/v1/" + collection + "/" + url.PathEscape(id) + "/" + rest[0]
	}
	p := "/v1/" + collection + "/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// revisionHeader is a header (If-Match, If-None-Match) naming the ETag of a revision.
func revisionHeader(name string, rev int64) http.Header {
	h := http.Header{}
	h.Set(name, `"`+strconv.FormatInt(rev, 10)+`"`)
	return h
}

// Response is what do reports besides the decoded body.
type Response struct {
	Status int
	Header http.Header
}

// do sends a request and decodes a 2xx JSON body into out (if out is not
// nil); any other status becomes an *Error.
func (c *Client) do(ctx context.Context, req request, out any, opts ...CallOption) (Response, error) {
	if req.header == nil && len(opts) > 0 {
		req.header = http.Header{}
	}
	for _, o := range opts {
		o(&req)
	}
	// req.path is already escaped; Path must hold its decoded form, or
	// URL.String would escape the escapes again.
	decoded, err := url.PathUnescape(req.path)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: bad path: %w", req.method, req.path, err)
	}
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + decoded
	u.RawPath = strings.TrimRight(c.base.EscapedPath(), "/") + req.path
	if len(req.query) > 0 {
		u.RawQuery = req.query.Encode()
	}
	var body io.Reader
	if req.rawBody != nil {
		body = bytes.NewReader(req.rawBody)
	} else if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return Response{}, fmt.Errorf("%s %s: encode body: %w", req.method, req.path, err)
		}
		body = bytes.NewReader(b)
	}
	hasBody := body != nil
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	if req.header != nil {
		// Built for this call alone, the call's header map can be the request's.
		hr.Header = req.header
	}
	if hasBody {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json, application/problem+json")
	if c.userAgent != "" {
		hr.Header.Set("User-Agent", c.userAgent)
	}
	if c.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	defer resp.Body.Close()
	// Bound what we read: a misbehaving server cannot exhaust memory.
	const maxResponse = 64 << 20
	var buf []byte
	if n := resp.ContentLength; n > 0 && n < maxResponse {
		// Read to EOF without growing; a length alone reserves at most 64 KiB.
		buf = make([]byte, 0, min(n+1, 64<<10))
	}
	raw, err := readAll(io.LimitReader(resp.Body, maxResponse), buf)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read response: %w", req.method, req.path, err)
	}
	r := Response{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if resp.StatusCode == http.StatusNotModified {
			return r, nil
		}
		return r, decodeProblem(req.method, req.path, resp, raw)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if req.decode != nil && req.decode(raw) {
			return r, nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return r, fmt.Errorf("%s %s: decode %d response: %w", req.method, req.path, resp.StatusCode, err)
		}
	}
	return r, nil
}

// readAll is io.ReadAll into buf, which may come presized.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf) == 0 {
		buf = make([]byte, 0, 512)
	}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// Health checks /healthz.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/healthz"}, nil)
	return err
}

// Ready checks /readyz: every backend of the server answers.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/readyz"}, nil)
	return err
}

// Page is one page of a list and the cursor of the next ("" on the last).
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}
