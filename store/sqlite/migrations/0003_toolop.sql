-- The operation ledger and approvals. Keys start with tenant_id, like every
-- table; times are unix microseconds. Results are kept as text, byte for byte.

CREATE TABLE tool_operations (
    tenant_id      TEXT NOT NULL,
    operation_id   TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    step_id        TEXT NOT NULL,
    tool_name      TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('prepared', 'started', 'succeeded', 'failed', 'unknown')),
    attempts       INTEGER NOT NULL DEFAULT 0,
    external_ref   TEXT NOT NULL DEFAULT '',
    result         TEXT,
    error          TEXT NOT NULL DEFAULT '',
    resolution     TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE INDEX tool_operations_run ON tool_operations (tenant_id, run_id, created_at, operation_id);

CREATE TABLE approvals (
    tenant_id      TEXT NOT NULL,
    approval_id    TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    step_id        TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    summary        TEXT,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    expires_at     INTEGER NOT NULL,
    decided_by     TEXT NOT NULL DEFAULT '',
    reason         TEXT NOT NULL DEFAULT '',
    decided_at     INTEGER,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, approval_id)
) WITHOUT ROWID;

CREATE INDEX approvals_run ON approvals (tenant_id, run_id, created_at, approval_id);
