-- Session memory: the session record, its append-only messages, and the
-- personal-data vault the redactor writes to. Every key starts with
-- tenant_id. Times are unix microseconds (UTC). A row past expires_at is
-- invisible to every read; the session store's sweeper deletes it.

CREATE TABLE sessions (
    tenant_id        TEXT    NOT NULL,
    session_id       TEXT    NOT NULL,
    user_id          TEXT    NOT NULL,
    app              TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL,
    revision         INTEGER NOT NULL,
    summary          TEXT,             -- JSON of the summary slot; NULL when empty
    message_count    INTEGER NOT NULL DEFAULT 0,
    last_seq         INTEGER NOT NULL DEFAULT 0,
    last_message_at  INTEGER NOT NULL DEFAULT 0,
    ttl_ms           INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
) WITHOUT ROWID;

-- A user's live sessions, most recently active first.
CREATE INDEX sessions_user ON sessions (tenant_id, user_id, last_activity_at);

-- The sweeper finds expired sessions across tenants by expiry.
CREATE INDEX sessions_expiry ON sessions (expires_at);

CREATE TABLE session_messages (
    tenant_id  TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    role       TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    metadata   TEXT,             -- JSON object; NULL when none
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, session_id, seq)
) WITHOUT ROWID;

CREATE TABLE pii_vault (
    tenant_id  TEXT    NOT NULL,
    ref_id     TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    sealed     BLOB    NOT NULL,   -- the value, AES-GCM sealed when a vault key is configured
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, ref_id)
) WITHOUT ROWID;

CREATE INDEX pii_vault_expiry ON pii_vault (expires_at);
