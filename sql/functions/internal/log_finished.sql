-- cronbox.log_finished(p_jobs, p_names, p_reasons, p_since, p_now): writes the change log's
-- 'finished' row of each job given (side by side: id, name, reason, finished_at), once per
-- finish: not for a job with a 'finished' row since its finished_at (a probe of
-- job_change_job_idx per job). The caller found the jobs finished under their locks
-- (cronbox.record_finished; cronbox.dispatch_plain, from the batch it read). Returns the rows written.
CREATE OR REPLACE FUNCTION cronbox.log_finished(p_jobs bigint[], p_names text[], p_reasons text[],
                                                p_since timestamptz[], p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_logged integer;
BEGIN
    WITH logged AS (
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT c.job_id, c.name, 'finished', c.reason, session_user, p_now
        FROM unnest(p_jobs, p_names, p_reasons, p_since) AS c(job_id, name, reason, since)
        -- a probe per job (job_change_job_idx), never a join planned over the whole change log
        WHERE (SELECT x.job_id FROM cronbox.job_change x
               WHERE x.job_id = c.job_id AND x.action = 'finished' AND x.changed_at >= c.since LIMIT 1) IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_logged FROM logged;
    RETURN v_logged;
END
$$;

COMMENT ON FUNCTION cronbox.log_finished(bigint[], text[], text[], timestamp with time zone[], timestamp with time zone) IS
'Internal: writes the ''finished'' change row of each job given (id, name, reason, finished_at side by side), once per finish (none since its finished_at); the caller found them finished under their locks (record_finished, dispatch_plain). Returns the rows written.';

ALTER FUNCTION cronbox.log_finished(bigint[], text[], text[], timestamp with time zone[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.log_finished(bigint[], text[], text[], timestamp with time zone[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
