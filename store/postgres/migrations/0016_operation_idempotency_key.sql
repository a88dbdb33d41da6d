-- The key an operation is sent under (0016). It was the operation id, which
-- is derived from the run id and the call's business key only: two tenants
-- with the same run id sent the same key to a shared external system, which
-- took the second request for a replay of the first. An operation prepared
-- from now on stores a key derived from its tenant too; an older one keeps
-- its id as its key ('' here), so an operation in flight across the upgrade
-- is reconciled under the key it was sent with.
ALTER TABLE tool_operations ADD COLUMN idempotency_key text NOT NULL DEFAULT '';
