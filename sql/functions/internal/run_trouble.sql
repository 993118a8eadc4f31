-- cronbox.run_trouble(state): the history row's `trouble` column (indexed by
-- run_trouble_history_idx, the console's failed / lost / cancelled / skipped / missed runs):
-- the state when it is one of those, else NULL. Every INSERT into cronbox.run writes it with
-- this function (tests/test_sql_layout.py checks). LANGUAGE sql, IMMUTABLE, no SET clause: it
-- is inlined into the statements that call it, planned once with them.
CREATE OR REPLACE FUNCTION cronbox.run_trouble(p_state text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
AS $$
    SELECT CASE WHEN p_state OPERATOR(pg_catalog.=) ANY (ARRAY['failed', 'lost', 'cancelled', 'skipped', 'missed']::text[])
                THEN p_state END
$$;

COMMENT ON FUNCTION cronbox.run_trouble(text) IS
'Internal: the value of cronbox.run.trouble for a run in this state: the state when it is failed, lost, cancelled, skipped or missed, else NULL.';

ALTER FUNCTION cronbox.run_trouble(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.run_trouble(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
