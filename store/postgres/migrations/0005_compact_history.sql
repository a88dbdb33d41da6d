-- Compact history (run/doc.go): an event keeps either the whole state
-- (state, at seq 1 and every run.SnapshotEvery seqs) or a delta of the
-- top-level members against the event before (delta), never both. chain is
-- the hash chain through the event (run.ChainNext); the run keeps the head,
-- the seq a resume last verified it through, and the running spend totals
-- (NULL for runs from before: resume then sums their log as it did).
-- Rows written before keep their full state, a NULL delta and an empty chain.

ALTER TABLE run_events ALTER COLUMN state DROP NOT NULL;
ALTER TABLE run_events ADD COLUMN delta jsonb;
ALTER TABLE run_events ADD COLUMN chain text NOT NULL DEFAULT '';

ALTER TABLE runs ADD COLUMN chain_head text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN verified_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spent jsonb;
