package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/mementohq/memento/resume"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/toolop"
)

// ResumeResult is the answer of a successful resume.
type ResumeResult struct {
	Run    run.Run        `json:"run"`
	Lease  run.Lease      `json:"lease"`
	Checks []resume.Check `json:"checks"`
}

// ResumeRun verifies a run and takes its lease for owner. A refusal is an
// *Error of kind resume-refused (errors.Is resume.ErrRefused) whose Detail
// names the failed check; the run is left as it was (this call does not
// ask the server to suspend it). expectedRevision 0 skips the revision
// check.
func (c *Client) ResumeRun(ctx context.Context, runID, owner string, ttl time.Duration, expectedRevision int64) (ResumeResult, error) {
	var res ResumeResult
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "resume"), body: map[string]any{
		"owner": owner, "ttl_ms": ttl.Milliseconds(), "expected_revision": expectedRevision,
	}}, &res)
	return res, err
}

// PrepareOperation prepares an operation of a run once; created is false
// when it existed with the same request digest.
func (c *Client) PrepareOperation(ctx context.Context, runID string, req PrepareOperation) (op toolop.Operation, created bool, err error) {
	resp, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "operations"), body: req}, &op)
	if err != nil {
		return toolop.Operation{}, false, err
	}
	return op, resp.Status == http.StatusCreated, nil
}

// PrepareOperation names an operation: by OperationID, or by BusinessKey
// from which the server derives the stable id.
type PrepareOperation struct {
	OperationID   string `json:"operation_id,omitempty"`
	BusinessKey   string `json:"business_key,omitempty"`
	StepID        string `json:"step_id"`
	ToolName      string `json:"tool_name"`
	RequestDigest string `json:"request_digest"`
}

// GetOperation returns an operation.
func (c *Client) GetOperation(ctx context.Context, operationID string) (toolop.Operation, error) {
	var op toolop.Operation
	_, err := c.do(ctx, request{method: http.MethodGet, path: itemPath("operations", operationID)}, &op)
	return op, err
}

// Operations lists a run's operations.
func (c *Client) Operations(ctx context.Context, runID string) ([]toolop.Operation, error) {
	var p Page[toolop.Operation]
	_, err := c.do(ctx, request{method: http.MethodGet, path: runPath(runID, "operations")}, &p)
	return p.Items, err
}

// OperationUpdate carries what a transition records.
type OperationUpdate struct {
	ExternalRef string `json:"external_ref,omitempty"`
	Result      any    `json:"result,omitempty"`
	Error       string `json:"error,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
	By          string `json:"by,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// MarkOperation moves an operation: transition is started, succeeded,
// failed, unknown, or resolve (an operator settling an in-doubt operation).
func (c *Client) MarkOperation(ctx context.Context, operationID, transition string, u OperationUpdate) (toolop.Operation, error) {
	var op toolop.Operation
	_, err := c.do(ctx, request{method: http.MethodPost, path: itemPath("operations", operationID, url.PathEscape(transition)), body: u}, &op)
	return op, err
}

// Approval is an approval as the server shows it.
type Approval struct {
	toolop.Approval
	EffectiveStatus string `json:"effective_status"`
}

// RequestApproval asks for an approval of a step's request digest.
func (c *Client) RequestApproval(ctx context.Context, runID, stepID, requestDigest string, summary any, ttl time.Duration) (Approval, error) {
	var a Approval
	_, err := c.do(ctx, request{method: http.MethodPost, path: runPath(runID, "approvals"), body: map[string]any{
		"step_id": stepID, "request_digest": requestDigest, "summary": summary, "ttl_ms": ttl.Milliseconds(),
	}}, &a)
	return a, err
}

// Approvals lists a run's approvals.
func (c *Client) Approvals(ctx context.Context, runID string) ([]Approval, error) {
	var p Page[Approval]
	_, err := c.do(ctx, request{method: http.MethodGet, path: runPath(runID, "approvals")}, &p)
	return p.Items, err
}

// GetApproval returns an approval.
func (c *Client) GetApproval(ctx context.Context, approvalID string) (Approval, error) {
	var a Approval
	_, err := c.do(ctx, request{method: http.MethodGet, path: itemPath("approvals", approvalID)}, &a)
	return a, err
}

// DecideApproval approves or rejects (needs the admin role when keys are configured).
func (c *Client) DecideApproval(ctx context.Context, approvalID string, approve bool, by, reason string) (Approval, error) {
	var a Approval
	_, err := c.do(ctx, request{method: http.MethodPost, path: itemPath("approvals", approvalID, "decision"), body: map[string]any{
		"approve": approve, "by": by, "reason": reason,
	}}, &a)
	return a, err
}
