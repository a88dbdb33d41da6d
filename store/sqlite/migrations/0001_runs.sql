-- Durable runs: the materialized run, its append-only event log (each event
-- keeps the snapshot its commit produced) and labelled checkpoints.
-- Every key starts with tenant_id, like the PostgreSQL schema. Times are unix
-- microseconds (UTC); JSON is kept as the text the caller sent.

CREATE TABLE runs (
    tenant_id            TEXT    NOT NULL,
    run_id               TEXT    NOT NULL,
    workflow_name        TEXT    NOT NULL,
    workflow_version     TEXT    NOT NULL DEFAULT '',
    state_schema_version INTEGER NOT NULL,
    status               TEXT    NOT NULL CHECK (status IN ('running', 'suspended', 'completed', 'failed', 'cancelled')),
    status_reason        TEXT    NOT NULL DEFAULT '',
    next_step            TEXT    NOT NULL DEFAULT '',
    state                TEXT    NOT NULL,
    state_revision       INTEGER NOT NULL,
    lease_owner          TEXT    NOT NULL DEFAULT '',
    lease_epoch          INTEGER NOT NULL DEFAULT 0,
    lease_expires_at     INTEGER,          -- NULL when nobody holds the lease
    parent_run_id        TEXT    NOT NULL DEFAULT '',
    parent_revision      INTEGER NOT NULL DEFAULT 0,
    idempotency_key      TEXT,             -- NULL when the create had none
    request_digest       TEXT    NOT NULL DEFAULT '',
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX runs_idempotency_key ON runs (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Keyset pagination of ListRuns: (created_at, run_id) within a tenant.
CREATE INDEX runs_created ON runs (tenant_id, created_at, run_id);

-- Retention sweeps terminal runs across tenants by age; only terminal rows
-- are in this index, so commits to live runs never touch it.
CREATE INDEX runs_terminal ON runs (updated_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE TABLE run_events (
    tenant_id            TEXT    NOT NULL,
    run_id               TEXT    NOT NULL,
    seq                  INTEGER NOT NULL,
    event_type           TEXT    NOT NULL,
    step_id              TEXT    NOT NULL DEFAULT '',
    attempt              INTEGER NOT NULL DEFAULT 0,
    payload              TEXT    NOT NULL,
    state                TEXT    NOT NULL,
    next_step            TEXT    NOT NULL DEFAULT '',
    status               TEXT    NOT NULL,
    state_schema_version INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id, seq),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE run_checkpoints (
    tenant_id  TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    label      TEXT    NOT NULL,
    revision   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, run_id, label),
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id) ON DELETE CASCADE
) WITHOUT ROWID;
