-- Summaries (compact.Summary): a lossy, rebuildable cache of a run's events
-- or a session's messages, kept apart from every source of truth. body is
-- the whole artifact as JSON text (kept as written, not jsonb, so it reads
-- back byte for byte); the columns beside it are what lookups, ordering and
-- status changes need. Laid out for distribution by tenant: every key
-- starts with tenant_id. At most one current summary per owner and first
-- seq: concurrent compactions of the same next range cannot both land.
CREATE TABLE summaries (
    tenant_id     text        NOT NULL,
    summary_id    text        NOT NULL,
    owner_kind    text        NOT NULL,
    owner_id      text        NOT NULL,
    from_seq      bigint      NOT NULL,
    to_seq        bigint      NOT NULL,
    status        text        NOT NULL,
    stale_reason  text        NOT NULL DEFAULT '',
    stale_at      timestamptz,
    body          text        NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, summary_id)
);

CREATE INDEX summaries_owner ON summaries (tenant_id, owner_kind, owner_id, from_seq, summary_id);

CREATE UNIQUE INDEX summaries_current ON summaries (tenant_id, owner_kind, owner_id, from_seq) WHERE status = 'current';
