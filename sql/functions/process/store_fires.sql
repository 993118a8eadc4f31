-- cronbox.store_fires(...): the second half of a saturation pass, set-based over parallel
-- arrays (one statement per table whatever the batch size). Inserts the computed fires as
-- futures (idempotent on job_future_fire_unique; due_at = fire_at + random jitter), records
-- fires the catch-up policy dropped as ONE 'missed' history row per gap (p_gap_last: its last
-- fire, p_gap_count: how many, p_gap_exact: false when the count is a lower bound; counted
-- in job_stat.missed_count),
-- advances each job's frontier and next_fire, marks jobs with no fire left finished, and
-- pauses jobs whose fires could not be computed. Jobs must be locked by claim_saturation.
-- p_bucket: the jobs' bucket, as the claim returned it (the poller stores a pass bucket by
-- bucket: on Citus each statement is then one shard's); NULL: every bucket (docs/citus.md).
-- Thin wrapper: the body is cronbox.store_fires_at (internal/store_fires_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.store_fires(
    p_fire_job bigint[],
    p_fire_at timestamp with time zone[],
    p_missed boolean[],
    p_job bigint[],
    p_frontier timestamp with time zone[],
    p_next_fire timestamp with time zone[],
    p_finished boolean[],
    p_error text[],
    p_gap_last timestamp with time zone[] DEFAULT NULL,
    p_gap_count bigint[] DEFAULT NULL,
    p_gap_exact boolean[] DEFAULT NULL,
    p_bucket integer DEFAULT NULL
) RETURNS TABLE(futures integer, missed integer)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.store_fires_at($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now())
$$;

COMMENT ON FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer) IS
'Poller: stores a saturation pass computed from cronbox.claim_saturation: futures (idempotent, jitter applied to due_at), dropped fires as one missed history row per gap (first, last, count), each job''s new frontier and next fire, finished jobs, and pauses jobs whose fires cannot be computed. p_bucket: the jobs'' bucket (NULL: every bucket).';

ALTER FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer) TO cronbox_process;
