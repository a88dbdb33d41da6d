-- The retention purge of every tenant takes the oldest snapshots first,
-- whatever their tenant.
CREATE INDEX retrieval_snapshots_age ON retrieval_snapshots (created_at);
