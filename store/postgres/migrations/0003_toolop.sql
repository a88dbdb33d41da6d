-- The operation ledger and approvals. Keys start with tenant_id (Citus-style
-- distribution by tenant); a run's operations and approvals are read by
-- (tenant_id, run_id). Results are kept as text so they come back byte for byte.

CREATE TABLE tool_operations (
    tenant_id      text COLLATE "C" NOT NULL,
    operation_id   text COLLATE "C" NOT NULL,
    run_id         text COLLATE "C" NOT NULL,
    step_id        text NOT NULL,
    tool_name      text NOT NULL,
    request_digest text NOT NULL,
    status         text NOT NULL CHECK (status IN ('prepared', 'started', 'succeeded', 'failed', 'unknown')),
    attempts       integer NOT NULL DEFAULT 0,
    external_ref   text NOT NULL DEFAULT '',
    result         text,
    error          text NOT NULL DEFAULT '',
    resolution     text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);

CREATE INDEX tool_operations_run ON tool_operations (tenant_id, run_id, created_at, operation_id);

CREATE TABLE approvals (
    tenant_id      text COLLATE "C" NOT NULL,
    approval_id    text COLLATE "C" NOT NULL,
    run_id         text COLLATE "C" NOT NULL,
    step_id        text NOT NULL,
    request_digest text NOT NULL,
    summary        text,
    status         text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    expires_at     timestamptz NOT NULL,
    decided_by     text NOT NULL DEFAULT '',
    reason         text NOT NULL DEFAULT '',
    decided_at     timestamptz,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, approval_id)
);

CREATE INDEX approvals_run ON approvals (tenant_id, run_id, created_at, approval_id);
