-- Summaries (compact.Summary): a lossy, rebuildable cache of a run's events
-- or a session's messages, kept apart from every source of truth. body is
-- the whole artifact as JSON (facts, carried items, text, ...); the columns
-- beside it are what lookups, ordering and status changes need. Every key
-- starts with tenant_id. At most one current summary per owner and first
-- seq: concurrent compactions of the same next range cannot both land.
CREATE TABLE summaries (
    tenant_id     TEXT    NOT NULL,
    summary_id    TEXT    NOT NULL,
    owner_kind    TEXT    NOT NULL,
    owner_id      TEXT    NOT NULL,
    from_seq      INTEGER NOT NULL,
    to_seq        INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    stale_reason  TEXT    NOT NULL DEFAULT '',
    stale_at      INTEGER,
    body          TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, summary_id)
) WITHOUT ROWID;

CREATE INDEX summaries_owner ON summaries (tenant_id, owner_kind, owner_id, from_seq, summary_id);

CREATE UNIQUE INDEX summaries_current ON summaries (tenant_id, owner_kind, owner_id, from_seq) WHERE status = 'current';
