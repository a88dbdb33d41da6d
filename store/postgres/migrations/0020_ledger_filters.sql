-- The checks that read a run's ledger read only what they check, whatever
-- else the run did: an approval request and every approval check read the
-- approvals of one step, a resume the operations in doubt (toolop.Page's
-- StepID and InDoubt).
CREATE INDEX approvals_step ON approvals (tenant_id, run_id, step_id, created_at, approval_id);
CREATE INDEX tool_operations_in_doubt ON tool_operations (tenant_id, run_id, created_at, operation_id)
    WHERE status IN ('started', 'unknown');
