-- Session memory: the session record, its capped message log, and the
-- personal-data vault the redactor writes to. Laid out for distribution by
-- tenant (Citus-style): every primary key starts with tenant_id and no
-- query joins across tenants. Expiry is compared with the database clock
-- (now()); a row past expires_at is invisible to every read, and the
-- session store's sweeper deletes it in bounded batches.

CREATE TABLE sessions (
    tenant_id        text        NOT NULL,
    session_id       text        NOT NULL,
    user_id          text        NOT NULL,
    app              text        NOT NULL DEFAULT '',
    state            text        NOT NULL,   -- JSON object, as the service encoded it
    revision         bigint      NOT NULL,
    summary          text,                   -- JSON of the summary slot (no time); NULL when empty
    summary_at       timestamptz,            -- when the summary was set
    message_count    integer     NOT NULL DEFAULT 0,
    last_seq         bigint      NOT NULL DEFAULT 0,
    last_message_at  timestamptz,
    ttl_ms           bigint      NOT NULL,
    created_at       timestamptz NOT NULL,
    last_activity_at timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
);

-- A user's sessions in the listing order (most recently active first).
CREATE INDEX sessions_user ON sessions (tenant_id, user_id, last_activity_at DESC, session_id);

-- The sweeper finds expired sessions by expiry.
CREATE INDEX sessions_expiry ON sessions (expires_at);

CREATE TABLE session_messages (
    tenant_id  text        NOT NULL,
    session_id text        NOT NULL,
    seq        bigint      NOT NULL,
    role       text        NOT NULL,
    content    text        NOT NULL,
    metadata   text,                   -- JSON object; NULL when none
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id, seq)
);

CREATE TABLE pii_vault (
    tenant_id  text        NOT NULL,
    ref_id     text        NOT NULL,
    kind       text        NOT NULL,
    sealed     bytea       NOT NULL,   -- the value, AES-GCM sealed with the vault key
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, ref_id)
);

CREATE INDEX pii_vault_expiry ON pii_vault (expires_at);
