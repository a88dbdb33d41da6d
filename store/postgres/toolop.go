package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mementohq/memento/toolop"
)

var _ toolop.Store = (*DB)(nil)

const opColumns = `tenant_id, operation_id, run_id, step_id, tool_name, request_digest, status,
	attempts, external_ref, result, error, resolution, created_at, updated_at`

func scanOperation(row pgx.Row) (toolop.Operation, error) {
	var op toolop.Operation
	var status string
	var result *string
	err := row.Scan(&op.TenantID, &op.OperationID, &op.RunID, &op.StepID, &op.ToolName, &op.RequestDigest,
		&status, &op.Attempts, &op.ExternalRef, &result, &op.Error, &op.Resolution, &op.CreatedAt, &op.UpdatedAt)
	if err != nil {
		return toolop.Operation{}, err
	}
	op.Status = toolop.Status(status)
	if result != nil {
		op.Result = json.RawMessage(*result)
	}
	op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	return op, nil
}

func nullableJSON(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// PrepareOperation inserts the operation unless its id exists.
func (db *DB) PrepareOperation(ctx context.Context, op toolop.Operation) (toolop.Operation, bool, error) {
	row := db.pool.QueryRow(ctx, `INSERT INTO tool_operations (`+opColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 0, '', NULL, '', '', $8, $8)
		ON CONFLICT (tenant_id, operation_id) DO NOTHING
		RETURNING `+opColumns,
		op.TenantID, op.OperationID, op.RunID, op.StepID, op.ToolName, op.RequestDigest, string(toolop.StatusPrepared), op.CreatedAt)
	got, err := scanOperation(row)
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return toolop.Operation{}, false, fmt.Errorf("insert operation: %w", err)
	}
	got, err = db.GetOperation(ctx, op.TenantID, op.OperationID)
	if err != nil {
		return toolop.Operation{}, false, err
	}
	return got, false, nil
}

// GetOperation reads one operation.
func (db *DB) GetOperation(ctx context.Context, tenantID, operationID string) (toolop.Operation, error) {
	op, err := scanOperation(db.pool.QueryRow(ctx, `SELECT `+opColumns+` FROM tool_operations
		WHERE tenant_id = $1 AND operation_id = $2`, tenantID, operationID))
	if errors.Is(err, pgx.ErrNoRows) {
		return toolop.Operation{}, fmt.Errorf("operation %s: %w", operationID, toolop.ErrNotFound)
	}
	if err != nil {
		return toolop.Operation{}, fmt.Errorf("read operation %s: %w", operationID, err)
	}
	return op, nil
}

// ListOperations returns a run's operations in creation order.
func (db *DB) ListOperations(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Operation, error) {
	where, args := pageWhere("operation_id", tenantID, runID, p)
	rows, err := db.pool.Query(ctx, `SELECT `+opColumns+` FROM tool_operations
		WHERE tenant_id = $1 AND run_id = $2`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	defer rows.Close()
	var out []toolop.Operation
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("list operations: %w", err)
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	return out, nil
}

// pageWhere is the keyset condition, order and limit of a page of a run's
// operations or approvals (id names the id column), with its arguments.
func pageWhere(id, tenantID, runID string, p toolop.Page) (string, []any) {
	args := []any{tenantID, runID}
	where := ""
	if p.AfterID != "" {
		args = append(args, p.AfterCreatedAt, p.AfterID)
		where = ` AND (created_at, ` + id + `) > ($3, $4)`
	}
	where += ` ORDER BY created_at, ` + id
	if p.Limit > 0 {
		args = append(args, p.Limit)
		where += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	return where, args
}

func statusStrings(ss []toolop.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// TransitionOperation changes the status if the current one is allowed.
func (db *DB) TransitionOperation(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	inc := 0
	if t.CountAttempt {
		inc = 1
	}
	op, err := scanOperation(db.pool.QueryRow(ctx, `UPDATE tool_operations SET
			status = $3,
			attempts = attempts + $4,
			external_ref = CASE WHEN $5 = '' THEN external_ref ELSE $5 END,
			result = COALESCE($6, result),
			error = $7,
			resolution = CASE WHEN $8 = '' THEN resolution ELSE $8 END,
			updated_at = $9
		WHERE tenant_id = $1 AND operation_id = $2 AND status = ANY($10)
		RETURNING `+opColumns,
		tenantID, operationID, string(t.To), inc, t.ExternalRef, nullableJSON(t.Result), t.Error, t.Resolution, t.At, statusStrings(t.From)))
	if err == nil {
		return op, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return toolop.Operation{}, fmt.Errorf("update operation %s: %w", operationID, err)
	}
	cur, err := db.GetOperation(ctx, tenantID, operationID)
	if err != nil {
		return toolop.Operation{}, err
	}
	return toolop.Operation{}, fmt.Errorf("%w: operation %s is %s, cannot become %s", toolop.ErrInvalidTransition, operationID, cur.Status, t.To)
}

const approvalColumns = `tenant_id, approval_id, run_id, step_id, request_digest, summary, status,
	expires_at, decided_by, reason, decided_at, created_at`

func scanApproval(row pgx.Row) (toolop.Approval, error) {
	var a toolop.Approval
	var status string
	var summary *string
	var decidedAt *time.Time
	err := row.Scan(&a.TenantID, &a.ApprovalID, &a.RunID, &a.StepID, &a.RequestDigest, &summary, &status,
		&a.ExpiresAt, &a.DecidedBy, &a.Reason, &decidedAt, &a.CreatedAt)
	if err != nil {
		return toolop.Approval{}, err
	}
	a.Status = toolop.ApprovalStatus(status)
	if summary != nil {
		a.Summary = json.RawMessage(*summary)
	}
	if decidedAt != nil {
		t := decidedAt.UTC()
		a.DecidedAt = &t
	}
	a.ExpiresAt, a.CreatedAt = a.ExpiresAt.UTC(), a.CreatedAt.UTC()
	return a, nil
}

// CreateApproval inserts a pending approval unless its id exists.
func (db *DB) CreateApproval(ctx context.Context, a toolop.Approval) (toolop.Approval, bool, error) {
	got, err := scanApproval(db.pool.QueryRow(ctx, `INSERT INTO approvals (`+approvalColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, '', '', NULL, $8)
		ON CONFLICT (tenant_id, approval_id) DO NOTHING
		RETURNING `+approvalColumns,
		a.TenantID, a.ApprovalID, a.RunID, a.StepID, a.RequestDigest, nullableJSON(a.Summary), a.ExpiresAt, a.CreatedAt))
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return toolop.Approval{}, false, fmt.Errorf("insert approval: %w", err)
	}
	got, err = db.GetApproval(ctx, a.TenantID, a.ApprovalID)
	if err != nil {
		return toolop.Approval{}, false, err
	}
	return got, false, nil
}

