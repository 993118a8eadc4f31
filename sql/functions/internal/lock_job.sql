-- cronbox.lock_job(name): the job's lock (cronbox.lock_job_named), then the job row locked FOR
-- UPDATE, for the functions that change one job by name (pause, resume). Raises 22004 for a
-- NULL name and P0002 (no_data_found) 'name: no schedule named ...' for an unknown (or, under
-- row security, invisible) one.
CREATE OR REPLACE FUNCTION cronbox.lock_job(p_name text) RETURNS cronbox.job
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_bucket integer;
BEGIN
    PERFORM cronbox.assert_not_null('name', p_name);
    v_bucket := cronbox.job_bucket(p_name);  -- the job's bucket, its name's
    -- the job's lock (its job_stat row) before its job row lock, as everyone takes them
    PERFORM cronbox.lock_job_named(p_name, v_bucket);
    SELECT * INTO v_job FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'name: no schedule named %', quote_literal(p_name) USING ERRCODE = 'no_data_found';
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION cronbox.lock_job(text) IS
'Internal: the job named p_name, its lock (cronbox.lock_job_named) taken and its row locked FOR UPDATE; 22004 for NULL, P0002 for an unknown name.';

ALTER FUNCTION cronbox.lock_job(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_job(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
