-- Long-term memory (issue 8): claims with provenance, their full-text and
-- vector projections, tombstones, forget audit records, namespace policies
-- and per-subject change counters. Every table carries tenant_id and every
-- key starts with it. Times are integer microseconds. Numbered 0009 to
-- match the PostgreSQL migration of the same tables.

CREATE TABLE memory_claims (
    tenant_id      TEXT    NOT NULL,
    memory_id      TEXT    NOT NULL,
    subject_id     TEXT    NOT NULL,
    namespace      TEXT    NOT NULL,
    key            TEXT    NOT NULL,
    value          TEXT    NOT NULL,   -- JSON, as written
    schema_version INTEGER NOT NULL,
    text           TEXT    NOT NULL,
    category       TEXT    NOT NULL DEFAULT '',
    provenance     TEXT    NOT NULL,   -- JSON of memory.Provenance
    confidence     REAL    NOT NULL,
    valid_from     INTEGER NOT NULL,
    expires_at     INTEGER,
    status         TEXT    NOT NULL,
    invalidated_at INTEGER,
    reason         TEXT    NOT NULL DEFAULT '',
    supersedes     TEXT    NOT NULL DEFAULT '',
    superseded_by  TEXT    NOT NULL DEFAULT '',
    superseded_at  INTEGER,
    consent_basis  TEXT    NOT NULL DEFAULT '',
    value_digest   TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    confirmed_at   INTEGER NOT NULL,
    confirmations  INTEGER NOT NULL DEFAULT 0,
    version        INTEGER NOT NULL,   -- subject version at this row's last write
    fts_rowid      INTEGER,            -- the row in memory_fts while current
    PRIMARY KEY (tenant_id, memory_id)
) WITHOUT ROWID;

-- One current claim per (subject, namespace, key); the stores check first,
-- this is the backstop.
CREATE UNIQUE INDEX memory_claims_current ON memory_claims (tenant_id, subject_id, namespace, key)
    WHERE status = 'current';

-- A subject's claims in list order (and forget's scan).
CREATE INDEX memory_claims_subject ON memory_claims (tenant_id, subject_id, created_at, memory_id);

-- Full text of current claims. The text is tokenized in Go (letter/digit
-- runs, Porter2 stems: store/internal/memsql) and every token is written
-- prefixed with the (tenant, subject) scope token, so a word's posting list
-- in this table holds one subject's claims only: a query for a subject's
-- words reads nothing of any other subject's, and bm25()'s document
-- frequencies are the subject's own. unicode61 without diacritic removal
-- keeps each Go token whole. scope holds the plain (tenant, subject) and
-- (tenant, subject, namespace) tokens, for forget and counting. Contentless:
-- the text lives in memory_claims; tenant_id and memory_id are kept
-- (contentless_unindexed) so a hit names its claim and the row its tenant.
CREATE VIRTUAL TABLE memory_fts USING fts5(
    scope, body, tenant_id UNINDEXED, memory_id UNINDEXED,
    content = '', contentless_delete = 1, contentless_unindexed = 1,
    tokenize = 'unicode61 remove_diacritics 0'
);

-- Embeddings of current claims, one per model.
CREATE TABLE memory_vectors (
    tenant_id  TEXT    NOT NULL,
    memory_id  TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    subject_id TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    dim        INTEGER NOT NULL,
    vec        BLOB    NOT NULL,   -- dim little-endian float32s
    expires_at INTEGER,
    version    INTEGER NOT NULL,   -- subject version when written
    PRIMARY KEY (tenant_id, memory_id, model)
) WITHOUT ROWID;

-- Catch-up by version: Vectors(subject, model, after).
CREATE INDEX memory_vectors_subject ON memory_vectors (tenant_id, subject_id, model, version);

-- What forgetting leaves: enough to refuse the same fact, nothing of it.
CREATE TABLE memory_tombstones (
    tenant_id    TEXT    NOT NULL,
    subject_id   TEXT    NOT NULL,
    namespace    TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    value_digest TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, subject_id, namespace, key, value_digest)
) WITHOUT ROWID;

-- The audit record of each forget: scope and counts, never content.
CREATE TABLE memory_forgets (
    tenant_id  TEXT    NOT NULL,
    forget_id  TEXT    NOT NULL,
    subject_id TEXT    NOT NULL,
    namespace  TEXT    NOT NULL DEFAULT '',
    reason     TEXT    NOT NULL DEFAULT '',
    claims     INTEGER NOT NULL,
    tombstones INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, forget_id)
) WITHOUT ROWID;

CREATE INDEX memory_forgets_subject ON memory_forgets (tenant_id, subject_id, created_at);

CREATE TABLE memory_namespaces (
    tenant_id TEXT    NOT NULL,
    namespace TEXT    NOT NULL,
    personal  INTEGER NOT NULL,
    sensitive INTEGER NOT NULL,
    ttl_us    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, namespace)
) WITHOUT ROWID;

-- A subject's change counter, moved by every write to its claims and
-- projections in the same transaction.
CREATE TABLE memory_subjects (
    tenant_id  TEXT    NOT NULL,
    subject_id TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, subject_id)
) WITHOUT ROWID;
