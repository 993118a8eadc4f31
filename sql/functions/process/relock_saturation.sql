-- cronbox.relock_saturation(p_job): the job's lock (its job_stat row, FOR NO KEY UPDATE SKIP
-- LOCKED) of each listed job that is free, unpaused and still has fires to materialise, and its
-- row in the shape cronbox.claim_saturation returned it (without the clock's columns). A
-- saturation pass whose computing outlasted its hold gives its locks up, computes on without
-- them, then takes them again with this and stores only the jobs whose row did not change
-- meanwhile (the poller compares): no pass holds job locks while it computes for long. A job
-- locked elsewhere (a worker reporting, schedule(), another poller) is left for a later pass.
-- Reads by key (job_stat, job_fire, job primary keys), one probe per listed job.
CREATE OR REPLACE FUNCTION cronbox.relock_saturation(
    p_job bigint[]
) RETURNS TABLE(job_id bigint, kind text, cron_normalized text, every interval, every_mode text, anchor timestamp with time zone, at timestamp with time zone, timezone text, frontier timestamp with time zone, catchup text, catchup_window interval, starts_at timestamp with time zone, ends_at timestamp with time zone)
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    IF cardinality(p_job) > 100000 THEN
        RAISE EXCEPTION 'p_job: must hold at most 100000 jobs, got %', cardinality(p_job)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the locks first, then the rows read in a second statement: the versions committed before
    -- the locks were taken (as cronbox.claim_saturation)
    v_ids := ARRAY(
        SELECT c.job_id FROM unnest(p_job) AS c(job_id)
        CROSS JOIN LATERAL (SELECT FROM cronbox.job_stat s WHERE s.job_id = c.job_id
                            FOR NO KEY UPDATE OF s SKIP LOCKED) l);
    RETURN QUERY
    SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
           j.timezone, f.frontier, j.catchup, j.catchup_window, j.starts_at, j.ends_at
    FROM unnest(v_ids) AS c(job_id)
    CROSS JOIN LATERAL (SELECT f.frontier, f.next_fire, f.paused
                        FROM cronbox.job_fire f WHERE f.job_id = c.job_id LIMIT 1) f
    CROSS JOIN LATERAL (SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
                               j.timezone, j.catchup, j.catchup_window, j.starts_at, j.ends_at
                        FROM cronbox.job j WHERE j.job_id = c.job_id LIMIT 1) j
    WHERE f.next_fire IS NOT NULL AND NOT f.paused;
END
$$;

COMMENT ON FUNCTION cronbox.relock_saturation(bigint[]) IS
'Poller: takes again (SKIP LOCKED) the locks of jobs a saturation pass computed without them and returns their rows as cronbox.claim_saturation did (unpaused jobs with fires left only); the poller stores the fires of the jobs whose row is unchanged, with cronbox.store_fires in the same transaction. At most 100,000 ids.';

ALTER FUNCTION cronbox.relock_saturation(bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.relock_saturation(bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.relock_saturation(bigint[]) TO cronbox_process;
