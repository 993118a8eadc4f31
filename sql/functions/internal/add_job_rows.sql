-- cronbox.add_job_rows(p_job_ids, p_bucket): the rows that go with new jobs, made by the statement after
-- the one that inserted them, set-based: each job's saturation state (cronbox.job_fire, a copy
-- of its paused flag; nothing to materialise until its frontier and next fire are written) and
-- its statistics (cronbox.job_stat), both in the job's bucket, its after-job edges
-- (cronbox.job_after_edge, one per name in its `after` list), and the schedule count and fire
-- rate of owners with a quota (cronbox.owner_quota). Called by cronbox.schedule, the only
-- function that inserts jobs, and by scripts that insert jobs with a bare INSERT (benches,
-- tests). Not a trigger: Citus distributes no table with triggers, and runs no statement
-- trigger with a transition table (docs/citus.md). Idempotent: a job that has its rows is
-- neither given them nor counted again. Returns the number of jobs given their rows. With
-- p_bucket (the jobs' bucket, schedule()'s one job) the jobs are read in that bucket alone (one
-- task per statement on Citus); NULL: wherever they are.
CREATE OR REPLACE FUNCTION cronbox.add_job_rows(p_job_ids bigint[], p_bucket integer DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_new bigint[];  -- the jobs given their rows now
BEGIN
    WITH
    added AS MATERIALIZED (
        SELECT j.job_id, j.paused, j.bucket,
               -- a one-off no policy reads (cronbox.job_stat_folded; no dependency can exist yet),
               -- its attempts bounded: its statistics derived from its runs, never written
               j.kind = 'at' AND j.overlap = 'allow' AND j.on_error <> 'retry_soon'
               AND NOT EXISTS (SELECT 1 FROM cronbox.job_after_edge e WHERE e.upstream = j.name) AS derived
        FROM cronbox.job j WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = ANY (p_job_ids)
    ),
    fire AS (
        INSERT INTO cronbox.job_fire (job_id, paused, bucket)
        SELECT a.job_id, a.paused, a.bucket FROM added a
        ON CONFLICT ON CONSTRAINT job_fire_pkey DO NOTHING
    ),
    stat AS (
        INSERT INTO cronbox.job_stat (job_id, bucket, stats_from_runs)
        SELECT a.job_id, a.bucket, a.derived FROM added a
        ON CONFLICT ON CONSTRAINT job_stat_pkey DO NOTHING
        RETURNING job_id
    )
    SELECT array_agg(s.job_id) INTO v_new FROM stat s;
    -- their after-job edges: a statement of its own, as the edges are a reference table on
    -- Citus and the rows above are distributed
    INSERT INTO cronbox.job_after_edge (upstream, job_id, bucket)
    SELECT DISTINCT u.name, j.job_id, j.bucket
    FROM cronbox.job j CROSS JOIN LATERAL unnest(j.after) AS u(name)
    WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = ANY (p_job_ids) AND j.after IS NOT NULL AND u.name IS NOT NULL
    ON CONFLICT (upstream, job_id) DO NOTHING;
    -- their owners' counts, for owners with a quota (none: nothing to read)
    IF v_new IS NOT NULL AND EXISTS (SELECT 1 FROM cronbox.owner_quota) THEN
        UPDATE cronbox.owner_quota q SET schedules = q.schedules + c.n, fire_rate = q.fire_rate + c.rate
        FROM (SELECT j.owner, count(*) AS n, coalesce(sum(j.fire_rate), 0) AS rate
              FROM cronbox.job j WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = ANY (v_new)
              GROUP BY j.owner) c
        WHERE q.owner = c.owner;
    END IF;
    RETURN coalesce(cardinality(v_new), 0);
END
$$;

COMMENT ON FUNCTION cronbox.add_job_rows(bigint[], integer) IS
'Internal: makes the saturation-state and statistics rows of new jobs (in their bucket), their after-job edges, and counts them for their owners'' quotas; called after inserting jobs. Idempotent.';

ALTER FUNCTION cronbox.add_job_rows(bigint[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.add_job_rows(bigint[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
