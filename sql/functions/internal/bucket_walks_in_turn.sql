-- cronbox.bucket_walks_in_turn(p_table, p_bucket): cronbox.bucket_walks(p_table, p_bucket) in the
-- order a walk that may stop early visits them: from a random set onwards, wrapping round, so
-- that a walk cut short by its limit does not always serve the same buckets first. One set
-- (plain PostgreSQL, or a bucket given): that set. Loop over it with
-- `FOREACH v_set SLICE 1 IN ARRAY cronbox.bucket_walks_in_turn(...)`. No locks, no writes.
CREATE OR REPLACE FUNCTION cronbox.bucket_walks_in_turn(p_table regclass, p_bucket integer DEFAULT NULL) RETURNS integer[]
LANGUAGE plpgsql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_walks integer[] := cronbox.bucket_walks(p_table, p_bucket);
    v_n integer := array_length(v_walks, 1);
    v_start integer;
BEGIN
    IF v_n = 1 THEN
        RETURN v_walks;
    END IF;
    v_start := floor(random() * v_n)::integer;
    RETURN v_walks[v_start + 1 : v_n] || v_walks[1 : v_start];
END
$$;

COMMENT ON FUNCTION cronbox.bucket_walks_in_turn(regclass, integer) IS
'Internal: cronbox.bucket_walks(p_table, p_bucket) (2-D, a row per bucket set) rotated to start from a random set, so that walks cut short by a limit take the buckets in turn.';

ALTER FUNCTION cronbox.bucket_walks_in_turn(regclass, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.bucket_walks_in_turn(regclass, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
