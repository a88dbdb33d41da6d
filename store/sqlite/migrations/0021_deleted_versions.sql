-- A document put again under the id of a deleted one goes on from the
-- version it had (retrieval.Store.DeletedVersion): that version is read from
-- the invalidation log by this index, not by a walk of the tenant's log.
CREATE INDEX retrieval_invalidations_deleted ON retrieval_invalidations (tenant_id, document_id, old_version)
    WHERE kind = 'document_deleted';
