-- State JSON Schemas registered per tenant, workflow and version over the
-- API. A registered version is immutable (a different schema for it is
-- refused), so every server instance may cache what it read. The schema is
-- kept as the text registered; digest is run.Digest of it. A commit to a run
-- of a workflow with rows here must name the digest of its version's row.
CREATE TABLE workflow_schemas (
    tenant_id     TEXT    NOT NULL,
    workflow_name TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    digest        TEXT    NOT NULL,
    schema        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, workflow_name, version)
) WITHOUT ROWID;
