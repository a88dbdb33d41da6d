package refund

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Order is what the payments service knows about an order.
type Order struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Customer    string `json:"customer"`
}

// RefundRequest is the body of POST /refunds.
type RefundRequest struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount"`
	Currency    string `json:"currency"`
}

// Refund is one applied refund, as the ledger keeps it.
type Refund struct {
	RefundID       string    `json:"refund_id"`
	OrderID        string    `json:"order_id"`
	IdempotencyKey string    `json:"idempotency_key"`
	AmountCents    int64     `json:"amount"`
	Currency       string    `json:"currency"`
	AppliedAt      time.Time `json:"applied_at"`
}

// Payments is the fake payments service. Every applied refund is appended to
// the ledger file and fsynced before it is acknowledged, so a refund the
// service answered survives its own crash; a key seen before returns the
// refund it created, never a second one.
type Payments struct {
	mu            sync.Mutex
	ledger        *os.File
	byKey         map[string]Refund
	order         []string
	authoritative bool
}

// OpenPayments loads (or creates) the ledger file.
func OpenPayments(ledgerPath string) (*Payments, error) {
	f, err := os.OpenFile(ledgerPath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", ledgerPath, err)
	}
	p := &Payments{ledger: f, byKey: map[string]Refund{}, authoritative: true}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r Refund
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A torn last line (crash mid-write) was never acknowledged: skip it.
			continue
		}
		if _, dup := p.byKey[r.IdempotencyKey]; !dup {
			p.order = append(p.order, r.IdempotencyKey)
		}
		p.byKey[r.IdempotencyKey] = r
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("read ledger %s: %w", ledgerPath, err)
	}
	return p, nil
}

// Close closes the ledger file.
func (p *Payments) Close() error { return p.ledger.Close() }

// SetAuthoritative switches the lookup by key between authoritative answers
// and 503 "cannot tell" (as when the provider's search index lags).
func (p *Payments) SetAuthoritative(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.authoritative = on
}

// OrderFor makes the deterministic order behind an id like "order-0042".
func OrderFor(orderID string) (Order, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(orderID, "order-"))
	if err != nil || n <= 0 || !strings.HasPrefix(orderID, "order-") {
		return Order{}, false
	}
	return Order{OrderID: orderID, AmountCents: 1000 + int64(n*7919%20000), Currency: "EUR", Customer: fmt.Sprintf("cust-%d", n%97)}, true
}

// Handler serves the payments API.
func (p *Payments) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		o, ok := OrderFor(r.PathValue("id"))
		if !ok {
			writeJSON(w, 404, map[string]string{"error": "no such order"})
			return
		}
		writeJSON(w, 200, o)
	})
	mux.HandleFunc("POST /refunds", p.createRefund)
	mux.HandleFunc("GET /refunds", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		items := make([]Refund, 0, len(p.order))
		for _, k := range p.order {
			items = append(items, p.byKey[k])
		}
		p.mu.Unlock()
		writeJSON(w, 200, map[string]any{"items": items})
	})
	mux.HandleFunc("GET /refunds/{key}", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		auth := p.authoritative
		ref, ok := p.byKey[r.PathValue("key")]
		p.mu.Unlock()
		switch {
		case !auth:
			writeJSON(w, 503, map[string]any{"error": "lookup is not authoritative right now"})
		case ok:
			writeJSON(w, 200, ref)
		default:
			writeJSON(w, 404, map[string]any{"applied": false})
		}
	})
	mux.HandleFunc("POST /admin/authoritative", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Authoritative bool `json:"authoritative"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&body); err != nil {
			writeJSON(w, 400, map[string]string{"error": err.Error()})
			return
		}
		p.SetAuthoritative(body.Authoritative)
		writeJSON(w, 200, body)
	})
	return mux
}

func (p *Payments) createRefund(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 200 {
		writeJSON(w, 400, map[string]string{"error": "Idempotency-Key header is required"})
		return
	}
	var req RefundRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, 400, map[string]string{"error": "bad body: " + err.Error()})
		return
	}
	o, ok := OrderFor(req.OrderID)
	if !ok {
		writeJSON(w, 404, map[string]string{"error": "no such order"})
		return
	}
	if req.AmountCents <= 0 || req.AmountCents > o.AmountCents || req.Currency != o.Currency {
		writeJSON(w, 422, map[string]string{"error": "amount or currency does not fit the order"})
		return
	}
	// The request is applied whether or not the caller is still there: a
	// caller that died after sending must find it applied by its key.
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.byKey[key]; ok {
		if prev.OrderID != req.OrderID || prev.AmountCents != req.AmountCents || prev.Currency != req.Currency {
			writeJSON(w, 422, map[string]string{"error": "idempotency key reused with a different request"})
			return
		}
		writeJSON(w, 200, prev)
		return
	}
	ref := Refund{
		RefundID: fmt.Sprintf("rf_%06d", len(p.order)+1), OrderID: req.OrderID, IdempotencyKey: key,
		AmountCents: req.AmountCents, Currency: req.Currency, AppliedAt: time.Now().UTC(),
	}
	line, _ := json.Marshal(ref)
	if err := p.appendLine(line); err != nil {
		writeJSON(w, 500, map[string]string{"error": "ledger write failed: " + err.Error()})
		return
	}
	p.byKey[key] = ref
	p.order = append(p.order, key)
	writeJSON(w, 201, ref)
}

func (p *Payments) appendLine(line []byte) error {
	if _, err := p.ledger.Write(append(bytes.TrimSpace(line), '\n')); err != nil {
		return err
	}
	return p.ledger.Sync()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrNotFound is a 404 from the payments service.
var ErrNotFound = errors.New("not found")