// GetApproval reads one approval.
func (db *DB) GetApproval(ctx context.Context, tenantID, approvalID string) (toolop.Approval, error) {
	a, err := scanApproval(db.pool.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant_id = $1 AND approval_id = $2`, tenantID, approvalID))
	if errors.Is(err, pgx.ErrNoRows) {
		return toolop.Approval{}, fmt.Errorf("approval %s: %w", approvalID, toolop.ErrApprovalNotFound)
	}
	if err != nil {
		return toolop.Approval{}, fmt.Errorf("read approval %s: %w", approvalID, err)
	}
	return a, nil
}

// ListApprovals returns a run's approvals in creation order.
func (db *DB) ListApprovals(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Approval, error) {
	where, args := pageWhere("approval_id", tenantID, runID, p)
	rows, err := db.pool.Query(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant_id = $1 AND run_id = $2`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	defer rows.Close()
	var out []toolop.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("list approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return out, nil
}

// DecideApproval records a decision on a pending, unexpired approval.
func (db *DB) DecideApproval(ctx context.Context, tenantID, approvalID string, d toolop.Decision) (toolop.Approval, error) {
	status := toolop.ApprovalRejected
	if d.Approve {
		status = toolop.ApprovalApproved
	}
	a, err := scanApproval(db.pool.QueryRow(ctx, `UPDATE approvals SET
			status = $3, decided_by = $4, reason = $5, decided_at = $6
		WHERE tenant_id = $1 AND approval_id = $2 AND status = 'pending' AND expires_at > $6
		RETURNING `+approvalColumns,
		tenantID, approvalID, string(status), d.By, d.Reason, d.At))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return toolop.Approval{}, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	cur, err := db.GetApproval(ctx, tenantID, approvalID)
	if err != nil {
		return toolop.Approval{}, err
	}
	if cur.Status != toolop.ApprovalPending {
		return toolop.Approval{}, fmt.Errorf("%w: approval %s is %s", toolop.ErrApprovalDecided, approvalID, cur.Status)
	}
	return toolop.Approval{}, fmt.Errorf("%w: approval %s expired at %s", toolop.ErrApprovalExpired, approvalID, cur.ExpiresAt.Format(time.RFC3339Nano))
}
