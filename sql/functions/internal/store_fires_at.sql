-- Internal: the body of cronbox.store_fires, with the time as its last parameter p_now. The public
-- cronbox.store_fires passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.store_fires_at(...): the second half of a saturation pass, set-based over parallel
-- arrays (one statement per table whatever the batch size). Inserts the computed fires as
-- futures (idempotent on job_future_fire_unique; due_at = the fire time, or now for a fire
-- already past, + random jitter), records
-- fires the catch-up policy dropped as 'missed' history rows in bounded form: one row per
-- gap (fire_at = first missed fire, missed_last_at = last, missed_fires = how many; counted
-- in job_stat.missed_count),
-- advances each job's frontier and next_fire (its narrow cronbox.job_fire row: the job row
-- is written only for the few jobs that finish, break, or close a stretch of excluded fires),
-- marks jobs with no fire left finished, and pauses jobs whose fires could not be computed.
-- Jobs must be locked by claim_saturation. Sends no NOTIFY (the caller wakes its dispatch).
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
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_futures integer;
    v_missed integer;
    v_excluded text[];  -- per fire: the calendar that excludes it (cronbox.excluded_by), NULL: none
    v_cut boolean[];    -- per fire: beyond the job's max_runs
    v_stored bigint[];  -- the job of each future written
    v_max_runs boolean := false;  -- a job of this pass has max_runs
    v_rows bigint[];    -- jobs of this pass whose job row may change besides finishing or breaking
