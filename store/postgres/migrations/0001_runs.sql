-- Durable runs: the materialized run, its append-only event log (each event
-- keeps the snapshot its commit produced) and labelled checkpoints.
-- Every key starts with tenant_id so the tables can be distributed by tenant
-- (Citus-style); ids use the "C" collation so ordering is bytewise everywhere.

CREATE TABLE runs (
    tenant_id            text COLLATE "C" NOT NULL,
    run_id               text COLLATE "C" NOT NULL,
    workflow_name        text COLLATE "C" NOT NULL,
    workflow_version     text NOT NULL DEFAULT '',
    state_schema_version integer NOT NULL,
    status               text NOT NULL CHECK (status IN ('running', 'suspended', 'completed', 'failed', 'cancelled')),
    status_reason        text NOT NULL DEFAULT '',
    next_step            text NOT NULL DEFAULT '',
    state                jsonb NOT NULL,
    state_revision       bigint NOT NULL,
    lease_owner          text NOT NULL DEFAULT '',
    lease_epoch          bigint NOT NULL DEFAULT 0,
    lease_expires_at     timestamptz,
    parent_run_id        text NOT NULL DEFAULT '',
    parent_revision      bigint NOT NULL DEFAULT 0,
    idempotency_key      text COLLATE "C",
    request_digest       text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, run_id)
) WITH (fillfactor = 80);
-- Free space per page (fillfactor) and no index on any column a commit or a
-- lease changes (state, revision, lease, updated_at) keep those updates HOT.

CREATE UNIQUE INDEX runs_idempotency_key ON runs (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Keyset pagination of ListRuns: (created_at, run_id) within a tenant.
CREATE INDEX runs_created ON runs (tenant_id, created_at, run_id);

-- Retention scans only terminal runs; updated_at is filtered from the heap
-- rather than indexed, so that commits stay HOT.
CREATE INDEX runs_terminal ON runs (tenant_id)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- No foreign key to runs: every write goes through one statement that
-- touches both tables, and a key check would cost the commit hot path.
CREATE TABLE run_events (
    tenant_id            text COLLATE "C" NOT NULL,
    run_id               text COLLATE "C" NOT NULL,
    seq                  bigint NOT NULL,
    event_type           text NOT NULL,
    step_id              text NOT NULL DEFAULT '',
    attempt              integer NOT NULL DEFAULT 0,
    payload              jsonb NOT NULL,
    state                jsonb NOT NULL,
    next_step            text NOT NULL DEFAULT '',
    status               text NOT NULL,
    state_schema_version integer NOT NULL,
    created_at           timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, run_id, seq)
);

CREATE TABLE run_checkpoints (
    tenant_id  text COLLATE "C" NOT NULL,
    run_id     text COLLATE "C" NOT NULL,
    label      text COLLATE "C" NOT NULL,
    revision   bigint NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, run_id, label)
);
