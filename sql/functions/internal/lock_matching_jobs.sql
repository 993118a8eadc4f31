-- cronbox.lock_matching_jobs(p_queue, p_owner, p_name_like, p_paused, p_buckets): the jobs of
-- the buckets p_buckets a bulk pause or resume changes, locked (the filters checked before by
-- cronbox.assert_job_filters). The jobs visible to the caller (row security: a cronbox_user's
-- own) that match every given filter and whose paused flag is p_paused. Locks each one's lock (its job_stat row, FOR NO KEY
-- UPDATE, in job_id order as finish_runs does; waits for a poller's dispatch of them to commit)
-- and then its row (FOR UPDATE), and keeps those still matching under the locks. One statement
-- per step, whatever the number of jobs. Returns their ids in job_id order (NULL: none).
CREATE OR REPLACE FUNCTION cronbox.lock_matching_jobs(
    p_queue text, p_owner text, p_name_like text, p_paused boolean, p_buckets integer[]
) RETURNS bigint[]
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    SELECT array_agg(j.job_id ORDER BY j.job_id) INTO v_ids
    FROM cronbox.job j
    WHERE j.bucket = ANY (p_buckets) AND j.paused = p_paused
      AND (p_queue IS NULL OR j.queue = p_queue)
      AND (p_owner IS NULL OR j.owner = p_owner)
      AND (p_name_like IS NULL OR j.name LIKE p_name_like);
    IF v_ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- The jobs' locks in job_id order (the order of the sort below the lock), then their rows.
    PERFORM 1 FROM (SELECT s.job_id FROM cronbox.job_stat s WHERE s.bucket = ANY (p_buckets) AND s.job_id = ANY (v_ids)
                    ORDER BY s.job_id FOR NO KEY UPDATE OF s) l;
    SELECT array_agg(x.job_id ORDER BY x.job_id) INTO v_ids
    FROM (SELECT j.job_id FROM cronbox.job j
          WHERE j.bucket = ANY (p_buckets) AND j.job_id = ANY (v_ids) AND j.paused = p_paused
            AND (p_queue IS NULL OR j.queue = p_queue)
            AND (p_owner IS NULL OR j.owner = p_owner)
            AND (p_name_like IS NULL OR j.name LIKE p_name_like)
          ORDER BY j.job_id
          FOR UPDATE OF j) x;
    RETURN v_ids;
END
$$;

COMMENT ON FUNCTION cronbox.lock_matching_jobs(text, text, text, boolean, integer[]) IS
'Internal: the visible jobs of the buckets p_buckets matching a bulk pause or resume (queue, owner, name_like; paused = p_paused), locked (job locks in job_id order, then rows); their ids.';

ALTER FUNCTION cronbox.lock_matching_jobs(text, text, text, boolean, integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_matching_jobs(text, text, text, boolean, integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
