package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mementohq/memento/toolop"
)

var _ toolop.Store = (*DB)(nil)

const opColumns = `tenant_id, operation_id, run_id, step_id, tool_name, request_digest, status,
	attempts, external_ref, result, error, resolution, created_at, updated_at`

type opRowScanner interface{ Scan(dest ...any) error }

func opMicros(t time.Time) int64 { return t.UnixMicro() }

func opTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

func scanOperation(row opRowScanner) (toolop.Operation, error) {
	var op toolop.Operation
	var status string
	var result sql.NullString
	var created, updated int64
	err := row.Scan(&op.TenantID, &op.OperationID, &op.RunID, &op.StepID, &op.ToolName, &op.RequestDigest,
		&status, &op.Attempts, &op.ExternalRef, &result, &op.Error, &op.Resolution, &created, &updated)
	if err != nil {
		return toolop.Operation{}, err
	}
	op.Status = toolop.Status(status)
	if result.Valid {
		op.Result = json.RawMessage(result.String)
	}
	op.CreatedAt, op.UpdatedAt = opTime(created), opTime(updated)
	return op, nil
}

func opNullJSON(b json.RawMessage) sql.NullString {
	if len(b) == 0 {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

// PrepareOperation inserts the operation unless its id exists.
func (db *DB) PrepareOperation(ctx context.Context, op toolop.Operation) (toolop.Operation, bool, error) {
	got, err := scanOperation(db.SQL().QueryRowContext(ctx, `INSERT INTO tool_operations (`+opColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, '', NULL, '', '', ?, ?)
		ON CONFLICT (tenant_id, operation_id) DO NOTHING
		RETURNING `+opColumns,
		op.TenantID, op.OperationID, op.RunID, op.StepID, op.ToolName, op.RequestDigest, string(toolop.StatusPrepared),
		opMicros(op.CreatedAt), opMicros(op.CreatedAt)))
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
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
	op, err := scanOperation(db.r.QueryRowContext(ctx, `SELECT `+opColumns+` FROM tool_operations
		WHERE tenant_id = ? AND operation_id = ?`, tenantID, operationID))
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := db.r.QueryContext(ctx, `SELECT `+opColumns+` FROM tool_operations
		WHERE tenant_id = ? AND run_id = ?`+where, args...)
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
		args = append(args, p.AfterCreatedAt.UnixMicro(), p.AfterID)
		where = ` AND (created_at, ` + id + `) > (?, ?)`
	}
	where += ` ORDER BY created_at, ` + id
	if p.Limit > 0 {
		args = append(args, p.Limit)
		where += ` LIMIT ?`
	}
	return where, args
}

// TransitionOperation changes the status if the current one is allowed.
func (db *DB) TransitionOperation(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	if len(t.From) == 0 {
		return toolop.Operation{}, fmt.Errorf("%w: operation %s cannot become %s", toolop.ErrInvalidTransition, operationID, t.To)
	}
	inc := 0
	if t.CountAttempt {
		inc = 1
	}
	args := []any{string(t.To), inc, t.ExternalRef, t.ExternalRef, opNullJSON(t.Result), t.Error, t.Resolution, t.Resolution, opMicros(t.At), tenantID, operationID}
	marks := make([]string, len(t.From))
	for i, s := range t.From {
		marks[i] = "?"
		args = append(args, string(s))
	}
	op, err := scanOperation(db.SQL().QueryRowContext(ctx, `UPDATE tool_operations SET
			status = ?,
			attempts = attempts + ?,
			external_ref = CASE WHEN ? = '' THEN external_ref ELSE ? END,
			result = COALESCE(?, result),
			error = ?,
			resolution = CASE WHEN ? = '' THEN resolution ELSE ? END,
			updated_at = ?
		WHERE tenant_id = ? AND operation_id = ? AND status IN (`+strings.Join(marks, ", ")+`)
		RETURNING `+opColumns, args...))
	if err == nil {
		return op, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
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

func scanApproval(row opRowScanner) (toolop.Approval, error) {
	var a toolop.Approval
	var status string
	var summary sql.NullString
	var decided sql.NullInt64
	var expires, created int64
	err := row.Scan(&a.TenantID, &a.ApprovalID, &a.RunID, &a.StepID, &a.RequestDigest, &summary, &status,
		&expires, &a.DecidedBy, &a.Reason, &decided, &created)
	if err != nil {
		return toolop.Approval{}, err
	}
	a.Status = toolop.ApprovalStatus(status)
	if summary.Valid {
		a.Summary = json.RawMessage(summary.String)
	}
	if decided.Valid {
		t := opTime(decided.Int64)
		a.DecidedAt = &t
	}
	a.ExpiresAt, a.CreatedAt = opTime(expires), opTime(created)
	return a, nil
}

// CreateApproval inserts a pending approval unless its id exists.
func (db *DB) CreateApproval(ctx context.Context, a toolop.Approval) (toolop.Approval, bool, error) {
	got, err := scanApproval(db.SQL().QueryRowContext(ctx, `INSERT INTO approvals (`+approvalColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, '', '', NULL, ?)
		ON CONFLICT (tenant_id, approval_id) DO NOTHING
		RETURNING `+approvalColumns,
		a.TenantID, a.ApprovalID, a.RunID, a.StepID, a.RequestDigest, opNullJSON(a.Summary), opMicros(a.ExpiresAt), opMicros(a.CreatedAt)))
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
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
	a, err := scanApproval(db.r.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant_id = ? AND approval_id = ?`, tenantID, approvalID))
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := db.r.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant_id = ? AND run_id = ?`+where, args...)
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
	a, err := scanApproval(db.SQL().QueryRowContext(ctx, `UPDATE approvals SET
			status = ?, decided_by = ?, reason = ?, decided_at = ?
		WHERE tenant_id = ? AND approval_id = ? AND status = 'pending' AND expires_at > ?
		RETURNING `+approvalColumns,
		string(status), d.By, d.Reason, opMicros(d.At), tenantID, approvalID, opMicros(d.At)))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
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
