-- cronbox.relock_saturation(p_job, p_bucket): the job's lock (its job_stat row, FOR NO KEY UPDATE SKIP
-- LOCKED) of each listed job that is free, unpaused and still has fires to materialise, and its
-- row in the shape cronbox.claim_saturation returned it (without the clock's columns). A
-- saturation pass whose computing outlasted its hold gives its locks up, computes on without
-- them, then takes them again with this and stores only the jobs whose row did not change
-- meanwhile (the poller compares): no pass holds job locks while it computes for long. A job
-- locked elsewhere (a worker reporting, schedule(), another poller) is left for a later pass.
-- Reads by key (job_stat, job_fire, job primary keys), one probe per listed job.
-- p_bucket: the jobs' bucket (the poller relocks a pass bucket by bucket, as claimed); NULL:
-- every bucket set of cronbox.bucket_walks in turn (plain PostgreSQL: one, {0}).
CREATE OR REPLACE FUNCTION cronbox.relock_saturation(
    p_job bigint[],
    p_bucket integer DEFAULT NULL
) RETURNS TABLE(job_id bigint, kind text, cron_normalized text, every interval, every_mode text, anchor timestamp with time zone, at timestamp with time zone, timezone text, frontier timestamp with time zone, catchup text, catchup_window interval, starts_at timestamp with time zone, ends_at timestamp with time zone, bucket integer)
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_ids bigint[];
    v_walks integer[];
    v_set integer[];
BEGIN
    IF cardinality(p_job) > 100000 THEN
        RAISE EXCEPTION 'p_job: must hold at most 100000 jobs, got %', cardinality(p_job)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_walks := cronbox.bucket_walks('cronbox.job_fire', p_bucket);
    FOR w IN 1 .. array_length(v_walks, 1) LOOP
        v_set := ARRAY(SELECT unnest(v_walks[w:w]));
        -- the locks first, then the rows read in a second statement: the versions committed
        -- before the locks were taken (as cronbox.claim_saturation)
        v_ids := ARRAY(
            SELECT c.job_id FROM unnest(p_job) AS c(job_id)
            CROSS JOIN LATERAL (SELECT FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = c.job_id
                                FOR NO KEY UPDATE OF s SKIP LOCKED) l);
        CONTINUE WHEN cardinality(v_ids) = 0;
        RETURN QUERY
        SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
               j.timezone, f.frontier, j.catchup, j.catchup_window, j.starts_at, j.ends_at, j.bucket
        FROM unnest(v_ids) AS c(job_id)
        CROSS JOIN LATERAL (SELECT f.frontier, f.next_fire, f.paused
                            FROM cronbox.job_fire f WHERE f.bucket = ANY (v_set) AND f.job_id = c.job_id LIMIT 1) f
        CROSS JOIN LATERAL (SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
                                   j.timezone, j.catchup, j.catchup_window, j.starts_at, j.ends_at, j.bucket
                            FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = c.job_id LIMIT 1) j
        WHERE f.next_fire IS NOT NULL AND NOT f.paused;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.relock_saturation(bigint[], integer) IS
'Poller: takes again (SKIP LOCKED) the locks of jobs a saturation pass computed without them and returns their rows as cronbox.claim_saturation did (unpaused jobs with fires left only); the poller stores the fires of the jobs whose row is unchanged, with cronbox.store_fires in the same transaction. p_bucket: the jobs'' bucket (NULL: every bucket in turn). At most 100,000 ids.';

ALTER FUNCTION cronbox.relock_saturation(bigint[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.relock_saturation(bigint[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.relock_saturation(bigint[], integer) TO cronbox_process;
