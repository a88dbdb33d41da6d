package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout          = 60 * time.Second
	DefaultMaxRetries       = 2
	DefaultBackoff          = 500 * time.Millisecond
	DefaultMaxBackoff       = 10 * time.Second
	DefaultMaxResponseBytes = 64 << 20
)

// Config is the connection to one OpenAI-compatible server.
type Config struct {
	// BaseURL is the server root, e.g. "https://api.openai.com" or
	// "http://127.0.0.1:11434"; a trailing "/v1" is accepted and dropped.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// Timeout bounds every attempt (connect, send, full answer read).
	Timeout time.Duration
	// MaxRetries is how many times a 429 or 5xx answer is retried (0 means
	// DefaultMaxRetries; negative disables retries). Nothing else is retried:
	// a timeout may have cost tokens and left work running on the server.
	MaxRetries int
	// Backoff is the wait before the first retry; it doubles per retry with
	// jitter, and a Retry-After header is honoured, both capped at MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// MaxResponseBytes bounds an answer body; a longer one is an error.
	MaxResponseBytes int64
	// HTTPClient is used for the requests (default: a new client without its
	// own timeout, since Timeout bounds each attempt through the context).
	HTTPClient *http.Client
}

// Client talks to one server. It is safe for concurrent use.
type Client struct {
	base string
	cfg  Config
	hc   *http.Client
}

// New checks the configuration and returns a client.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	base = strings.TrimSuffix(base, "/v1")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q: want http(s)://host[:port][/path]", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: base, cfg: cfg, hc: hc}, nil
}

// APIError is an error answer of the server: its HTTP status and the
// provider's error message (OpenAI's {"error":{message,type,code}} or the
// {"error":"..."} of Ollama and others).
type APIError struct {
	StatusCode int
	Message    string
	Type       string
	Code       string
	// Attempts is how many requests were sent before giving up.
	Attempts int
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("model provider: HTTP %d: %s", e.StatusCode, msg)
}

// Retryable reports whether the status is one that is retried (429, 5xx).
func (e *APIError) Retryable() bool { return retryable(e.StatusCode) }

// ErrMalformed is wrapped by every error about an answer that is not the
// expected JSON or breaks the protocol (wrong vector count or dimension).
var ErrMalformed = errors.New("malformed answer from model provider")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func retryable(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// post sends body as JSON to path and decodes a 2xx answer into out, retrying
// 429/5xx answers with backoff.
func (c *Client) post(ctx context.Context, path string, body any, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("openai: encode request: %w", err)
	}
	backoff := c.cfg.Backoff
	for attempt := 1; ; attempt++ {
		status, respBody, header, err := c.once(ctx, path, payload)
		if err != nil {
			return err
		}
		if status >= 200 && status < 300 {
			if err := json.Unmarshal(respBody, out); err != nil {
				return malformed("%s: %v", path, err)
			}
			return nil
		}
		apiErr := parseError(status, respBody)
		apiErr.Attempts = attempt
		if !retryable(status) || attempt > c.cfg.MaxRetries {
			return apiErr
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if ra := retryAfter(header.Get("Retry-After")); ra > 0 {
			wait = ra
		}
		wait = min(wait, c.cfg.MaxBackoff)
		backoff = min(backoff*2, c.cfg.MaxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("model provider %s: %w (after %v)", path, ctx.Err(), apiErr)
		case <-t.C:
		}
	}
}

// once is one bounded attempt: it returns the status and the whole body.
func (c *Client) once(ctx context.Context, path string, payload []byte) (int, []byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("openai: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("model provider %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("model provider %s: read answer: %w", path, err)
	}
	if int64(len(body)) > c.cfg.MaxResponseBytes {
		return 0, nil, nil, malformed("%s: answer larger than %d bytes", path, c.cfg.MaxResponseBytes)
	}
	return resp.StatusCode, body, resp.Header, nil
}

func parseError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  string          `json:"detail"`
	}
	if json.Unmarshal(body, &env) != nil {
		e.Message = snippet(body)
		return e
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	var s string
	switch {
	case len(env.Error) > 0 && json.Unmarshal(env.Error, &obj) == nil && obj.Message != "":
		e.Message, e.Type = obj.Message, obj.Type
		if obj.Code != nil {
			e.Code = fmt.Sprint(obj.Code)
		}
	case len(env.Error) > 0 && json.Unmarshal(env.Error, &s) == nil:
		e.Message = s
	case env.Message != "":
		e.Message = env.Message
	case env.Detail != "":
		e.Message = env.Detail
	default:
		e.Message = snippet(body)
	}
	return e
}

// snippet is the start of a non-JSON error body, for the message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}
