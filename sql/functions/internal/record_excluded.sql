-- cronbox.record_excluded(p_fire_job, p_fire_at, p_missed, p_excluded, p_now): the history of
-- the fires an exclusion calendar dropped in one saturation pass (cronbox.store_fires), in
-- bounded form: one `skipped` run row per stretch of consecutive excluded fires of a job
-- (fire_at = first, missed_last_at = last, missed_fires = how many, error names the
-- calendar). A stretch that continues the job's previous one (job.excluded_run_id: no fire of
-- the job was stored in between) extends that row instead, so an exclusion costs one row
-- however long it lasts and however often the job fires. Jobs locked by claim_saturation.
-- Returns the number of rows written or extended.
CREATE OR REPLACE FUNCTION cronbox.record_excluded(
    p_fire_job bigint[],
    p_fire_at  timestamptz[],
    p_missed   boolean[],
    p_excluded text[],      -- per fire: the calendar that excludes it, NULL: none
    p_now      timestamptz
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
BEGIN
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
        IF v_s.at_start THEN
            UPDATE cronbox.run r SET
                missed_fires = r.missed_fires + v_s.n,
                missed_last_at = v_s.last_at,
                error = format('excluded by calendar %s: %s fires from %s to %s not run',
                               quote_literal(v_s.cal), r.missed_fires + v_s.n, r.fire_at, v_s.last_at)
            FROM cronbox.job j
            WHERE j.job_id = v_s.job_id AND r.run_id = j.excluded_run_id AND r.job_id = j.job_id
              AND r.state = 'skipped' AND starts_with(r.error, 'excluded by calendar ' || quote_literal(v_s.cal) || ':')
            RETURNING r.run_id INTO v_run;
        END IF;
        IF v_run IS NULL THEN
            INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                                     priority, finished_at, error, missed_fires, missed_last_at, bucket, trouble)
            SELECT cronbox.new_run_id(), j.job_id, j.name, j.queue, v_s.first_at, v_s.first_at, 'skipped',
                   j.priority, p_now,
                   format('excluded by calendar %s: %s fire%s from %s to %s not run', quote_literal(v_s.cal),
                          v_s.n, CASE WHEN v_s.n = 1 THEN '' ELSE 's' END, v_s.first_at, v_s.last_at),
                   v_s.n, v_s.last_at, j.bucket, cronbox.run_trouble('skipped')
            FROM cronbox.job j WHERE j.job_id = v_s.job_id
            RETURNING run_id INTO v_run;
        END IF;
        v_rows := v_rows + 1;
        IF v_s.at_end THEN
            v_open_job := v_open_job || v_s.job_id;
            v_open_run := v_open_run || v_run;
        END IF;
    END LOOP;
    -- The open stretch of each job of the pass: the row to extend next time, or none.
    UPDATE cronbox.job j SET excluded_run_id = o.run_id
    FROM (SELECT DISTINCT f.job_id FROM unnest(p_fire_job, p_missed) AS f(job_id, missed) WHERE NOT f.missed) p
    LEFT JOIN unnest(v_open_job, v_open_run) AS o(job_id, run_id) ON o.job_id = p.job_id
    WHERE j.job_id = p.job_id AND j.excluded_run_id IS DISTINCT FROM o.run_id;
    RETURN v_rows;
END
$$;

COMMENT ON FUNCTION cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone) IS
'Internal (cronbox.store_fires): records the fires exclusion calendars dropped in a saturation pass as skipped history rows, one per stretch of consecutive excluded fires of a job, extending the job''s previous stretch row while the exclusion goes on (bounded: one row per exclusion however long).';

ALTER FUNCTION cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
