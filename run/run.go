package run

import (
	"encoding/json"
	"time"
)

// Status is the lifecycle state of a run.
type Status string

// The statuses a run moves through; see transitions.go for the allowed moves.
const (
	StatusRunning   Status = "running"
	StatusSuspended Status = "suspended"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Run is the materialized record of one workflow execution.
// StateRevision always equals the seq of the run's last event.
type Run struct {
	TenantID           string          `json:"tenant_id"`
	RunID              string          `json:"run_id"`
	WorkflowName       string          `json:"workflow_name"`
	WorkflowVersion    string          `json:"workflow_version"`
	StateSchemaVersion int             `json:"state_schema_version"`
	Status             Status          `json:"status"`
	StatusReason       string          `json:"status_reason,omitempty"`
	NextStep           string          `json:"next_step"`
	State              json.RawMessage `json:"state"`
	StateRevision      int64           `json:"state_revision"`
	LeaseOwner         string          `json:"lease_owner,omitempty"`
	LeaseEpoch         int64           `json:"lease_epoch"`
	LeaseExpiresAt     *time.Time      `json:"lease_expires_at,omitempty"`
	ParentRunID        string          `json:"parent_run_id,omitempty"`
	ParentRevision     int64           `json:"parent_revision,omitempty"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	// Chain is the hash chain value of the last event (see ChainNext).
	Chain string `json:"-"`
	// VerifiedSeq is the last seq a resume verified the chain through.
	VerifiedSeq int64 `json:"-"`
	// Spent is the running total of the "spend" objects of the event
	// payloads (see SpendOf); nil when unknown (runs from before totals were kept).
	Spent map[string]int64 `json:"-"`
}

// Event is one entry of a run's append-only log. Besides what happened it
// keeps what its commit changed (a snapshot or a delta, see doc.go), so any
// revision can be rebuilt exactly.
type Event struct {
	Seq                int64           `json:"seq"`
	EventType          string          `json:"event_type"`
	StepID             string          `json:"step_id,omitempty"`
	Attempt            int             `json:"attempt"`
	Payload            json.RawMessage `json:"payload"`
	CreatedAt          time.Time       `json:"created_at"`
	State              json.RawMessage `json:"-"`
	NextStep           string          `json:"-"`
	Status             Status          `json:"-"`
	StateSchemaVersion int             `json:"-"`
	// Change is the event's stored change exactly as the store returns it:
	// the whole state when Snapshot, else a delta (see ApplyDelta).
	Change   json.RawMessage `json:"-"`
	Snapshot bool            `json:"-"`
	// Chain is ChainNext(chain of seq-1, this event).
	Chain string `json:"-"`
}

// Lease is the right to commit to a run. Epoch is the fencing token: it grows
// every time the lease changes hands, so a stale owner is recognised.
type Lease struct {
	Owner     string    `json:"owner"`
	Epoch     int64     `json:"epoch"`
	ExpiresAt time.Time `json:"expires_at"`
	// Revision is the run's state revision when AcquireLease answered, so a
	// worker that knows the run at that revision needs no second read.
	// Only AcquireLease sets it; it is not part of the wire format.
	Revision int64 `json:"-"`
}

// Checkpoint labels one revision of a run.
type Checkpoint struct {
	Label     string    `json:"label"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
}

// EventInput is what a caller appends.
type EventInput struct {
	EventType string          `json:"event_type"`
	StepID    string          `json:"step_id,omitempty"`
	Attempt   int             `json:"attempt"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

// CommitRequest appends one event and replaces the materialized state in one
// transaction, if the revision and the lease both still hold.
type CommitRequest struct {
	ExpectedRevision int64           `json:"expected_revision"`
	Lease            Lease           `json:"lease"`
	Event            EventInput      `json:"event"`
	State            json.RawMessage `json:"state"`
	NextStep         string          `json:"next_step"`
	Status           Status          `json:"status,omitempty"`
	StatusReason     string          `json:"status_reason,omitempty"`
	// StateSchemaVersion, when non-zero, changes the run's schema version (migrations).
	StateSchemaVersion int `json:"state_schema_version,omitempty"`
	// VerifiedSeq is set by the resume verifier only (never over HTTP).
	VerifiedSeq int64 `json:"-"`
}

// StoreCommit is a validated commit as handed to a Store.
type StoreCommit struct {
	ExpectedRevision   int64
	Owner              string
	Epoch              int64
	Event              EventInput
	State              json.RawMessage
	NextStep           string
	Status             Status
	StatusReason       string
	StateSchemaVersion int
	// FromStatuses are the statuses the run may be in for this commit to apply.
	FromStatuses []Status
	// Spend, when not nil, is added to the run's running totals (SpendOf the payload).
	Spend map[string]int64
	// VerifiedSeq, when non-zero, records that the chain was verified through that seq.
	VerifiedSeq int64
	// Schema is the registered schema the state was validated against (zero: none).
	Schema SchemaCheck
}

// CreateRequest describes a new run.
type CreateRequest struct {
	RunID              string          `json:"run_id,omitempty"`
	WorkflowName       string          `json:"workflow_name"`
	WorkflowVersion    string          `json:"workflow_version"`
	StateSchemaVersion int             `json:"state_schema_version"`
	State              json.RawMessage `json:"state,omitempty"`
	NextStep           string          `json:"next_step,omitempty"`
}

// NewRun is a validated run handed to a Store for creation, with the first
// event ("run.created", seq 1) the store writes beside it.
type NewRun struct {
	Run            Run
	IdempotencyKey string
	RequestDigest  string
	// Schema is what the Service validated the state against (zero: no
	// registered schema it knows of); CreateRun enforces it as Commit does.
	Schema SchemaCheck
	// LeaseOwner, when set, makes CreateRun create the run with its lease
	// held by that owner at epoch 1 for LeaseTTL (by the store's clock), in
	// the same statement: what AcquireLease right after would do, without
	// its round trip. Fork ignores both.
	LeaseOwner string
	LeaseTTL   time.Duration
}

// ListFilter selects runs; After* is the keyset position decoded from a cursor.
type ListFilter struct {
	Status       Status
	WorkflowName string
	AfterCreated time.Time
	AfterRunID   string
	Limit        int
}

// WakeNow is the At of an immediate wake-up: due at once, whatever the clock.
var WakeNow = time.Unix(0, 0).UTC()

// Wakeup tells that something a suspended run may wait for happened (At is
// WakeNow) or will be due at At (an approval expiring). N counts how many
// times it was written.
type Wakeup struct {
	At time.Time
	N  int64
}

// RecoveryQuery selects a page of Store.ListRecoverable.
type RecoveryQuery struct {
	// Now is the clock timed wake-ups are due by: the clock the operation
	// ledger sets approval expiries with (zero: the current time).
	Now time.Time
	// ControlKey names the state member returned as Recoverable.Control.
	ControlKey string
	AfterRunID string
	Limit      int
}

// Recoverable is what a recovery loop needs to know of one active run.
type Recoverable struct {
	TenantID       string
	RunID          string
	WorkflowName   string
	Status         Status
	LeaseExpiresAt *time.Time
	// StatusReason, Control and Wakeups are set for suspended runs only.
	StatusReason string
	Control      json.RawMessage
	Wakeups      []Wakeup
}

// Event types the engine itself writes.
const (
	EventRunCreated    = "run.created"
	EventStateMigrated = "state.migrated"
)
