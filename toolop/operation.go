package toolop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/mementohq/memento/run"
)

// Status is where an operation stands.
type Status string

// The statuses of an operation. Succeeded and failed are final.
const (
	StatusPrepared  Status = "prepared"
	StatusStarted   Status = "started"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusUnknown   Status = "unknown"
)

// ValidStatus reports whether s is a known operation status.
func ValidStatus(s Status) bool {
	switch s {
	case StatusPrepared, StatusStarted, StatusSucceeded, StatusFailed, StatusUnknown:
		return true
	}
	return false
}

// Final reports whether nothing can follow s.
func (s Status) Final() bool { return s == StatusSucceeded || s == StatusFailed }

// InDoubt reports whether the request may have reached the external system
// without us knowing the outcome: such an operation is reconciled before any resend.
func (s Status) InDoubt() bool { return s == StatusStarted || s == StatusUnknown }

// Operation is one side effect in the ledger. It is sent to the external
// system under its IdempotencyKey, so a resend is recognised there.
type Operation struct {
	TenantID      string          `json:"tenant_id"`
	OperationID   string          `json:"operation_id"`
	RunID         string          `json:"run_id"`
	StepID        string          `json:"step_id"`
	ToolName      string          `json:"tool_name"`
	RequestDigest string          `json:"request_digest"`
	Status        Status          `json:"status"`
	Attempts      int             `json:"attempts"`
	ExternalRef   string          `json:"external_ref,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         string          `json:"error,omitempty"`
	// Resolution says who settled an in-doubt operation and how
	// ("reconciled: applied", "operator alice: confirmed by phone").
	Resolution string `json:"resolution,omitempty"`
	// Key is the idempotency key the operation is sent under, set once at
	// Prepare (SendKey); empty for one prepared before keys were stored,
	// whose key is its id. Read it with IdempotencyKey.
	Key       string    `json:"idempotency_key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// IdempotencyKey is the key under which the external system must dedupe the
// request, and under which it is looked up to reconcile.
func (o Operation) IdempotencyKey() string {
	if o.Key != "" {
		return o.Key
	}
	return o.OperationID
}

// SendKey derives the idempotency key of a new operation from its tenant
// and id: operation ids are unique per tenant only (two tenants may both
// have a run order-42), and an external system shared by tenants must not
// take one tenant's request for a replay of another's.
func SendKey(tenantID, operationID string) string { return derive("idk_", tenantID, operationID) }

// Transition is a validated status change handed to a Store.
type Transition struct {
	// From lists the statuses the operation may be in for the change to apply.
	From []Status
	To   Status
	// ExternalRef and Result replace the stored ones when non-empty.
	ExternalRef string
	Result      json.RawMessage
	// Error replaces the stored one (empty clears it: the last error is kept
	// only while it is current). Resolution replaces the stored one when
	// non-empty, so how an operation was last settled stays on record.
	Error      string
	Resolution string
	// CountAttempt adds one to Attempts (a send is about to happen).
	CountAttempt bool
	At           time.Time
}

// transitions lists the moves the ledger allows. Prepared comes back from
// started/unknown only when the external system says authoritatively that the
// request was not applied: then resending with the same key is safe.
var transitions = map[Status][]Status{
	StatusPrepared:  {StatusStarted},
	StatusStarted:   {StatusSucceeded, StatusFailed, StatusUnknown, StatusPrepared},
	StatusUnknown:   {StatusSucceeded, StatusFailed, StatusPrepared},
	StatusSucceeded: nil,
	StatusFailed:    nil,
}

// CanTransition reports whether the ledger allows from -> to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// allowedFrom lists the statuses from which to can be reached.
func allowedFrom(to Status) []Status {
	var out []Status
	for _, from := range []Status{StatusPrepared, StatusStarted, StatusUnknown, StatusSucceeded, StatusFailed} {
		if CanTransition(from, to) {
			out = append(out, from)
		}
	}
	return out
}

// OperationID derives the stable id of an operation from the run and a
// business key (for example "refund:order-42"), so a retry or a resume of the
// same run asks for the same operation and never creates a second one.
func OperationID(runID, businessKey string) string {
	return derive("op_", runID, businessKey)
}

// ApprovalID derives a stable approval id from the run, the step, the request
// digest and a generation number (a new approval after one expired or was
// rejected gets the next generation).
func ApprovalID(runID, stepID, requestDigest string, generation int) string {
	return derive("apr_", runID, stepID, requestDigest, strconv.Itoa(generation))
}

// RequestDigest is the canonical digest of a tool request: equal requests,
// whatever their key order or spacing, have equal digests.
func RequestDigest(request any) (string, error) {
	b, err := json.Marshal(request)
	if err != nil {
		return "", err
	}
	return run.Digest(b), nil
}

func derive(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return prefix + hex.EncodeToString(h.Sum(nil)[:16])
}
