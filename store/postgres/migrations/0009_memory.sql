-- Long-term memory (issue 8): claims with provenance, their full-text and
-- vector projections, tombstones, forget audit records, namespace policies
-- and per-subject change counters. Laid out for distribution by tenant
-- (Citus-style): every table carries tenant_id, every primary and unique key
-- starts with it, and no query joins across tenants.

CREATE TABLE memory_claims (
    tenant_id      text             NOT NULL,
    memory_id      text             NOT NULL,
    subject_id     text             NOT NULL,
    namespace      text             NOT NULL,
    key            text             NOT NULL,
    value          text             NOT NULL,   -- JSON, as written
    schema_version integer          NOT NULL,
    text           text             NOT NULL,
    category       text             NOT NULL DEFAULT '',
    provenance     text             NOT NULL,   -- JSON of memory.Provenance
    confidence     double precision NOT NULL,
    valid_from     timestamptz      NOT NULL,
    expires_at     timestamptz,
    status         text             NOT NULL,
    invalidated_at timestamptz,
    reason         text             NOT NULL DEFAULT '',
    supersedes     text             NOT NULL DEFAULT '',
    superseded_by  text             NOT NULL DEFAULT '',
    superseded_at  timestamptz,
    consent_basis  text             NOT NULL DEFAULT '',
    value_digest   text             NOT NULL,
    created_at     timestamptz      NOT NULL,
    confirmed_at   timestamptz      NOT NULL,
    confirmations  integer          NOT NULL DEFAULT 0,
    version        bigint           NOT NULL,   -- subject version at this row's last write
    PRIMARY KEY (tenant_id, memory_id)
);

-- One current claim per (subject, namespace, key); writers serialise on the
-- subject's row in memory_subjects and check first, this is the backstop.
CREATE UNIQUE INDEX memory_claims_current ON memory_claims (tenant_id, subject_id, namespace, key)
    WHERE status = 'current';

-- A subject's claims in list order (and forget's scan).
CREATE INDEX memory_claims_subject ON memory_claims (tenant_id, subject_id, created_at, memory_id);

-- Full text of current claims: a projection row per claim while it is
-- current, with the english tsvector generated from the text.
CREATE TABLE memory_text (
    tenant_id  text        NOT NULL,
    memory_id  text        NOT NULL,
    subject_id text        NOT NULL,
    namespace  text        NOT NULL,
    expires_at timestamptz,
    text       text        NOT NULL,
    tsv        tsvector    GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    PRIMARY KEY (tenant_id, memory_id)
);

CREATE INDEX memory_text_tsv ON memory_text USING gin (tsv);
CREATE INDEX memory_text_subject ON memory_text (tenant_id, subject_id, namespace);

-- Embeddings of current claims, one per model.
CREATE TABLE memory_vectors (
    tenant_id  text        NOT NULL,
    memory_id  text        NOT NULL,
    model      text        NOT NULL,
    subject_id text        NOT NULL,
    namespace  text        NOT NULL,
    dim        integer     NOT NULL,
    vec        bytea       NOT NULL,   -- dim little-endian float32s
    expires_at timestamptz,
    version    bigint      NOT NULL,   -- subject version when written
    PRIMARY KEY (tenant_id, memory_id, model)
);

-- Catch-up by version: Vectors(subject, model, after).
CREATE INDEX memory_vectors_subject ON memory_vectors (tenant_id, subject_id, model, version);

-- What forgetting leaves: enough to refuse the same fact, nothing of it.
CREATE TABLE memory_tombstones (
    tenant_id    text        NOT NULL,
    subject_id   text        NOT NULL,
    namespace    text        NOT NULL,
    key          text        NOT NULL,
    value_digest text        NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, subject_id, namespace, key, value_digest)
);

-- The audit record of each forget: scope and counts, never content.
CREATE TABLE memory_forgets (
    tenant_id  text        NOT NULL,
    forget_id  text        NOT NULL,
    subject_id text        NOT NULL,
    namespace  text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT '',
    claims     integer     NOT NULL,
    tombstones integer     NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, forget_id)
);

CREATE INDEX memory_forgets_subject ON memory_forgets (tenant_id, subject_id, created_at);

CREATE TABLE memory_namespaces (
    tenant_id text    NOT NULL,
    namespace text    NOT NULL,
    personal  boolean NOT NULL,
    sensitive boolean NOT NULL,
    ttl_us    bigint  NOT NULL,
    PRIMARY KEY (tenant_id, namespace)
);

-- A subject's change counter. Every write to the subject's claims or
-- projections bumps it first (INSERT ... ON CONFLICT DO UPDATE ... RETURNING),
-- which takes the row lock: writes to one subject serialise, and versions
-- commit in order, so catching up by version misses nothing.
CREATE TABLE memory_subjects (
    tenant_id  text   NOT NULL,
    subject_id text   NOT NULL,
    version    bigint NOT NULL,
    PRIMARY KEY (tenant_id, subject_id)
);
