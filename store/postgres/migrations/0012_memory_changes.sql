-- In-process indexes of a subject catch up by version (memory.Store.Changes):
-- the subject's claims by the version of their last write, and the version
-- of the subject's last forget that deleted claims (deleted rows name no
-- change, so an index older than that starts again).
ALTER TABLE memory_subjects ADD COLUMN forgotten bigint NOT NULL DEFAULT 0;

CREATE INDEX memory_claims_version ON memory_claims (tenant_id, subject_id, version);