BEGIN
    -- Exclusion calendars: THE predicate (cronbox.excluded_by, also behind preview and
    -- next_fires), asked only when a job of this pass uses a calendar.
    IF EXISTS (SELECT 1 FROM cronbox.job_calendar jc WHERE jc.job_id = ANY (p_job)) THEN
        WITH per_job AS (
            SELECT array_agg(f.i ORDER BY f.i) AS pos, array_agg(f.fire_at ORDER BY f.i) AS fires, c.ids
            FROM unnest(p_fire_job, p_fire_at, p_missed) WITH ORDINALITY AS f(job_id, fire_at, missed, i)
            JOIN (SELECT jc.job_id, array_agg(jc.calendar_id) AS ids FROM cronbox.job_calendar jc
                  WHERE jc.job_id = ANY (p_job) GROUP BY jc.job_id) c ON c.job_id = f.job_id
            WHERE NOT f.missed
            GROUP BY f.job_id, c.ids
        ),
        why AS (
            SELECT x.i, x.cal FROM per_job p
            CROSS JOIN LATERAL unnest(p.pos, cronbox.excluded_by(p.ids, p.fires)) AS x(i, cal)
        )
        SELECT array_agg(w.cal ORDER BY f.i) INTO v_excluded
        FROM generate_subscripts(p_fire_job, 1) AS f(i)
        LEFT JOIN why w ON w.i = f.i;
    END IF;
    -- max_runs: the k-th fire of a job in this pass is stored only while fires_made + k <= max_runs.
    IF EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = ANY (p_job) AND j.max_runs IS NOT NULL) THEN
        v_max_runs := true;
        SELECT array_agg(x.cut ORDER BY x.i) INTO v_cut FROM (
            SELECT f.i, j.max_runs IS NOT NULL AND NOT f.missed AND v_excluded[f.i] IS NULL
                        AND j.fires_made + count(*) FILTER (WHERE NOT f.missed AND v_excluded[f.i] IS NULL)
                            OVER (PARTITION BY f.job_id ORDER BY f.i) > j.max_runs AS cut
            FROM unnest(p_fire_job, p_missed) WITH ORDINALITY AS f(job_id, missed, i)
            CROSS JOIN LATERAL (SELECT j.max_runs, jf.fires_made FROM cronbox.job j
                                JOIN cronbox.job_fire jf ON jf.job_id = j.job_id
                                WHERE j.job_id = f.job_id LIMIT 1) j) x;
    END IF;

    WITH written AS (
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, bucket, queue)
        -- a fire already past when stored (catch-up) is due from now: queued behind what
        -- was due before it was known, never ahead of other jobs' fires due meanwhile
        SELECT f.job_id, f.fire_at,
               greatest(f.fire_at, p_now)
                   + CASE WHEN j.jitter > interval '0' THEN random() * j.jitter ELSE interval '0' END,
               j.priority, j.bucket, j.queue
        FROM unnest(p_fire_job, p_fire_at, p_missed) WITH ORDINALITY AS f(job_id, fire_at, missed, i)
        -- each fire's job by its key, one probe per fire whatever the statistics say (docs/
        -- architecture.md, SQL conventions: a join planned while the job table looked empty
        -- read it whole, 2,000,000 rows to store 100 jobs' fires)
        CROSS JOIN LATERAL (SELECT j.jitter, j.priority, j.bucket, j.queue FROM cronbox.job j
                            WHERE j.job_id = f.job_id LIMIT 1) j
        WHERE NOT f.missed AND v_excluded[f.i] IS NULL AND v_cut[f.i] IS NOT TRUE
        ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
        RETURNING job_id
    )
    SELECT array_agg(w.job_id) INTO v_stored FROM written w;
    v_futures := coalesce(cardinality(v_stored), 0);

    INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                             priority, finished_at, error, missed_fires, missed_last_at, bucket, trouble)
    SELECT cronbox.new_run_id(), f.job_id, j.name, j.queue, f.fire_at, f.fire_at,
           'missed', j.priority, p_now,
           format('missed: %s%s fire%s from %s to %s dropped by catch-up policy %s',
                  CASE WHEN f.exact IS false THEN 'at least ' ELSE '' END, coalesce(f.n, 1),
                  CASE WHEN coalesce(f.n, 1) = 1 THEN '' ELSE 's' END,
                  f.fire_at, coalesce(f.last, f.fire_at), j.catchup),
           coalesce(f.n, 1), coalesce(f.last, f.fire_at), j.bucket, cronbox.run_trouble('missed')
    FROM unnest(p_fire_job, p_fire_at, p_missed, p_gap_last, p_gap_count, p_gap_exact)
         AS f(job_id, fire_at, missed, last, n, exact)
    CROSS JOIN LATERAL (SELECT j.name, j.queue, j.priority, j.catchup, j.bucket FROM cronbox.job j
                        WHERE j.job_id = f.job_id LIMIT 1) j
    WHERE f.missed;
    GET DIAGNOSTICS v_missed = ROW_COUNT;

    IF v_excluded IS NOT NULL THEN
        PERFORM cronbox.record_excluded(p_fire_job, p_fire_at, p_missed, v_excluded, p_now);
    END IF;
    -- The job rows the pass may change besides those that finish or break: a finished job
    -- computed again (finished_at cleared), an open stretch of excluded fires (closed by a
    -- stored fire). Both are few: two small partial indexes (0290, 0331), no probe per job.
    v_rows := ARRAY(SELECT j.job_id FROM cronbox.job j WHERE j.job_id = ANY (p_job) AND j.finished_at IS NOT NULL
                    UNION
                    SELECT j.job_id FROM cronbox.job j WHERE j.job_id = ANY (p_job) AND j.excluded_run_id IS NOT NULL);

    WITH pass AS (
        SELECT a.job_id, a.frontier, a.next_fire, a.error, coalesce(m.n, 0) AS n_missed,
               coalesce(w.n, 0) AS n_stored,
               -- max_runs reached: nothing is left to fire, as for a one-off that has fired
               a.finished OR coalesce(j.fires_made + coalesce(w.n, 0) >= j.max_runs, false) AS finished,
               coalesce(j.fires_made + coalesce(w.n, 0) >= j.max_runs, false) AND NOT a.finished AS limit_reached
        FROM unnest(p_job, p_frontier, p_next_fire, p_finished, p_error)
             AS a(job_id, frontier, next_fire, finished, error)
        -- (read only when a job of the pass has max_runs: otherwise no probe per job)
        LEFT JOIN LATERAL (SELECT jf.fires_made, j.max_runs FROM cronbox.job j
                           JOIN cronbox.job_fire jf ON jf.job_id = j.job_id
                           WHERE v_max_runs AND j.job_id = a.job_id LIMIT 1) j ON true
        LEFT JOIN (
            SELECT f.job_id, sum(coalesce(f.n, 1)) AS n
            FROM unnest(p_fire_job, p_missed, p_gap_count) AS f(job_id, missed, n)
            WHERE f.missed GROUP BY f.job_id
        ) m ON m.job_id = a.job_id
        LEFT JOIN (
            SELECT s.job_id, count(*) AS n FROM unnest(v_stored) AS s(job_id) GROUP BY s.job_id
        ) w ON w.job_id = a.job_id
    ),
    -- Change-log rows for jobs that break in this pass, and for jobs that finish with no
    -- scheduled fire pending (read before the update); a job finishing with fires pending is
    -- logged finished when dispatch has decided the last one (cronbox.record_finished).
    logged AS (
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT j.job_id, j.name,
               CASE WHEN p.error IS NOT NULL THEN 'paused' ELSE 'finished' END,
               CASE WHEN p.error IS NOT NULL THEN 'poller cannot compute fires: ' || p.error
                    WHEN p.limit_reached THEN format('max_runs reached: %s fires', j.max_runs)
                    WHEN j.kind = 'at' THEN 'one-off fire handled'
                    WHEN p.frontier >= j.ends_at OR j.next_fire > j.ends_at THEN 'ends_at passed'
                    ELSE 'no fire left' END,
               session_user, p_now
        FROM (SELECT * FROM pass p WHERE p.error IS NOT NULL OR p.finished) p  -- the job read only then
        CROSS JOIN LATERAL (SELECT j.job_id, j.name, j.max_runs, j.kind, j.ends_at, jf.next_fire, j.finished_at
                            FROM cronbox.job j JOIN cronbox.job_fire jf ON jf.job_id = j.job_id
                            WHERE j.job_id = p.job_id LIMIT 1) j
        WHERE p.error IS NOT NULL
           OR (j.finished_at IS NULL AND p.n_stored = 0
               AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f WHERE f.job_id = p.job_id AND f.origin = 'schedule'))
    ),
    -- Missed fires are counted in the job's statistics row (cronbox.job_stat).
    -- (by key; a gap is rare, so the count is looked up per row)
    missed AS (
        UPDATE cronbox.job_stat s
        SET missed_count = s.missed_count + (SELECT p.n_missed FROM pass p WHERE p.job_id = s.job_id)
        WHERE s.job_id = ANY (ARRAY(SELECT p.job_id FROM pass p WHERE p.n_missed > 0))
    ),
    -- The pass per job as arrays in job_id order, found by binary search (width_bucket) from
    -- each row the updates reach by key: no join (docs/architecture.md, SQL conventions).
    per_job AS MATERIALIZED (
        SELECT array_agg(p.job_id ORDER BY p.job_id) AS ids,
               array_agg(p.frontier ORDER BY p.job_id) AS frontier,
               array_agg(p.next_fire ORDER BY p.job_id) AS next_fire,
               array_agg(p.finished ORDER BY p.job_id) AS finished,
               array_agg(p.n_stored ORDER BY p.job_id) AS n_stored,
               array_agg(p.error ORDER BY p.job_id) AS error
        FROM pass p
    ),
    -- The job row only where it changes: finished, broken, v_rows.
    job_rows AS (
        UPDATE cronbox.job j SET
            finished_at = CASE WHEN p.finished[width_bucket(j.job_id, p.ids)] THEN coalesce(j.finished_at, p_now) END,
            -- no calendar in this pass: a stored fire closes any open excluded stretch
            excluded_run_id = CASE WHEN v_excluded IS NULL AND p.n_stored[width_bucket(j.job_id, p.ids)] > 0
                                   THEN NULL ELSE j.excluded_run_id END,
            paused = j.paused OR p.error[width_bucket(j.job_id, p.ids)] IS NOT NULL,
            paused_reason = coalesce('poller cannot compute fires: ' || p.error[width_bucket(j.job_id, p.ids)],
                                     j.paused_reason),
            paused_at = CASE WHEN p.error[width_bucket(j.job_id, p.ids)] IS NOT NULL THEN p_now ELSE j.paused_at END
        FROM per_job p
        -- (one array parameter: an expression here would be applied after row security, no index)
        WHERE j.job_id = ANY (ARRAY(SELECT a.job_id FROM pass a WHERE a.finished OR a.error IS NOT NULL
                                    UNION ALL SELECT unnest(v_rows)))
    )
    UPDATE cronbox.job_fire f SET
        frontier = coalesce(p.frontier[width_bucket(f.job_id, p.ids)], f.frontier),
        next_fire = CASE WHEN p.finished[width_bucket(f.job_id, p.ids)] THEN NULL
                         ELSE p.next_fire[width_bucket(f.job_id, p.ids)] END,
        fires_made = f.fires_made + p.n_stored[width_bucket(f.job_id, p.ids)],
        paused = f.paused OR p.error[width_bucket(f.job_id, p.ids)] IS NOT NULL
    FROM per_job p
    WHERE f.job_id = ANY (p.ids);

    -- No NOTIFY: the poller that stored the fires wakes its own dispatch loop. A NOTIFY makes
    -- the commit take the database's notification lock and hold it through the WAL flush: every
    -- pass then waited for the other notifying commits (dispatch's among them) one flush at a
    -- time, and dispatch for the passes.
    RETURN QUERY SELECT v_futures, v_missed;
END
$$;

COMMENT ON FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[]) with the time as p_now; tests use it to fix the clock. Poller: stores a saturation pass computed from cronbox.claim_saturation: futures (idempotent, jitter applied to due_at), dropped fires as one missed history row per gap (first, last, count), each job''s new frontier and next fire, finished jobs, and pauses jobs whose fires cannot be computed.';

ALTER FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
