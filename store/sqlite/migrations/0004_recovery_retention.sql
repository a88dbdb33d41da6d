-- Recovery and retention at constant cost; see the PostgreSQL migration of
-- the same number for the design. Times are unix microseconds; an immediate
-- wake-up has wake_at = 0.
CREATE INDEX runs_active ON runs (tenant_id, status, run_id)
    WHERE status IN ('running', 'suspended');

CREATE TABLE run_wakeups (
    tenant_id TEXT    NOT NULL,
    run_id    TEXT    NOT NULL,
    wake_at   INTEGER NOT NULL,
    n         INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, run_id, wake_at)
) WITHOUT ROWID;

-- An operation settles when it leaves doubt (started, unknown).
CREATE TRIGGER tool_operations_wake AFTER UPDATE OF status ON tool_operations
WHEN NEW.status IS NOT OLD.status AND NEW.status NOT IN ('started', 'unknown')
BEGIN
    INSERT INTO run_wakeups (tenant_id, run_id, wake_at, n)
    SELECT NEW.tenant_id, NEW.run_id, 0, 1
    WHERE EXISTS (SELECT 1 FROM runs WHERE tenant_id = NEW.tenant_id AND run_id = NEW.run_id
                  AND status IN ('running', 'suspended'))
    ON CONFLICT (tenant_id, run_id, wake_at) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER approvals_wake_expiry AFTER INSERT ON approvals
WHEN NEW.status = 'pending'
BEGIN
    INSERT INTO run_wakeups (tenant_id, run_id, wake_at, n)
    SELECT NEW.tenant_id, NEW.run_id, NEW.expires_at, 1
    WHERE EXISTS (SELECT 1 FROM runs WHERE tenant_id = NEW.tenant_id AND run_id = NEW.run_id
                  AND status IN ('running', 'suspended'))
    ON CONFLICT (tenant_id, run_id, wake_at) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER approvals_wake_decided AFTER UPDATE OF status ON approvals
WHEN NEW.status IS NOT OLD.status AND NEW.status <> 'pending'
BEGIN
    INSERT INTO run_wakeups (tenant_id, run_id, wake_at, n)
    SELECT NEW.tenant_id, NEW.run_id, 0, 1
    WHERE EXISTS (SELECT 1 FROM runs WHERE tenant_id = NEW.tenant_id AND run_id = NEW.run_id
                  AND status IN ('running', 'suspended'))
    ON CONFLICT (tenant_id, run_id, wake_at) DO UPDATE SET n = n + 1;
END;

-- A run inserted suspended (a fork) may wait for something that already
-- happened: the loop looks at it once.
CREATE TRIGGER runs_wake_inserted AFTER INSERT ON runs
WHEN NEW.status = 'suspended'
BEGIN
    INSERT INTO run_wakeups (tenant_id, run_id, wake_at, n) VALUES (NEW.tenant_id, NEW.run_id, 0, 1)
    ON CONFLICT (tenant_id, run_id, wake_at) DO UPDATE SET n = n + 1;
END;

-- Runs suspended before this migration were found by polling; wake each once
-- so the loop checks them, and arm the expiry of every pending approval.
INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
SELECT tenant_id, run_id, 0 FROM runs WHERE status = 'suspended';
INSERT OR IGNORE INTO run_wakeups (tenant_id, run_id, wake_at)
SELECT a.tenant_id, a.run_id, a.expires_at FROM approvals a
WHERE a.status = 'pending' AND EXISTS (SELECT 1 FROM runs r WHERE r.tenant_id = a.tenant_id
    AND r.run_id = a.run_id AND r.status IN ('running', 'suspended'));

ALTER TABLE runs ADD COLUMN finished_at INTEGER;
UPDATE runs SET finished_at = updated_at WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX runs_finished ON runs (finished_at, tenant_id, run_id) WHERE finished_at IS NOT NULL;
DROP INDEX runs_terminal;
-- Retention needs no lease here: its batches are write transactions, and
-- the file's single writer lock already lets one process sweep at a time.

