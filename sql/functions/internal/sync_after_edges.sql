-- cronbox.sync_after_edges(p_job_ids): the after-job edges of these jobs
-- (cronbox.job_after_edge) made equal to their `after` lists: edges no longer listed deleted,
-- new ones inserted; a job that no longer exists loses its edges. Called by
-- cronbox.add_job_rows (new jobs), cronbox.schedule (an update of a job) and
-- cronbox.unschedule. Idempotent. Returns the number of edges inserted or deleted.
CREATE OR REPLACE FUNCTION cronbox.sync_after_edges(p_job_ids bigint[]) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_gone integer;
    v_made integer;
BEGIN
    DELETE FROM cronbox.job_after_edge e
    WHERE e.job_id = ANY (p_job_ids)
      AND NOT EXISTS (SELECT 1 FROM cronbox.job j
                      WHERE j.job_id = e.job_id AND j.bucket = e.bucket AND e.upstream = ANY (j.after));
    GET DIAGNOSTICS v_gone = ROW_COUNT;
    INSERT INTO cronbox.job_after_edge (upstream, job_id, bucket)
    SELECT DISTINCT u.name, j.job_id, j.bucket
    FROM cronbox.job j CROSS JOIN LATERAL unnest(j.after) AS u(name)
    WHERE j.job_id = ANY (p_job_ids) AND j.after IS NOT NULL AND u.name IS NOT NULL
    ON CONFLICT (upstream, job_id) DO NOTHING;
    GET DIAGNOSTICS v_made = ROW_COUNT;
    RETURN v_gone + v_made;
END
$$;

COMMENT ON FUNCTION cronbox.sync_after_edges(bigint[]) IS
'Internal: makes the after-job edges of these jobs (cronbox.job_after_edge) equal to their after lists; a job that no longer exists loses its edges. Idempotent.';

ALTER FUNCTION cronbox.sync_after_edges(bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.sync_after_edges(bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
