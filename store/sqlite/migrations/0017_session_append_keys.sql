-- The latest keyed message appends of a session (0017): a JSON list of
-- {k: key, d: digest, s: first seq, n: count}, at most
-- session.MaxAppendKeys, so a retried append under its Idempotency-Key is
-- answered, not appended twice. It lives in the session's row, so it goes
-- with the session.
ALTER TABLE sessions ADD COLUMN append_keys text;
