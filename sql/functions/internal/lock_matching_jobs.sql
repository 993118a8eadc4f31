-- cronbox.lock_matching_jobs(p_queue, p_owner, p_name_like, p_paused): the jobs a bulk pause or
-- resume changes, checked and locked. Arguments: at least one of queue (a queue name as
-- schedule() takes it), owner (a role name, 1..63 characters) and name_like (a LIKE pattern,
-- 1..200 characters, not ending in an escaping backslash) (22004 none given, 22023 bad value).
-- The jobs visible to the caller (row security: a cronbox_user's own) that match every given
-- filter and whose paused flag is p_paused. Locks each one's lock (its job_stat row, FOR NO KEY
-- UPDATE, in job_id order as finish_runs does; waits for a poller's dispatch of them to commit)
-- and then its row (FOR UPDATE), and keeps those still matching under the locks. One statement
-- per step, whatever the number of jobs. Returns their ids in job_id order (NULL: none).
CREATE OR REPLACE FUNCTION cronbox.lock_matching_jobs(
    p_queue text, p_owner text, p_name_like text, p_paused boolean
) RETURNS bigint[]
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    IF p_queue IS NULL AND p_owner IS NULL AND p_name_like IS NULL THEN
        RAISE EXCEPTION 'queue: give queue, owner or name_like (at least one) to choose the schedules'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_queue IS NOT NULL THEN
        PERFORM cronbox.assert_queue_name('queue', p_queue);
    END IF;
    IF length(p_owner) NOT BETWEEN 1 AND 63 THEN
        RAISE EXCEPTION 'owner: must be a role name of 1 to 63 characters, got % characters', length(p_owner)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(p_name_like) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'name_like: must be a LIKE pattern of 1 to 200 characters, got % characters', length(p_name_like)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_name_like ~ '(^|[^\\])(\\\\)*\\$' THEN
        RAISE EXCEPTION 'name_like: must not end with an escaping backslash, got %', quote_literal(p_name_like)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT array_agg(j.job_id ORDER BY j.job_id) INTO v_ids
    FROM cronbox.job j
    WHERE j.paused = p_paused
      AND (p_queue IS NULL OR j.queue = p_queue)
      AND (p_owner IS NULL OR j.owner = p_owner)
      AND (p_name_like IS NULL OR j.name LIKE p_name_like);
    IF v_ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- The jobs' locks in job_id order (the order of the sort below the lock), then their rows.
    PERFORM 1 FROM (SELECT s.job_id FROM cronbox.job_stat s WHERE s.job_id = ANY (v_ids)
                    ORDER BY s.job_id FOR NO KEY UPDATE OF s) l;
    SELECT array_agg(x.job_id ORDER BY x.job_id) INTO v_ids
    FROM (SELECT j.job_id FROM cronbox.job j
          WHERE j.job_id = ANY (v_ids) AND j.paused = p_paused
            AND (p_queue IS NULL OR j.queue = p_queue)
            AND (p_owner IS NULL OR j.owner = p_owner)
            AND (p_name_like IS NULL OR j.name LIKE p_name_like)
          ORDER BY j.job_id
          FOR UPDATE OF j) x;
    RETURN v_ids;
END
$$;

COMMENT ON FUNCTION cronbox.lock_matching_jobs(text, text, text, boolean) IS
'Internal: the visible jobs matching a bulk pause or resume (queue, owner, name_like; paused = p_paused), validated and locked (job locks in job_id order, then rows); their ids.';

ALTER FUNCTION cronbox.lock_matching_jobs(text, text, text, boolean) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_matching_jobs(text, text, text, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
