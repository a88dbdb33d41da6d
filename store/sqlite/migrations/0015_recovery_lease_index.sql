-- Recovery at constant cost, also in the number of live leases; see the
-- PostgreSQL migration of the same number. Times are unix microseconds; a
-- free lease sorts at 0.
CREATE INDEX runs_lease_due ON runs (tenant_id,
    (CASE WHEN lease_owner = '' OR lease_expires_at IS NULL THEN 0 ELSE lease_expires_at END))
    WHERE status = 'running';

-- Due wake-ups only, as on PostgreSQL.
CREATE INDEX run_wakeups_due ON run_wakeups (tenant_id, wake_at);
