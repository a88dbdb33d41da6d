-- The change (delta) the run's last commit stored in its event, or NULL
-- when that event is a snapshot. The commit computes it in the UPDATE's SET
-- list from the row version it replaces (exactly the expected revision) and
-- hands it to the event INSERT through RETURNING, which sees only new
-- values: one scan of the run row instead of a read and a join.
ALTER TABLE runs ADD COLUMN last_change jsonb;

-- The running spend totals plus a commit's spend (run.AddSpend). A function
-- rather than a sub-select in the commit: a sub-select is set up at every
-- execution of the commit even when the commit has no spend, and that setup
-- costs as much as the rest of its SET list; PL/pgSQL keeps its plan per
-- session and runs only when called.
CREATE FUNCTION memento_add_spend(total jsonb, spend jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
	RETURN (SELECT jsonb_object_agg(k, coalesce((total ->> k)::numeric, 0) + coalesce((spend ->> k)::numeric, 0))
		FROM (SELECT jsonb_object_keys(total) UNION SELECT jsonb_object_keys(spend)) ks(k));
END
$$;
