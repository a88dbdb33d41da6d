-- The list indexes serve the lists only (issue 7, commit speed).
--
-- runs_created (0001), runs_status_created and runs_workflow_created (0019)
-- start with tenant_id and hold run_id, so the planner could take any of
-- them for a statement that finds one run by (tenant_id, run_id): a commit,
-- a lease, a read. With the table small or not yet analyzed (a new
-- deployment, a benchmark's schema) their estimates tie with the primary
-- key's, and the tie went to the index created last. A connection keeps a
-- generic plan until the table is analyzed, so each commit then walked
-- every entry of the tenant's runs in that index (those of finished runs
-- included, dead ones too until a vacuum): a commit's cost grew with the
-- runs behind it.
--
-- A predicate that a lookup by run_id = $n does not imply makes them usable
-- only by the queries that state it: ListRuns adds run_id <> '' (always
-- true: a run id is never empty, run.ValidID), so the lists read them as
-- before, and the generic plan of a lookup by run_id (the one a prepared
-- statement keeps) has the primary key as its only index. (A custom plan,
-- made with the id's value, may still prove it; it is made again at each
-- execution, not kept.)
DROP INDEX runs_created;
DROP INDEX runs_status_created;
DROP INDEX runs_workflow_created;
CREATE INDEX runs_created ON runs (tenant_id, created_at, run_id) WHERE run_id <> '';
CREATE INDEX runs_status_created ON runs (tenant_id, status, created_at, run_id) WHERE run_id <> '';
CREATE INDEX runs_workflow_created ON runs (tenant_id, workflow_name, created_at, run_id) WHERE run_id <> '';
