-- Internal: the body of cronbox.store_fires, with the time as its last parameter p_now. The public
-- cronbox.store_fires passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.store_fires_at(...): the second half of a saturation pass, set-based over parallel
-- arrays (one statement per table whatever the batch size). Inserts the computed fires as
-- futures (idempotent on job_future_fire_unique; due_at = fire_at + random jitter), records
-- fires the catch-up policy dropped as 'missed' history rows in bounded form: one row per
-- gap (fire_at = first missed fire, missed_last_at = last, missed_fires = how many; counted
-- in job_stat.missed_count),
-- advances each job's frontier and next_fire, marks jobs with no fire left finished, and
-- pauses jobs whose fires could not be computed. Jobs must be locked by claim_saturation.
CREATE OR REPLACE FUNCTION cronbox.store_fires_at(
    p_fire_job   bigint[],       -- one element per fire
    p_fire_at    timestamptz[],
    p_missed     boolean[],
    p_job        bigint[],       -- one element per claimed job
    p_frontier   timestamptz[],  -- new frontier (last fire handled), NULL = unchanged
    p_next_fire  timestamptz[],  -- exact next fire to materialise, NULL = none for now
    p_finished   boolean[],      -- true: no fire is left, ever
    p_error      text[],         -- not NULL: the poller could not compute this job's fires
    p_gap_last   timestamptz[] DEFAULT NULL,  -- per fire: a missed entry's last fire (NULL = itself)
    p_gap_count  bigint[] DEFAULT NULL,       -- per fire: a missed entry's number of fires (NULL = 1)
    p_gap_exact  boolean[] DEFAULT NULL,      -- per fire: false = the count is a lower bound
    p_now        timestamptz DEFAULT now()
) RETURNS TABLE (futures integer, missed integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_futures integer;
    v_missed integer;
BEGIN
    INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority)
    SELECT f.job_id, f.fire_at,
           f.fire_at + CASE WHEN j.jitter > interval '0' THEN random() * j.jitter ELSE interval '0' END,
           j.priority
    FROM unnest(p_fire_job, p_fire_at, p_missed) AS f(job_id, fire_at, missed)
    JOIN cronbox.job j ON j.job_id = f.job_id
    WHERE NOT f.missed
    ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING;
    GET DIAGNOSTICS v_futures = ROW_COUNT;

    INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                             priority, created_at, finished_at, error, missed_fires, missed_last_at)
    SELECT cronbox.new_run_id(), f.job_id, j.name, j.queue, f.fire_at, f.fire_at,
           'missed', j.priority, p_now, p_now,
           format('missed: %s%s fire%s from %s to %s dropped by catch-up policy %s',
                  CASE WHEN f.exact IS false THEN 'at least ' ELSE '' END, coalesce(f.n, 1),
                  CASE WHEN coalesce(f.n, 1) = 1 THEN '' ELSE 's' END,
                  f.fire_at, coalesce(f.last, f.fire_at), j.catchup),
           coalesce(f.n, 1), coalesce(f.last, f.fire_at)
    FROM unnest(p_fire_job, p_fire_at, p_missed, p_gap_last, p_gap_count, p_gap_exact)
         AS f(job_id, fire_at, missed, last, n, exact)
    JOIN cronbox.job j ON j.job_id = f.job_id
    WHERE f.missed;
    GET DIAGNOSTICS v_missed = ROW_COUNT;

    WITH pass AS (
        SELECT a.job_id, a.frontier, a.next_fire, a.finished, a.error, coalesce(m.n, 0) AS n_missed
        FROM unnest(p_job, p_frontier, p_next_fire, p_finished, p_error)
             AS a(job_id, frontier, next_fire, finished, error)
        LEFT JOIN (
            SELECT f.job_id, sum(coalesce(f.n, 1)) AS n
            FROM unnest(p_fire_job, p_missed, p_gap_count) AS f(job_id, missed, n)
            WHERE f.missed GROUP BY f.job_id
        ) m ON m.job_id = a.job_id
    ),
    -- Change-log rows for jobs that finish or break in this pass (read before the update).
    logged AS (
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT j.job_id, j.name,
               CASE WHEN p.error IS NOT NULL THEN 'paused' ELSE 'finished' END,
               CASE WHEN p.error IS NOT NULL THEN 'poller cannot compute fires: ' || p.error
                    WHEN j.kind = 'at' THEN 'one-off fire handled'
                    WHEN p.frontier >= j.ends_at OR j.next_fire > j.ends_at THEN 'ends_at passed'
                    ELSE 'no fire left' END,
               session_user, p_now
        FROM pass p JOIN cronbox.job j ON j.job_id = p.job_id
        WHERE p.error IS NOT NULL OR (p.finished AND j.finished_at IS NULL)
    ),
    -- Missed fires are counted in the job's statistics row (cronbox.job_stat).
    missed AS (
        UPDATE cronbox.job_stat s SET missed_count = s.missed_count + p.n_missed
        FROM pass p
        WHERE s.job_id = p.job_id AND p.n_missed > 0
    )
    UPDATE cronbox.job j SET
        frontier = coalesce(p.frontier, j.frontier),
        next_fire = p.next_fire,
        finished_at = CASE WHEN p.finished THEN coalesce(j.finished_at, p_now) END,
        paused = j.paused OR p.error IS NOT NULL,
        paused_reason = CASE WHEN p.error IS NOT NULL THEN 'poller cannot compute fires: ' || p.error
                             ELSE j.paused_reason END,
        paused_at = CASE WHEN p.error IS NOT NULL THEN p_now ELSE j.paused_at END
    FROM pass p
    WHERE j.job_id = p.job_id;

    IF v_futures > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN QUERY SELECT v_futures, v_missed;
END
$$;

COMMENT ON FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[]) with the time as p_now; tests use it to fix the clock. Poller: stores a saturation pass computed from cronbox.claim_saturation: futures (idempotent, jitter applied to due_at), dropped fires as one missed history row per gap (first, last, count), each job''s new frontier and next fire, finished jobs, and pauses jobs whose fires cannot be computed.';

ALTER FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
