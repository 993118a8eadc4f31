-- cronbox.store_fires(...): the second half of a saturation pass. Inserts the computed fires
-- as futures (idempotent on job_future_fire_unique), records fires the catch-up policy
-- dropped as 'missed' history rows, and advances each job's frontier / next_fire.
-- Set-based over parallel arrays: one statement per table, whatever the batch size.
-- Jobs must be locked by cronbox.claim_saturation in the same transaction.
CREATE OR REPLACE FUNCTION cronbox.store_fires(
    p_fire_job   bigint[],       -- one element per fire
    p_fire_at    timestamptz[],
    p_missed     boolean[],
    p_job        bigint[],       -- one element per claimed job
    p_frontier   timestamptz[],  -- new frontier (last fire handled), NULL = unchanged
    p_next_fire  timestamptz[],  -- next fire to materialise, NULL = none left (finished)
    p_now        timestamptz DEFAULT now()
) RETURNS TABLE (futures integer, missed integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_futures integer;
    v_missed integer;
BEGIN
    WITH fire AS (
        SELECT f.job_id, f.fire_at
        FROM unnest(p_fire_job, p_fire_at, p_missed) AS f(job_id, fire_at, missed)
        WHERE NOT f.missed
    )
    INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority)
    SELECT fire.job_id, fire.fire_at,
           fire.fire_at + CASE WHEN j.jitter > interval '0' THEN random() * j.jitter ELSE interval '0' END,
           j.priority
    FROM fire JOIN cronbox.job j ON j.job_id = fire.job_id
    ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING;
    GET DIAGNOSTICS v_futures = ROW_COUNT;

    WITH fire AS (
        SELECT f.job_id, f.fire_at
        FROM unnest(p_fire_job, p_fire_at, p_missed) AS f(job_id, fire_at, missed)
        WHERE f.missed
    )
    INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                             priority, created_at, finished_at, error)
    SELECT cronbox.new_run_id(), fire.job_id, j.name, j.queue, fire.fire_at, fire.fire_at,
           'missed', j.priority, p_now, p_now, 'missed: catch-up policy ' || j.catchup
    FROM fire JOIN cronbox.job j ON j.job_id = fire.job_id;
    GET DIAGNOSTICS v_missed = ROW_COUNT;

    UPDATE cronbox.job j SET
        frontier = coalesce(a.frontier, j.frontier),
        next_fire = a.next_fire,
        finished_at = CASE WHEN a.next_fire IS NULL AND j.kind <> 'after' THEN p_now END,
        missed_count = j.missed_count + coalesce(m.n, 0)
    FROM unnest(p_job, p_frontier, p_next_fire) AS a(job_id, frontier, next_fire)
    LEFT JOIN (
        SELECT f.job_id, count(*) AS n
        FROM unnest(p_fire_job, p_missed) AS f(job_id, missed)
        WHERE f.missed GROUP BY f.job_id
    ) m ON m.job_id = a.job_id
    WHERE j.job_id = a.job_id;

    IF v_futures > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN QUERY SELECT v_futures, v_missed;
END
$$;

COMMENT ON FUNCTION cronbox.store_fires(bigint[], timestamptz[], boolean[], bigint[], timestamptz[], timestamptz[], timestamptz) IS
'Poller: stores a saturation pass computed from cronbox.claim_saturation: futures (idempotent), missed fires as history, and each job''s new frontier and next fire.';
