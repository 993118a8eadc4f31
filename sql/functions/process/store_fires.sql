-- cronbox.store_fires(...): the second half of a saturation pass, set-based over parallel
-- arrays (one statement per table whatever the batch size). Inserts the computed fires as
-- futures (idempotent on job_future_fire_unique; due_at = fire_at + random jitter), records
-- fires the catch-up policy dropped as 'missed' history rows (counted in job.missed_count),
-- advances each job's frontier and next_fire, marks jobs with no fire left finished, and
-- pauses jobs whose fires could not be computed. Jobs must be locked by claim_saturation.
-- Thin wrapper: the body is cronbox.store_fires_at (internal/store_fires_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.store_fires(
    p_fire_job bigint[],
    p_fire_at timestamp with time zone[],
    p_missed boolean[],
    p_job bigint[],
    p_frontier timestamp with time zone[],
    p_next_fire timestamp with time zone[],
    p_finished boolean[],
    p_error text[]
) RETURNS TABLE(futures integer, missed integer)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.store_fires_at($1, $2, $3, $4, $5, $6, $7, $8, now())
$$;

COMMENT ON FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[]) IS
'Poller: stores a saturation pass computed from cronbox.claim_saturation: futures (idempotent, jitter applied to due_at), dropped fires as missed history rows, each job''s new frontier and next fire, finished jobs, and pauses jobs whose fires cannot be computed.';

ALTER FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[]) TO cronbox_process;
