-- Lists filtered by something other than their ordering column must not walk
-- every row of the tenant or the subject (the memory and run lists page by
-- (created_at, id) and filter on top).
--
-- GET /v1/memories/{id}/history and GET /v1/memories?namespace=&key= read one
-- key's claims, whatever their status: without this index they walked all of
-- the subject's claims.
CREATE INDEX memory_claims_key ON memory_claims (tenant_id, subject_id, namespace, key, created_at, memory_id);

-- GET /v1/memories?namespace=: a page of one namespace in list order.
CREATE INDEX memory_claims_namespace ON memory_claims (tenant_id, subject_id, namespace, created_at, memory_id);

-- GET /v1/memories/held: the few held claims of a subject, not all its claims.
CREATE INDEX memory_claims_held ON memory_claims (tenant_id, subject_id, created_at, memory_id)
    WHERE status = 'held';

-- GET /v1/runs?status= and ?workflow=: the matching runs in (created_at,
-- run_id) order, not a scan of the tenant's runs.
CREATE INDEX runs_status_created ON runs (tenant_id, status, created_at, run_id);
CREATE INDEX runs_workflow_created ON runs (tenant_id, workflow_name, created_at, run_id);
