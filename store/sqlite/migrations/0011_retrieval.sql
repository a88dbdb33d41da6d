-- Retrieval with provenance (issue 10): documents with their ACL, chunk
-- projections (rows, full text, vectors), group membership, per-tenant
-- index versions, invalidation events, and stored snapshots with their
-- texts kept by digest. Every table carries tenant_id and every key starts
-- with it. Times are integer microseconds. Numbered 0011 to match the
-- PostgreSQL migration of the same tables.

CREATE TABLE retrieval_documents (
    tenant_id      TEXT    NOT NULL,
    document_id    TEXT    NOT NULL,
    source_uri     TEXT    NOT NULL,
    source_version TEXT    NOT NULL,
    content        TEXT    NOT NULL,
    metadata       TEXT,               -- JSON object or NULL
    acl            TEXT    NOT NULL,   -- JSON array, sorted
    version        INTEGER NOT NULL,
    chunks         INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    indexed_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, document_id)
) WITHOUT ROWID;

-- The ACL as rows, so a query checks it with an indexed EXISTS.
CREATE TABLE retrieval_acl (
    tenant_id   TEXT NOT NULL,
    document_id TEXT NOT NULL,
    entry       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, document_id, entry)
) WITHOUT ROWID;

CREATE TABLE retrieval_chunks (
    tenant_id   TEXT    NOT NULL,
    chunk_id    TEXT    NOT NULL,
    document_id TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    text        TEXT    NOT NULL,
    digest      TEXT    NOT NULL,
    fts_rowid   INTEGER,
    PRIMARY KEY (tenant_id, chunk_id)
) WITHOUT ROWID;

CREATE INDEX retrieval_chunks_document ON retrieval_chunks (tenant_id, document_id);

-- Full text of live chunks. acl holds one token per ACL entry of the
-- chunk's document (store/internal/memsql.ACLScope, hashed with the
-- tenant), so a query MATCHes `acl:(E1 OR ...) AND body:(...)` and FTS5
-- intersects posting lists: an unreadable chunk is never scored.
CREATE VIRTUAL TABLE retrieval_fts USING fts5(
    acl, body, tenant_id UNINDEXED, chunk_id UNINDEXED,
    content = '', contentless_delete = 1, contentless_unindexed = 1,
    tokenize = 'porter unicode61'
);

CREATE TABLE retrieval_vectors (
    tenant_id     TEXT    NOT NULL,
    chunk_id      TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    document_id   TEXT    NOT NULL,
    dim           INTEGER NOT NULL,
    vec           BLOB    NOT NULL,   -- dim little-endian float32s
    acl           TEXT    NOT NULL,   -- JSON array: the document's ACL when written
    index_version INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, chunk_id, model)
) WITHOUT ROWID;

CREATE INDEX retrieval_vectors_version ON retrieval_vectors (tenant_id, model, index_version);
CREATE INDEX retrieval_vectors_document ON retrieval_vectors (tenant_id, document_id);

CREATE TABLE retrieval_members (
    tenant_id  TEXT NOT NULL,
    principal  TEXT NOT NULL,
    group_name TEXT NOT NULL,
    PRIMARY KEY (tenant_id, principal, group_name)
) WITHOUT ROWID;

CREATE TABLE retrieval_tenants (
    tenant_id     TEXT    NOT NULL PRIMARY KEY,
    index_version INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE retrieval_invalidations (
    tenant_id     TEXT    NOT NULL,
    index_version INTEGER NOT NULL,
    kind          TEXT    NOT NULL,
    document_id   TEXT    NOT NULL DEFAULT '',
    old_version   INTEGER NOT NULL DEFAULT 0,
    new_version   INTEGER NOT NULL DEFAULT 0,
    group_name    TEXT    NOT NULL DEFAULT '',
    principal     TEXT    NOT NULL DEFAULT '',
    change        TEXT    NOT NULL DEFAULT '',
    rows_removed  INTEGER NOT NULL DEFAULT 0,
    at            INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, index_version)
) WITHOUT ROWID;

CREATE TABLE retrieval_snapshots (
    tenant_id     TEXT    NOT NULL,
    snapshot_id   TEXT    NOT NULL,
    query_digest  TEXT    NOT NULL,
    index_version INTEGER NOT NULL,
    principal     TEXT    NOT NULL,
    k             INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, snapshot_id)
) WITHOUT ROWID;

CREATE INDEX retrieval_snapshots_created ON retrieval_snapshots (tenant_id, created_at);

CREATE TABLE retrieval_snapshot_hits (
    tenant_id      TEXT    NOT NULL,
    snapshot_id    TEXT    NOT NULL,
    rank           INTEGER NOT NULL,
    document_id    TEXT    NOT NULL,
    source_uri     TEXT    NOT NULL,
    source_version TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    chunk_id       TEXT    NOT NULL,
    content_digest TEXT    NOT NULL,
    score          REAL    NOT NULL,
    retrieved_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, snapshot_id, rank)
) WITHOUT ROWID;

CREATE INDEX retrieval_snapshot_hits_digest ON retrieval_snapshot_hits (tenant_id, content_digest);

-- Chunk texts by digest, kept while a snapshot references them.
CREATE TABLE retrieval_texts (
    tenant_id TEXT NOT NULL,
    digest    TEXT NOT NULL,
    text      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, digest)
) WITHOUT ROWID;
