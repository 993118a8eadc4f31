-- cronbox.record_excluded(p_fire_job, p_fire_at, p_missed, p_excluded, p_now, p_set): the history of
-- the fires an exclusion calendar dropped in one saturation pass (cronbox.store_fires), in
-- bounded form: one `skipped` run row per stretch of consecutive excluded fires of a job
-- (fire_at = first, missed_last_at = last, missed_fires = how many, error names the
-- calendar). A stretch that continues the job's previous one (job.excluded_run_id: no fire of
-- the job was stored in between) extends that row instead, so an exclusion costs one row
-- however long it lasts and however often the job fires. Jobs locked by claim_saturation.
-- Returns the number of rows written or extended. p_set: the bucket set of the jobs (the
-- caller's, cronbox.store_fires): the jobs are read in it first, then the history is written
-- from those values, then the jobs' open stretches set by key (docs/citus.md).
CREATE OR REPLACE FUNCTION cronbox.record_excluded(
    p_fire_job bigint[],
    p_fire_at  timestamptz[],
    p_missed   boolean[],
    p_excluded text[],      -- per fire: the calendar that excludes it, NULL: none
    p_now      timestamptz,
    p_set      integer[] DEFAULT NULL  -- the jobs' bucket set; NULL: every bucket
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s record;
    v_run bigint;
    v_rows integer := 0;
    v_open_job bigint[] := '{}';
    v_open_run bigint[] := '{}';
    v_set integer[] := coalesce(p_set, ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.job'))));
    v_jobs jsonb;  -- job with excluded fires -> [excluded_run_id, name, queue, priority, bucket]
    v_job jsonb;
    v_open jsonb;  -- job -> its open stretch's run
    v_fired bigint[];
    v_n bigint;
    v_first timestamptz;
BEGIN
    SELECT jsonb_object_agg(j.job_id::text, jsonb_build_array(j.excluded_run_id, j.name, j.queue, j.priority, j.bucket))
      INTO v_jobs
    FROM cronbox.job j
    WHERE j.bucket = ANY (v_set)
      AND j.job_id = ANY (ARRAY(SELECT DISTINCT f.job_id FROM unnest(p_fire_job, p_excluded) AS f(job_id, cal)
                                WHERE f.cal IS NOT NULL));
    FOR v_s IN
        WITH f AS (
            SELECT f.job_id, f.fire_at, p_excluded[f.i] AS cal, f.i,
                   row_number() OVER (PARTITION BY f.job_id ORDER BY f.i) AS pos
            FROM unnest(p_fire_job, p_fire_at, p_missed) WITH ORDINALITY AS f(job_id, fire_at, missed, i)
            WHERE NOT f.missed
        ), g AS (
            -- islands: consecutive fires of one job excluded by one calendar
            SELECT f.*, f.pos - row_number() OVER (PARTITION BY f.job_id, f.cal ORDER BY f.i) AS grp,
                   max(f.pos) OVER (PARTITION BY f.job_id) AS last_pos
            FROM f
        )
        SELECT g.job_id, g.cal, min(g.fire_at) AS first_at, max(g.fire_at) AS last_at, count(*) AS n,
               min(g.pos) = 1 AS at_start, max(g.pos) = max(g.last_pos) AS at_end
        FROM g WHERE g.cal IS NOT NULL
        GROUP BY g.job_id, g.cal, g.grp
        ORDER BY g.job_id, min(g.fire_at)
    LOOP
        v_run := NULL;
        v_job := v_jobs -> v_s.job_id::text;
        CONTINUE WHEN v_job IS NULL;
        IF v_s.at_start THEN
            -- the stretch row read, then extended by key with the values computed here (no
            -- STABLE function of a column, the format of a time, in an update: docs/citus.md)
            SELECT r.run_id, r.missed_fires + v_s.n, r.fire_at INTO v_run, v_n, v_first
            FROM cronbox.run r
            WHERE r.run_id = (v_job ->> 0)::bigint AND r.job_id = v_s.job_id
              AND r.state = 'skipped' AND starts_with(r.error, 'excluded by calendar ' || quote_literal(v_s.cal) || ':');
            IF v_run IS NOT NULL THEN
                UPDATE cronbox.run r SET
                    missed_fires = v_n,
                    missed_last_at = v_s.last_at,
                    error = format('excluded by calendar %s: %s fires from %s to %s not run',
                                   quote_literal(v_s.cal), v_n, v_first, v_s.last_at)
                WHERE r.run_id = v_run AND r.job_id = v_s.job_id;
            END IF;
        END IF;
        IF v_run IS NULL THEN
            INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                                     priority, finished_at, error, missed_fires, missed_last_at, bucket, trouble)
            VALUES (cronbox.new_run_id(), v_s.job_id, v_job ->> 1, v_job ->> 2, v_s.first_at, v_s.first_at, 'skipped',
                    (v_job ->> 3)::integer, p_now,
                    format('excluded by calendar %s: %s fire%s from %s to %s not run', quote_literal(v_s.cal),
                           v_s.n, CASE WHEN v_s.n = 1 THEN '' ELSE 's' END, v_s.first_at, v_s.last_at),
                    v_s.n, v_s.last_at, (v_job ->> 4)::integer, cronbox.run_trouble('skipped'))
            RETURNING run_id INTO v_run;
        END IF;
        v_rows := v_rows + 1;
        IF v_s.at_end THEN
            v_open_job := v_open_job || v_s.job_id;
            v_open_run := v_open_run || v_run;
        END IF;
    END LOOP;
    -- The open stretch of each job of the pass: the row to extend next time, or none (by key,
    -- the run looked up in one JSON object).
    v_open := coalesce((SELECT jsonb_object_agg(o.job_id::text, o.run_id)
                        FROM unnest(v_open_job, v_open_run) AS o(job_id, run_id)), '{}');
    v_fired := ARRAY(SELECT DISTINCT f.job_id FROM unnest(p_fire_job, p_missed) AS f(job_id, missed) WHERE NOT f.missed);
    UPDATE cronbox.job j SET excluded_run_id = (v_open ->> j.job_id::text)::bigint
    WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (v_fired)
      AND j.excluded_run_id IS DISTINCT FROM (v_open ->> j.job_id::text)::bigint;
    RETURN v_rows;
END
$$;

COMMENT ON FUNCTION cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone, integer[]) IS
'Internal (cronbox.store_fires): records the fires exclusion calendars dropped in a saturation pass as skipped history rows, one per stretch of consecutive excluded fires of a job, extending the job''s previous stretch row while the exclusion goes on (bounded: one row per exclusion however long).';

ALTER FUNCTION cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone, integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone, integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
