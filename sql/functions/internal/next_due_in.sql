-- cronbox.next_due_in(p_walks, p_bucket): the earliest due time among the ready futures of the
-- bucket sets a dispatch walked (cronbox.bucket_walks), or NULL. One set of every bucket
-- (plain PostgreSQL, or hot tables not distributed) and no bucket named: cronbox.next_due(),
-- one probe per priority. Otherwise each set's lanes (cronbox.ready_lanes), one statement per
-- set, so a statement never spans the shards of a distributed job_future.
CREATE OR REPLACE FUNCTION cronbox.next_due_in(p_walks integer[], p_bucket integer) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_due timestamptz;
    v_min timestamptz;
BEGIN
    IF p_bucket IS NULL AND array_length(p_walks, 1) = 1 THEN
        RETURN cronbox.next_due();
    END IF;
    FOR i IN 1 .. array_length(p_walks, 1) LOOP
        SELECT min(r.due_at) INTO v_due
        FROM cronbox.ready_lanes(ARRAY(SELECT unnest(p_walks[i:i]))) r;
        v_min := least(v_min, v_due);
    END LOOP;
    RETURN v_min;
END
$$;

COMMENT ON FUNCTION cronbox.next_due_in(integer[], integer) IS
'Internal: the earliest due time among ready futures of the bucket sets p_walks (cronbox.bucket_walks; one statement per set), or NULL; cronbox.next_due() when the one set is every bucket.';

ALTER FUNCTION cronbox.next_due_in(integer[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.next_due_in(integer[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
