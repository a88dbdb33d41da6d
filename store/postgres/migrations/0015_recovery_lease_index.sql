-- Recovery at constant cost, also in the number of live leases (0015).
--
-- The poll's running part used to walk every running run in runs_active
-- and filter the lease from the heap: its cost grew with the running runs
-- of a healthy system, all of which hold a live lease and need nothing.
-- runs_lease_due keys the running runs by when their lease stops being
-- live (-infinity for a free one), so the poll reads the range up to now()
-- and visits only runs it returns.
--
-- The price: acquiring, renewing and releasing a lease changes an indexed
-- column, so those updates are no longer HOT (a commit changes neither
-- column and stays HOT). A lease is renewed once per few commits at most;
-- the poll runs several times a second per worker.
CREATE INDEX runs_lease_due ON runs (tenant_id,
    (CASE WHEN lease_owner = '' OR lease_expires_at IS NULL THEN '-infinity'::timestamptz ELSE lease_expires_at END))
    WHERE status = 'running';

-- The poll's wake-up part likewise reads only due wake-ups: a suspended run
-- waiting for an approval that expires tomorrow has a timed wake-up that
-- the primary key (tenant_id, run_id, wake_at) would make every poll walk.
CREATE INDEX run_wakeups_due ON run_wakeups (tenant_id, wake_at);
