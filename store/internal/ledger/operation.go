package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/mementohq/memento/toolop"
)

const opColumns = `tenant_id, operation_id, run_id, step_id, tool_name, request_digest, status,
	attempts, external_ref, result, error, resolution, idempotency_key, created_at, updated_at`

func (s Store) scanOperation(row Row) (toolop.Operation, error) {
	var op toolop.Operation
	var status string
	var result *string
	err := row.Scan(&op.TenantID, &op.OperationID, &op.RunID, &op.StepID, &op.ToolName, &op.RequestDigest,
		&status, &op.Attempts, &op.ExternalRef, &result, &op.Error, &op.Resolution, &op.Key,
		s.d.TimeDest(&op.CreatedAt), s.d.TimeDest(&op.UpdatedAt))
	if err != nil {
		return toolop.Operation{}, err
	}
	op.Status = toolop.Status(status)
	if result != nil {
		op.Result = []byte(*result)
	}
	op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	return op, nil
}

// PrepareOperation inserts the operation unless its id exists.
func (s Store) PrepareOperation(ctx context.Context, op toolop.Operation) (toolop.Operation, bool, error) {
	created := s.d.TimeArg(op.CreatedAt)
	got, err := s.scanOperation(s.writeRow(ctx, `INSERT INTO tool_operations (`+opColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, '', NULL, '', '', ?, ?, ?)
		ON CONFLICT (tenant_id, operation_id) DO NOTHING
		RETURNING `+opColumns,
		op.TenantID, op.OperationID, op.RunID, op.StepID, op.ToolName, op.RequestDigest, string(toolop.StatusPrepared),
		op.Key, created, created))
	return insertOrGet(got, err, func() (toolop.Operation, error) { return s.GetOperation(ctx, op.TenantID, op.OperationID) })
}

// GetOperation reads one operation.
func (s Store) GetOperation(ctx context.Context, tenantID, operationID string) (toolop.Operation, error) {
	op, err := s.scanOperation(s.queryRow(ctx, `SELECT `+opColumns+` FROM tool_operations
		WHERE tenant_id = ? AND operation_id = ?`, tenantID, operationID))
	if errors.Is(err, sql.ErrNoRows) {
		return toolop.Operation{}, toolop.ErrNotFound
	}
	if err != nil {
		return toolop.Operation{}, fmt.Errorf("select: %w", err)
	}
	return op, nil
}

// ListOperations returns a run's operations in creation order.
func (s Store) ListOperations(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Operation, error) {
	where, args := s.pageWhere("operation_id", tenantID, runID, p)
	return list(ctx, s, `SELECT `+opColumns+` FROM tool_operations
		WHERE tenant_id = ? AND run_id = ?`+where, args, s.scanOperation)
}

// TransitionOperation changes the status if the current one is allowed. A
// refused transition names the current status.
func (s Store) TransitionOperation(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	if len(t.From) > 0 {
		op, err := s.transition(ctx, tenantID, operationID, t)
		if err == nil {
			return op, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return toolop.Operation{}, fmt.Errorf("update: %w", err)
		}
	}
	cur, err := s.GetOperation(ctx, tenantID, operationID)
	if err != nil {
		return toolop.Operation{}, err
	}
	return toolop.Operation{}, fmt.Errorf("%w: it is %s", toolop.ErrInvalidTransition, cur.Status)
}

// transition is the conditional UPDATE of TransitionOperation (t.From not
// empty); sql.ErrNoRows when the operation is absent or in another status.
func (s Store) transition(ctx context.Context, tenantID, operationID string, t toolop.Transition) (toolop.Operation, error) {
	inc := 0
	if t.CountAttempt {
		inc = 1
	}
	args := []any{string(t.To), inc, t.ExternalRef, t.ExternalRef, nullJSON(t.Result), t.Error,
		t.Resolution, t.Resolution, s.d.TimeArg(t.At), tenantID, operationID}
	for _, st := range t.From {
		args = append(args, string(st))
	}
	return s.scanOperation(s.writeRow(ctx, `UPDATE tool_operations SET
			status = ?,
			attempts = attempts + ?,
			external_ref = CASE WHEN ? = '' THEN external_ref ELSE ? END,
			result = COALESCE(?, result),
			error = ?,
			resolution = CASE WHEN ? = '' THEN resolution ELSE ? END,
			updated_at = ?
		WHERE tenant_id = ? AND operation_id = ? AND status IN (?`+strings.Repeat(", ?", len(t.From)-1)+`)
		RETURNING `+opColumns, args...))
}
