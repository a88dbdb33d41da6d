package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mementohq/memento/toolop"
)

const approvalColumns = `tenant_id, approval_id, run_id, step_id, request_digest, summary, status,
	expires_at, decided_by, reason, decided_at, created_at`

func (s Store) scanApproval(row Row) (toolop.Approval, error) {
	var a toolop.Approval
	var status string
	var summary *string
	var decided *time.Time
	err := row.Scan(&a.TenantID, &a.ApprovalID, &a.RunID, &a.StepID, &a.RequestDigest, &summary, &status,
		s.d.TimeDest(&a.ExpiresAt), &a.DecidedBy, &a.Reason, s.d.NullTimeDest(&decided), s.d.TimeDest(&a.CreatedAt))
	if err != nil {
		return toolop.Approval{}, err
	}
	a.Status = toolop.ApprovalStatus(status)
	if summary != nil {
		a.Summary = []byte(*summary)
	}
	if decided != nil {
		t := decided.UTC()
		a.DecidedAt = &t
	}
	a.ExpiresAt, a.CreatedAt = a.ExpiresAt.UTC(), a.CreatedAt.UTC()
	return a, nil
}

// CreateApproval inserts a pending approval unless its id exists.
func (s Store) CreateApproval(ctx context.Context, a toolop.Approval) (toolop.Approval, bool, error) {
	got, err := s.scanApproval(s.writeRow(ctx, `INSERT INTO approvals (`+approvalColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, '', '', NULL, ?)
		ON CONFLICT (tenant_id, approval_id) DO NOTHING
		RETURNING `+approvalColumns,
		a.TenantID, a.ApprovalID, a.RunID, a.StepID, a.RequestDigest, nullJSON(a.Summary),
		s.d.TimeArg(a.ExpiresAt), s.d.TimeArg(a.CreatedAt)))
	return insertOrGet(got, err, func() (toolop.Approval, error) { return s.GetApproval(ctx, a.TenantID, a.ApprovalID) })
}

// GetApproval reads one approval.
func (s Store) GetApproval(ctx context.Context, tenantID, approvalID string) (toolop.Approval, error) {
	a, err := s.scanApproval(s.queryRow(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant_id = ? AND approval_id = ?`, tenantID, approvalID))
	if errors.Is(err, sql.ErrNoRows) {
		return toolop.Approval{}, toolop.ErrApprovalNotFound
	}
	if err != nil {
		return toolop.Approval{}, fmt.Errorf("select: %w", err)
	}
	return a, nil
}

// ListApprovals returns a run's approvals in creation order.
func (s Store) ListApprovals(ctx context.Context, tenantID, runID string, p toolop.Page) ([]toolop.Approval, error) {
	where, args := s.pageWhere("approval_id", tenantID, runID, p)
	return list(ctx, s, `SELECT `+approvalColumns+` FROM approvals
		WHERE tenant_id = ? AND run_id = ?`+where, args, s.scanApproval)
}

// DecideApproval records a decision on a pending, unexpired approval. A
// refused decision says whether the approval was decided (and how) or expired
// (and when).
func (s Store) DecideApproval(ctx context.Context, tenantID, approvalID string, d toolop.Decision) (toolop.Approval, error) {
	status := toolop.ApprovalRejected
	if d.Approve {
		status = toolop.ApprovalApproved
	}
	at := s.d.TimeArg(d.At)
	a, err := s.scanApproval(s.writeRow(ctx, `UPDATE approvals SET
			status = ?, decided_by = ?, reason = ?, decided_at = ?
		WHERE tenant_id = ? AND approval_id = ? AND status = 'pending' AND expires_at > ?
		RETURNING `+approvalColumns,
		string(status), d.By, d.Reason, at, tenantID, approvalID, at))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return toolop.Approval{}, fmt.Errorf("update: %w", err)
	}
	cur, err := s.GetApproval(ctx, tenantID, approvalID)
	if err != nil {
		return toolop.Approval{}, err
	}
	if cur.Status != toolop.ApprovalPending {
		return toolop.Approval{}, fmt.Errorf("%w: it is %s", toolop.ErrApprovalDecided, cur.Status)
	}
	return toolop.Approval{}, fmt.Errorf("%w at %s", toolop.ErrApprovalExpired, cur.ExpiresAt.Format(time.RFC3339Nano))
}
