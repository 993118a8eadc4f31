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
-- By bucket (docs/citus.md, "Saturation, bucket by bucket"): p_bucket is the bucket of the
-- pass's jobs (the poller stores a pass bucket by bucket, as claimed; NULL: every bucket at
-- once, plain PostgreSQL's one). Each statement reads and writes either that bucket's rows
-- (job, job_fire, job_stat, job_future) or the coordinator's own tables (history, change log)
-- from values read before, never both; the bucket's rows are updated by key, their values at
-- width_bucket's place in arrays in key order (job_fire, every pass) or looked up in one JSON
-- object (job, job_stat: the few jobs that finish, break, count missed fires or change).
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
    p_bucket     integer DEFAULT NULL,        -- the jobs' bucket; NULL: every bucket
    p_now        timestamptz DEFAULT now()
) RETURNS TABLE (futures integer, missed integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_set integer[];    -- the bucket set written (cronbox.bucket_walks)
    v_futures integer;
    v_missed integer := 0;
    v_excluded text[];  -- per fire: the calendar that excludes it (cronbox.excluded_by), NULL: none
    v_cut boolean[];    -- per fire: beyond the job's max_runs
    v_stored bigint[];  -- the job of each future written
    v_max_runs boolean := false;  -- a job of this pass has max_runs
    v_rows bigint[];    -- jobs of this pass whose job row may change besides finishing or breaking
    v_fj_ids bigint[];  -- the fires' jobs in id order, with their jitter, priority, bucket and queue
    v_fj_jitter interval[];
    v_fj_priority integer[];
    v_fj_bucket integer[];
    v_fj_queue jsonb;   -- (a JSON array: a text array is walked element by element to a subscript)
    v_gap jsonb;        -- job of a missed gap -> [name, queue, priority, catchup, bucket]
    v_change jsonb;     -- job whose row changes -> [finished, a fire stored, error]
    v_change_ids bigint[];
    v_n_missed jsonb;   -- job -> fires missed in this pass (those with some)
    v_missed_ids bigint[];
    v_log_job bigint[]; -- change-log rows: job, name, action, reason
    v_log_name text[];
    v_log_action text[];
    v_log_reason text[];
BEGIN
    -- The saturation state is written at width_bucket's place in p_job (a binary search): the
    -- poller sends its jobs in ascending id order, checked here rather than sorted again.
    IF EXISTS (SELECT 1 FROM generate_series(1, cardinality(p_job) - 1) AS k(i) WHERE p_job[k.i + 1] <= p_job[k.i]) THEN
        RAISE EXCEPTION 'p_job must list each job once, in ascending order' USING ERRCODE = '22023';
    END IF;
    v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.job_fire', p_bucket)));
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
    IF EXISTS (SELECT 1 FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (p_job)
               AND j.max_runs IS NOT NULL) THEN
        v_max_runs := true;
        SELECT array_agg(x.cut ORDER BY x.i) INTO v_cut FROM (
            SELECT f.i, j.max_runs IS NOT NULL AND NOT f.missed AND v_excluded[f.i] IS NULL
                        AND j.fires_made + count(*) FILTER (WHERE NOT f.missed AND v_excluded[f.i] IS NULL)
                            OVER (PARTITION BY f.job_id ORDER BY f.i) > j.max_runs AS cut
            FROM unnest(p_fire_job, p_missed) WITH ORDINALITY AS f(job_id, missed, i)
            CROSS JOIN LATERAL (SELECT j.max_runs, jf.fires_made FROM cronbox.job j
                                JOIN cronbox.job_fire jf ON jf.bucket = ANY (v_set) AND jf.job_id = j.job_id
                                WHERE j.bucket = ANY (v_set) AND j.job_id = f.job_id LIMIT 1) j) x;
    END IF;

    -- The fires' jobs, read in the bucket (one probe per job), then the futures written from
    -- those values, each fire's job found by binary search (width_bucket): a statement reading
    -- the bucket's jobs and writing its futures is not one task on Citus (docs/citus.md).
    SELECT array_agg(j.job_id ORDER BY j.job_id), array_agg(j.jitter ORDER BY j.job_id),
           array_agg(j.priority ORDER BY j.job_id), array_agg(j.bucket ORDER BY j.job_id),
           to_jsonb(array_agg(j.queue ORDER BY j.job_id))
      INTO v_fj_ids, v_fj_jitter, v_fj_priority, v_fj_bucket, v_fj_queue
    FROM cronbox.job j
    WHERE j.bucket = ANY (v_set)
      AND j.job_id = ANY (ARRAY(SELECT DISTINCT f.job_id FROM unnest(p_fire_job, p_missed) AS f(job_id, missed)
                                WHERE NOT f.missed));
    WITH written AS (
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, bucket, queue)
        -- a fire already past when stored (catch-up) is due from now: queued behind what
        -- was due before it was known, never ahead of other jobs' fires due meanwhile
        SELECT f.job_id, f.fire_at,
               greatest(f.fire_at, p_now)
                   + CASE WHEN v_fj_jitter[j.k] > interval '0' THEN random() * v_fj_jitter[j.k] ELSE interval '0' END,
               v_fj_priority[j.k], v_fj_bucket[j.k], v_fj_queue ->> (j.k - 1)
        FROM unnest(p_fire_job, p_fire_at, p_missed) WITH ORDINALITY AS f(job_id, fire_at, missed, i)
        CROSS JOIN LATERAL (SELECT width_bucket(f.job_id, v_fj_ids) AS k) j
        WHERE NOT f.missed AND v_excluded[f.i] IS NULL AND v_cut[f.i] IS NOT TRUE AND v_fj_ids[j.k] = f.job_id
        ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
        RETURNING job_id
    )
    SELECT array_agg(w.job_id) INTO v_stored FROM written w;
    v_futures := coalesce(cardinality(v_stored), 0);

    -- Dropped fires: one missed history row per gap, from the gaps' jobs read in the bucket.
    IF true = ANY (p_missed) THEN
        SELECT jsonb_object_agg(j.job_id::text, jsonb_build_array(j.name, j.queue, j.priority, j.catchup, j.bucket))
          INTO v_gap
        FROM cronbox.job j
        WHERE j.bucket = ANY (v_set)
          AND j.job_id = ANY (ARRAY(SELECT f.job_id FROM unnest(p_fire_job, p_missed) AS f(job_id, missed) WHERE f.missed));
        WITH written AS (
            INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                                     priority, finished_at, error, missed_fires, missed_last_at, bucket, trouble)
            SELECT cronbox.new_run_id(), f.job_id, j.g ->> 0, j.g ->> 1, f.fire_at, f.fire_at,
                   'missed', (j.g ->> 2)::integer, p_now,
                   format('missed: %s%s fire%s from %s to %s dropped by catch-up policy %s',
                          CASE WHEN f.exact IS false THEN 'at least ' ELSE '' END, coalesce(f.n, 1),
                          CASE WHEN coalesce(f.n, 1) = 1 THEN '' ELSE 's' END,
                          f.fire_at, coalesce(f.last, f.fire_at), j.g ->> 3),
                   coalesce(f.n, 1), coalesce(f.last, f.fire_at), (j.g ->> 4)::integer, cronbox.run_trouble('missed')
            FROM unnest(p_fire_job, p_fire_at, p_missed, p_gap_last, p_gap_count, p_gap_exact)
                 AS f(job_id, fire_at, missed, last, n, exact)
            CROSS JOIN LATERAL (SELECT v_gap -> f.job_id::text AS g) j
            WHERE f.missed AND j.g IS NOT NULL
            RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
        )
        SELECT count(*) INTO v_missed FROM written;
    END IF;

    IF v_excluded IS NOT NULL THEN
        PERFORM cronbox.record_excluded(p_fire_job, p_fire_at, p_missed, v_excluded, p_now, v_set);
    END IF;
    -- The job rows the pass may change besides those that finish or break: a finished job
    -- computed again (finished_at cleared), an open stretch of excluded fires (closed by a
    -- stored fire). Both are few: two small partial indexes (0290, 0331), no probe per job.
    v_rows := ARRAY(SELECT j.job_id FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (p_job)
                      AND j.finished_at IS NOT NULL
                    UNION
                    SELECT j.job_id FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (p_job)
                      AND j.excluded_run_id IS NOT NULL);

    -- A pass where a job may finish, break, reach max_runs, count missed fires or change its job
    -- row is read per job in the bucket first: the job rows that change, the missed counts, and
    -- the change-log rows of jobs that break in this pass or finish with no scheduled fire pending
    -- (read before the updates; a job finishing with fires pending shows as finished in the
    -- change log once dispatch has decided the last one: cronbox.job_finishes). Most passes have
    -- none of it.
    IF v_max_runs OR v_missed > 0 OR true = ANY (p_finished) OR cardinality(v_rows) > 0
       OR EXISTS (SELECT 1 FROM unnest(p_error) AS e(error) WHERE e.error IS NOT NULL) THEN
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
                               JOIN cronbox.job_fire jf ON jf.bucket = ANY (v_set) AND jf.job_id = j.job_id
                               WHERE v_max_runs AND j.bucket = ANY (v_set) AND j.job_id = a.job_id LIMIT 1) j ON true
            LEFT JOIN (
                SELECT f.job_id, sum(coalesce(f.n, 1)) AS n
                FROM unnest(p_fire_job, p_missed, p_gap_count) AS f(job_id, missed, n)
                WHERE f.missed GROUP BY f.job_id
            ) m ON m.job_id = a.job_id
            LEFT JOIN (
                SELECT s.job_id, count(*) AS n FROM unnest(v_stored) AS s(job_id) GROUP BY s.job_id
            ) w ON w.job_id = a.job_id
        ),
        logged AS (
            SELECT j.job_id, j.name,
                   CASE WHEN p.error IS NOT NULL THEN 'paused' ELSE 'finished' END AS action,
                   CASE WHEN p.error IS NOT NULL THEN 'poller cannot compute fires: ' || p.error
                        WHEN p.limit_reached THEN format('max_runs reached: %s fires', j.max_runs)
                        WHEN j.kind = 'at' THEN 'one-off fire handled'
                        WHEN p.frontier >= j.ends_at OR j.next_fire > j.ends_at THEN 'ends_at passed'
                        ELSE 'no fire left' END AS reason
            FROM (SELECT * FROM pass p WHERE p.error IS NOT NULL OR p.finished) p  -- the job read only then
            CROSS JOIN LATERAL (SELECT j.job_id, j.name, j.max_runs, j.kind, j.ends_at, jf.next_fire, j.finished_at
                                FROM cronbox.job j JOIN cronbox.job_fire jf ON jf.bucket = ANY (v_set) AND jf.job_id = j.job_id
                                WHERE j.bucket = ANY (v_set) AND j.job_id = p.job_id LIMIT 1) j
            WHERE p.error IS NOT NULL
               OR (j.finished_at IS NULL AND p.n_stored = 0
                   AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f WHERE f.bucket = ANY (v_set)
                                   AND f.job_id = p.job_id AND f.origin = 'schedule'))
        )
        SELECT
               (SELECT jsonb_object_agg(p.job_id::text, jsonb_build_array(p.finished, p.n_stored > 0, p.error))
                FROM pass p WHERE p.finished OR p.error IS NOT NULL OR p.job_id = ANY (v_rows)),
               (SELECT jsonb_object_agg(p.job_id::text, p.n_missed) FROM pass p WHERE p.n_missed > 0),
               (SELECT array_agg(l.job_id) FROM logged l), (SELECT array_agg(l.name) FROM logged l),
               (SELECT array_agg(l.action) FROM logged l), (SELECT array_agg(l.reason) FROM logged l)
          INTO v_change, v_n_missed, v_log_job, v_log_name, v_log_action, v_log_reason;

        IF v_log_job IS NOT NULL THEN
            INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
            SELECT l.job_id, l.name, l.action, l.reason, session_user, p_now
            FROM unnest(v_log_job, v_log_name, v_log_action, v_log_reason) AS l(job_id, name, action, reason);
        END IF;
        -- Missed fires are counted in the job's statistics row (cronbox.job_stat), by key.
        IF v_n_missed IS NOT NULL THEN
            v_missed_ids := ARRAY(SELECT k::bigint FROM jsonb_object_keys(v_n_missed) AS k);
            UPDATE cronbox.job_stat s
            SET missed_count = s.missed_count + (v_n_missed ->> s.job_id::text)::bigint
            WHERE s.bucket = ANY (v_set) AND s.job_id = ANY (v_missed_ids);
        END IF;
        -- The job row only where it changes: finished, broken, v_rows.
        IF v_change IS NOT NULL THEN
            v_change_ids := ARRAY(SELECT k::bigint FROM jsonb_object_keys(v_change) AS k);
            UPDATE cronbox.job j SET
                finished_at = CASE WHEN (v_change -> j.job_id::text ->> 0)::boolean THEN coalesce(j.finished_at, p_now) END,
                -- no calendar in this pass: a stored fire closes any open excluded stretch
                excluded_run_id = CASE WHEN v_excluded IS NULL AND (v_change -> j.job_id::text ->> 1)::boolean
                                       THEN NULL ELSE j.excluded_run_id END,
                paused = j.paused OR (v_change -> j.job_id::text ->> 2) IS NOT NULL,
                paused_reason = coalesce('poller cannot compute fires: ' || (v_change -> j.job_id::text ->> 2),
                                         j.paused_reason),
                paused_at = CASE WHEN (v_change -> j.job_id::text ->> 2) IS NOT NULL THEN p_now ELSE j.paused_at END
            WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (v_change_ids);
        END IF;
    END IF;
    -- The saturation state by key, in one statement with the pass computed from the arrays:
    -- each job's values at width_bucket's place in arrays in key order (a binary search; never a
    -- subscript as the whole of a SET expression, which crashed Citus: docs/citus.md). p_job is
    -- in key order (checked above): the poller's arrays are used as they came, and only the
    -- futures stored per job (and, with max_runs, whether it finished) are aggregated, in p_job's order.
    WITH pass AS (
        SELECT a.i, coalesce(w.n, 0) AS n_stored,
               a.finished OR coalesce(j.fires_made + coalesce(w.n, 0) >= j.max_runs, false) AS finished
        FROM unnest(p_job, p_finished) WITH ORDINALITY AS a(job_id, finished, i)
        LEFT JOIN LATERAL (SELECT jf.fires_made, j.max_runs FROM cronbox.job j
                           JOIN cronbox.job_fire jf ON jf.bucket = ANY (v_set) AND jf.job_id = j.job_id
                           WHERE v_max_runs AND j.bucket = ANY (v_set) AND j.job_id = a.job_id LIMIT 1) j ON true
        LEFT JOIN (
            SELECT s.job_id, count(*) AS n FROM unnest(v_stored) AS s(job_id) GROUP BY s.job_id
        ) w ON w.job_id = a.job_id
    ),
    per_job AS MATERIALIZED (
        SELECT p_job AS ids, p_frontier AS frontier, p_next_fire AS next_fire,
               CASE WHEN v_max_runs THEN (SELECT array_agg(p.finished ORDER BY p.i) FROM pass p)
                    ELSE p_finished END AS finished,
               (SELECT array_agg(p.n_stored ORDER BY p.i) FROM pass p) AS n_stored,
               ARRAY(SELECT e.job_id FROM unnest(p_job, p_error) AS e(job_id, error) WHERE e.error IS NOT NULL) AS broken
    )
    UPDATE cronbox.job_fire f SET
        frontier = coalesce(p.frontier[width_bucket(f.job_id, p.ids)], f.frontier),
        next_fire = CASE WHEN p.finished[width_bucket(f.job_id, p.ids)] THEN NULL
                         ELSE p.next_fire[width_bucket(f.job_id, p.ids)] END,
        fires_made = f.fires_made + p.n_stored[width_bucket(f.job_id, p.ids)],
        paused = f.paused OR f.job_id = ANY (p.broken)
    FROM per_job p
    WHERE f.bucket = ANY (v_set) AND f.job_id = ANY (p.ids);

    -- No NOTIFY: the poller that stored the fires wakes its own dispatch loop. A NOTIFY makes
    -- the commit take the database's notification lock and hold it through the WAL flush: every
    -- pass then waited for the other notifying commits (dispatch's among them) one flush at a
    -- time, and dispatch for the passes.
    RETURN QUERY SELECT v_futures, v_missed;
END
$$;

COMMENT ON FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer) with the time as p_now; tests use it to fix the clock. Poller: stores a saturation pass computed from cronbox.claim_saturation: futures (idempotent, jitter applied to due_at), dropped fires as one missed history row per gap (first, last, count), each job''s new frontier and next fire, finished jobs, and pauses jobs whose fires cannot be computed.';

ALTER FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
