-- Recovery and retention at constant cost.
--
-- Recovery: the workflow's recovery loop looks at running runs (through a
-- partial index holding only the active statuses, so finished runs cost it
-- nothing) and at suspended runs that something woke. A wake-up is a row of
-- run_wakeups written by a trigger in the same transaction as the event a
-- suspended run may wait for: an operation leaving doubt, an approval
-- decided, or (timed, at expires_at) an approval expiring. Immediate wake-ups
-- use wake_at = epoch, so a run has at most one of them; n counts how often
-- it was written, so that a consumer deletes only what it saw (an ack of
-- (wake_at, n) misses a row written again since). The index has no column a
-- commit or a lease renewal changes, so those updates stay HOT.
CREATE INDEX runs_active ON runs (tenant_id, status, run_id)
    WHERE status IN ('running', 'suspended');

CREATE TABLE run_wakeups (
    tenant_id text COLLATE "C" NOT NULL,
    run_id    text COLLATE "C" NOT NULL,
    wake_at   timestamptz NOT NULL,
    n         bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, run_id, wake_at)
);

-- wake_run records a wake-up of an active run (a finished run waits for nothing).
CREATE FUNCTION memento_wake_run(p_tenant text, p_run text, p_at timestamptz) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO run_wakeups (tenant_id, run_id, wake_at, n)
    SELECT p_tenant, p_run, p_at, 1
    WHERE EXISTS (SELECT 1 FROM runs WHERE tenant_id = p_tenant AND run_id = p_run
                  AND status IN ('running', 'suspended'))
    ON CONFLICT (tenant_id, run_id, wake_at) DO UPDATE SET n = run_wakeups.n + 1
$$;

CREATE FUNCTION memento_wake_operation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memento_wake_run(NEW.tenant_id, NEW.run_id, 'epoch'::timestamptz);
    RETURN NULL;
END $$;

-- An operation settles when it leaves doubt (started, unknown).
CREATE TRIGGER tool_operations_wake AFTER UPDATE OF status ON tool_operations
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status NOT IN ('started', 'unknown'))
    EXECUTE FUNCTION memento_wake_operation();

CREATE FUNCTION memento_wake_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM memento_wake_run(NEW.tenant_id, NEW.run_id, NEW.expires_at);
    ELSE
        PERFORM memento_wake_run(NEW.tenant_id, NEW.run_id, 'epoch'::timestamptz);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER approvals_wake_expiry AFTER INSERT ON approvals
    FOR EACH ROW WHEN (NEW.status = 'pending')
    EXECUTE FUNCTION memento_wake_approval();

CREATE TRIGGER approvals_wake_decided AFTER UPDATE OF status ON approvals
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status <> 'pending')
    EXECUTE FUNCTION memento_wake_approval();

-- A run inserted suspended (a fork) may wait for something that already
-- happened: the loop looks at it once.
CREATE FUNCTION memento_wake_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memento_wake_run(NEW.tenant_id, NEW.run_id, 'epoch'::timestamptz);
    RETURN NULL;
END $$;

CREATE TRIGGER runs_wake_inserted AFTER INSERT ON runs
    FOR EACH ROW WHEN (NEW.status = 'suspended')
    EXECUTE FUNCTION memento_wake_inserted();

-- Runs suspended before this migration were found by polling; wake each once
-- so the loop checks them, and arm the expiry of every pending approval.
INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
SELECT tenant_id, run_id, 'epoch'::timestamptz FROM runs WHERE status = 'suspended';
INSERT INTO run_wakeups (tenant_id, run_id, wake_at)
SELECT a.tenant_id, a.run_id, a.expires_at FROM approvals a
WHERE a.status = 'pending' AND EXISTS (SELECT 1 FROM runs r WHERE r.tenant_id = a.tenant_id
    AND r.run_id = a.run_id AND r.status IN ('running', 'suspended'))
ON CONFLICT DO NOTHING;

-- Retention: finished_at is set by the commit that makes a run terminal and
-- indexed only for finished runs, so a batch walks the oldest finished runs
-- in index order instead of sorting every terminal run. Runs finished before
-- this migration were last updated by their terminal commit.
ALTER TABLE runs ADD COLUMN finished_at timestamptz;
UPDATE runs SET finished_at = updated_at WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX runs_finished ON runs (finished_at, tenant_id, run_id) WHERE finished_at IS NOT NULL;
-- runs_terminal served the old retention scan only.
DROP INDEX runs_terminal;
