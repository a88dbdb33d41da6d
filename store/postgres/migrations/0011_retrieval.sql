-- Retrieval with provenance (issue 10): documents with their ACL, chunk
-- projections (rows with an english tsvector and the document's ACL as an
-- array, vectors), group membership, per-tenant index versions,
-- invalidation events, and stored snapshots with their texts kept by
-- digest. Every table carries tenant_id and every key starts with it, so
-- the tables distribute by tenant. Numbered 0011 to match SQLite.

CREATE TABLE retrieval_documents (
    tenant_id      text        NOT NULL,
    document_id    text        NOT NULL,
    source_uri     text        NOT NULL,
    source_version text        NOT NULL,
    content        text        NOT NULL,
    metadata       text,                   -- canonical JSON as written, compared byte for byte
    acl            text[]      NOT NULL,   -- sorted
    version        bigint      NOT NULL,
    chunks         integer     NOT NULL,
    updated_at     timestamptz NOT NULL,
    indexed_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, document_id)
);

-- Chunks of live document versions. acl is the document's ACL, copied so
-- the ACL test (acl && the principal's entries) runs on the row the full
-- text matched, inside the one query; a change of ACL re-projects.
CREATE TABLE retrieval_chunks (
    tenant_id   text    NOT NULL,
    chunk_id    text    NOT NULL,
    document_id text    NOT NULL,
    version     bigint  NOT NULL,
    n           integer NOT NULL,
    text        text    NOT NULL,
    digest      text    NOT NULL,
    acl         text[]  NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    PRIMARY KEY (tenant_id, chunk_id)
);

CREATE INDEX retrieval_chunks_document ON retrieval_chunks (tenant_id, document_id);
CREATE INDEX retrieval_chunks_tsv ON retrieval_chunks USING gin (tsv);
CREATE INDEX retrieval_chunks_acl ON retrieval_chunks USING gin (acl);

CREATE TABLE retrieval_vectors (
    tenant_id     text    NOT NULL,
    chunk_id      text    NOT NULL,
    model         text    NOT NULL,
    document_id   text    NOT NULL,
    vec           bytea   NOT NULL,   -- little-endian float32s
    dim           integer NOT NULL,
    acl           text[]  NOT NULL,
    index_version bigint  NOT NULL,
    PRIMARY KEY (tenant_id, chunk_id, model)
);

CREATE INDEX retrieval_vectors_version ON retrieval_vectors (tenant_id, model, index_version);
CREATE INDEX retrieval_vectors_document ON retrieval_vectors (tenant_id, document_id);

CREATE TABLE retrieval_members (
    tenant_id  text NOT NULL,
    principal  text NOT NULL,
    group_name text NOT NULL,
    PRIMARY KEY (tenant_id, principal, group_name)
);

-- The tenant's index version; its row lock serializes the tenant's
-- retrieval writes.
CREATE TABLE retrieval_tenants (
    tenant_id     text   NOT NULL PRIMARY KEY,
    index_version bigint NOT NULL
);

CREATE TABLE retrieval_invalidations (
    tenant_id     text        NOT NULL,
    index_version bigint      NOT NULL,
    kind          text        NOT NULL,
    document_id   text        NOT NULL DEFAULT '',
    old_version   bigint      NOT NULL DEFAULT 0,
    new_version   bigint      NOT NULL DEFAULT 0,
    group_name    text        NOT NULL DEFAULT '',
    principal     text        NOT NULL DEFAULT '',
    change        text        NOT NULL DEFAULT '',
    rows_removed  integer     NOT NULL DEFAULT 0,
    at            timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, index_version)
);

CREATE TABLE retrieval_snapshots (
    tenant_id     text        NOT NULL,
    snapshot_id   text        NOT NULL,
    query_digest  text        NOT NULL,
    index_version bigint      NOT NULL,
    principal     text        NOT NULL,
    k             integer     NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, snapshot_id)
);

CREATE INDEX retrieval_snapshots_created ON retrieval_snapshots (tenant_id, created_at);

CREATE TABLE retrieval_snapshot_hits (
    tenant_id      text             NOT NULL,
    snapshot_id    text             NOT NULL,
    rank           integer          NOT NULL,
    document_id    text             NOT NULL,
    source_uri     text             NOT NULL,
    source_version text             NOT NULL,
    version        bigint           NOT NULL,
    chunk_id       text             NOT NULL,
    content_digest text             NOT NULL,
    score          double precision NOT NULL,
    retrieved_at   timestamptz      NOT NULL,
    PRIMARY KEY (tenant_id, snapshot_id, rank)
);

CREATE INDEX retrieval_snapshot_hits_digest ON retrieval_snapshot_hits (tenant_id, content_digest);

CREATE TABLE retrieval_texts (
    tenant_id text NOT NULL,
    digest    text NOT NULL,
    text      text NOT NULL,
    PRIMARY KEY (tenant_id, digest)
);
