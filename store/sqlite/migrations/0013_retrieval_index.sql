-- Retrieval's in-process index (issue 10, speed): every chunk keeps its
-- terms (retrieval.EncodeTerms) and the tenant index version that wrote it,
-- so an instance loads a tenant's index, and later only what changed,
-- from terms rather than texts. Chunks written before keep NULL terms (the
-- index derives them from the text once) and version 1, which a fresh load
-- (versions > 0) reads. Numbered 0013 to match the PostgreSQL migration.

ALTER TABLE retrieval_chunks ADD COLUMN index_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE retrieval_chunks ADD COLUMN terms TEXT;

CREATE INDEX retrieval_chunks_version ON retrieval_chunks (tenant_id, index_version);
