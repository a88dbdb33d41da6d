package refund

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
)

// Client talks to the payments service.
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// NewClient returns a client with a bounded timeout.
func NewClient(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// statusError is a non-2xx answer.
type statusError struct {
	Code int
	Body string
}

func (e *statusError) Error() string { return fmt.Sprintf("payments answered %d: %s", e.Code, e.Body) }

func (c *Client) do(ctx context.Context, method, path string, body any, header http.Header, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode payments answer: %w", err)
		}
	}
	return nil
}

// Order reads an order.
func (c *Client) Order(ctx context.Context, orderID string) (Order, error) {
	var o Order
	if err := c.do(ctx, "GET", "/orders/"+url.PathEscape(orderID), nil, nil, &o); err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", orderID, err)
	}
	return o, nil
}

// Refund sends a refund with its idempotency key. A 4xx answer is a
// definitive refusal (workflow.Rejected); anything else that is not a
// success may or may not have been applied. The request goes over its own
// connection so that the after_send fault point can pause exactly between
// writing the request and reading the answer (tests kill the worker there).
func (c *Client) Refund(ctx context.Context, runID, key string, body RefundRequest) (Refund, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Refund{}, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.BaseURL+"/refunds", bytes.NewReader(b))
	if err != nil {
		return Refund{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Close = true
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		return Refund{}, fmt.Errorf("refund %s: %w", body.OrderID, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(c.HTTP.Timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if err := req.Write(conn); err != nil {
		return Refund{}, fmt.Errorf("refund %s: send: %w", body.OrderID, err)
	}
	workflow.At(ctx, workflow.FaultAfterSend, runID)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return Refund{}, fmt.Errorf("refund %s: read answer: %w", body.OrderID, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Refund{}, fmt.Errorf("refund %s: read answer: %w", body.OrderID, err)
	}
	if resp.StatusCode/100 == 4 {
		return Refund{}, workflow.Rejected(fmt.Errorf("refund %s: %w", body.OrderID, &statusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(rb))}))
	}
	if resp.StatusCode/100 != 2 {
		return Refund{}, fmt.Errorf("refund %s: %w", body.OrderID, &statusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(rb))})
	}
	var ref Refund
	if err := json.Unmarshal(rb, &ref); err != nil {
		return Refund{}, fmt.Errorf("refund %s: decode answer: %w", body.OrderID, err)
	}
	return ref, nil
}

// Lookup asks whether a refund with this idempotency key was applied:
// 200 applied, 404 not applied, anything else not authoritative.
func (c *Client) Lookup(ctx context.Context, key string) (toolop.LookupResult, error) {
	var ref Refund
	err := c.do(ctx, "GET", "/refunds/"+url.PathEscape(key), nil, nil, &ref)
	var se *statusError
	switch {
	case err == nil:
		b, _ := json.Marshal(ref)
		return toolop.LookupResult{Answer: toolop.Applied, ExternalRef: ref.RefundID, Result: b}, nil
	case errors.As(err, &se) && se.Code == 404:
		return toolop.LookupResult{Answer: toolop.NotApplied}, nil
	case errors.As(err, &se):
		return toolop.LookupResult{Answer: toolop.NotAuthoritative, Detail: se.Error()}, nil
	}
	return toolop.LookupResult{}, err
}

// Refunds lists every refund the service applied.
func (c *Client) Refunds(ctx context.Context) ([]Refund, error) {
	var out struct {
		Items []Refund `json:"items"`
	}
	if err := c.do(ctx, "GET", "/refunds", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list refunds: %w", err)
	}
	return out.Items, nil
}

// SetAuthoritative flips the service's lookup switch.
func (c *Client) SetAuthoritative(ctx context.Context, on bool) error {
	return c.do(ctx, "POST", "/admin/authoritative", map[string]bool{"authoritative": on}, nil, nil)
}
