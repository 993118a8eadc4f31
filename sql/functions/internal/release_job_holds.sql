-- cronbox.release_job_holds(p_job_id, p_now): makes every held future of one job ready again
-- so the next dispatch decides afresh. Called by cronbox.resume (a paused job's fires go at
-- once) and cronbox.remove_dependency. Locks the job's held futures (job_future_held_idx).
-- Idempotent. Returns the number released.
CREATE OR REPLACE FUNCTION cronbox.release_job_holds(
    p_job_id bigint,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN cronbox.release_futures(ARRAY(
        SELECT f.future_id FROM cronbox.job_future f
        -- the job's futures by key; the hold checked in a form that matches no partial index
        -- (cronbox.release_futures says why)
        WHERE f.job_id = p_job_id AND coalesce(f.hold, '') <> ''));
END
$$;

COMMENT ON FUNCTION cronbox.release_job_holds(bigint,timestamp with time zone) IS
'Makes all held futures of a job ready again (resume, remove_dependency); dispatch decides afresh. Returns the count.';

ALTER FUNCTION cronbox.release_job_holds(bigint,timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_job_holds(bigint,timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
