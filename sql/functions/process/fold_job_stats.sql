-- cronbox.fold_job_stats(p_limit, p_bucket): the poller's fold of job statistics (every second,
-- from the reaper's round; any poller): the oldest p_limit rows of cronbox.job_stat_change of
-- the bucket p_bucket (FOR UPDATE SKIP LOCKED, in change_id order), applied set-based to their
-- jobs' rows (cronbox.apply_job_stat_changes: the update takes each row's lock, the job's lock,
-- as every writer of its statistics does) and deleted.
-- p_bucket NULL: every bucket, in one statement each as the other walks go
-- (cronbox.bucket_walks): one fold over every row on plain PostgreSQL or while the table is the
-- coordinator's own, a fold per bucket where Citus distributes it by bucket (each one task; a
-- poller leasing buckets passes each bucket it holds). A job's change rows all carry its bucket
-- (migration 0474), so a fold of one bucket folds every change of its jobs.
-- One folder at a time per bucket (transaction-level advisory locks: a fold of every row takes
-- one key, a fold of one bucket that key shared and the bucket's own; a second folder returns 0
-- at once): rows are folded in change_id order, so a job's changes always go in the order
-- they were written. Returns the number of change rows folded.
-- Never waits long for a job's lock, so it never deadlocks with a caller holding several
-- (a statement calling trigger() for 500 fires of 100 jobs locks them in its own order): the
-- update waits at most 50 ms for each; past that it is undone and the fold takes only the locks
-- that are free (SKIP LOCKED), folds those jobs, and keeps every change row that names a job it
-- could not lock (the jobs it folded skip it by folded_through on the next round).
CREATE OR REPLACE FUNCTION cronbox.fold_job_stats(p_limit integer DEFAULT 10000, p_bucket integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
-- A fold sorts its entries (one per job and change row: ~40,000 for a second of 20,000 runs/s):
-- at the default 4 MB the sorts spilled to temporary files. One fold at a time (below).
SET work_mem = '64MB'
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_changes bigint[];
    v_jobs bigint[];
    v_wait text;
    v_folded integer;
    v_walks integer[];
    v_bucket integer := p_bucket;
BEGIN
    -- Runs as cronbox_runner, whom row security lets through (docs/architecture.md, "Row security
    -- on the batch paths"): only an all-seeing caller may, as only such roles may call it.
    IF NOT cronbox.caller_writes_all() THEN
        RAISE EXCEPTION 'fold_job_stats: only a caller that may act on every schedule may call it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM cronbox.checked_limit('p_limit', p_limit, 1000000);
    v_walks := cronbox.bucket_walks('cronbox.job_stat_change', p_bucket);
    IF array_length(v_walks, 1) > 1 THEN
        -- distributed by bucket: a fold per bucket, within p_limit rows in all
        v_folded := 0;
        FOR i IN 1 .. array_length(v_walks, 1) LOOP
            EXIT WHEN v_folded >= p_limit;
            v_folded := v_folded + cronbox.fold_job_stats(p_limit - v_folded, v_walks[i][1]);
        END LOOP;
        RETURN v_folded;
    END IF;
    IF v_bucket IS NULL THEN
        IF NOT pg_try_advisory_xact_lock(hashtext('cronbox.fold_job_stats')) THEN
            RETURN 0;
        END IF;
    ELSIF NOT (pg_try_advisory_xact_lock_shared(hashtext('cronbox.fold_job_stats'))
               AND pg_try_advisory_xact_lock(hashtext('cronbox.fold_job_stats'), v_bucket)) THEN
        RETURN 0;
    END IF;
    v_changes := ARRAY(
        SELECT c.change_id FROM cronbox.job_stat_change c
        WHERE (v_bucket IS NULL OR c.bucket = v_bucket)
        ORDER BY c.change_id LIMIT p_limit
        FOR UPDATE SKIP LOCKED);
    IF cardinality(v_changes) = 0 THEN
        RETURN 0;
    END IF;
    -- The jobs' locks are the update's own row locks (a lock taken first would log a record per
    -- job): a job folded alone meanwhile (cronbox.fold_job_stats_of, under its lock) has moved
    -- folded_through past these changes, which the update re-checks on the row it locks. Every
    -- job the rows name (NULL: no list of them made first).
    v_wait := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', '50ms', true);
    BEGIN
        PERFORM cronbox.apply_job_stat_changes(v_changes, NULL, v_bucket);
        PERFORM set_config('lock_timeout', v_wait, true);
        DELETE FROM cronbox.job_stat_change c
        WHERE (v_bucket IS NULL OR c.bucket = v_bucket) AND c.change_id = ANY (v_changes);
        RETURN cardinality(v_changes);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', v_wait, true);
    END;
    -- A job's lock is held elsewhere (by a caller that may be waiting for a job this fold
    -- holds): fold the jobs whose locks are free now, keep the change rows naming the others.
    v_jobs := ARRAY(
        SELECT DISTINCT u.job_id
        FROM cronbox.job_stat_change c CROSS JOIN LATERAL unnest(c.job_ids) AS u(job_id)
        WHERE (v_bucket IS NULL OR c.bucket = v_bucket) AND c.change_id = ANY (v_changes)
        ORDER BY 1);
    v_jobs := ARRAY(
        SELECT s.job_id FROM cronbox.job_stat s
        WHERE (v_bucket IS NULL OR s.bucket = v_bucket) AND s.job_id = ANY (v_jobs)
        ORDER BY s.job_id
        FOR NO KEY UPDATE SKIP LOCKED);
    IF cardinality(v_jobs) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM cronbox.apply_job_stat_changes(v_changes, v_jobs, v_bucket);
    WITH gone AS (
        DELETE FROM cronbox.job_stat_change c
        -- every job of the row folded: each looked up in the sorted v_jobs by a binary search
        -- (width_bucket; `job_ids <@ v_jobs` compared each job with every element: quadratic)
        WHERE (v_bucket IS NULL OR c.bucket = v_bucket) AND c.change_id = ANY (v_changes)
          AND NOT EXISTS (SELECT 1 FROM unnest(c.job_ids) AS u(id)
                          WHERE v_jobs[width_bucket(u.id, v_jobs)] IS DISTINCT FROM u.id)
        RETURNING 1)
    SELECT count(*) INTO v_folded FROM gone;
    RETURN v_folded;
END
$$;

COMMENT ON FUNCTION cronbox.fold_job_stats(integer, integer) IS
'Poller (every second): folds the oldest p_limit rows of job statistics changes (cronbox.job_stat_change) of the bucket p_bucket (NULL: every bucket, bucket by bucket where Citus distributes the table) into cronbox.job_stat under the jobs'' locks and deletes them; one folder at a time per bucket (another call returns 0). Returns the number of change rows folded.';

ALTER FUNCTION cronbox.fold_job_stats(integer, integer) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.fold_job_stats(integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.fold_job_stats(integer, integer) TO cronbox_process;
