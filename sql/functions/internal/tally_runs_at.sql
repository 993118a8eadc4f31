-- Internal: the body of cronbox.tally_runs, with the time as its last parameter p_now. The
-- public cronbox.tally_runs passes now(); no cronbox role may execute this one (tests call it
-- as the owner or a superuser to fix the clock).
-- cronbox.tally_runs_at(p_batch, p_now): counts finished runs into cronbox.run_minute (per
-- finish minute, queue and owner). Reads the runs created since the mark and more than 30
-- seconds before p_now (a dispatch transaction still open is given that long to commit), at
-- most p_batch, by primary key; counts the finished ones, remembers the unfinished
-- ones in run_tally_pending with their job and counts those when they have finished (looked
-- up by run and job id), looking at most p_batch of them per call (in run id order from where
-- the previous call stopped: run_tally_mark.pending_after), so a call costs its batch however
-- many runs are in flight. Locks the mark row, so tallies never overlap (a second poller waits,
-- then finds nothing to do). Drops counts older than 2 days. Each run is counted exactly once.
-- Returns the larger of the new runs and the pending runs it read, each at most p_batch
-- (p_batch: call again, more are waiting).
-- The counts are read from the history and the jobs in statements of their own (not beside the
-- tally's own tables), on a database with buckets one per bucket, each on that bucket's rows
-- alone: where Citus distributes them, a probe per run or job (a LIMIT in a lateral subquery) is
-- refused over several shards and beside the coordinator's own tables, and taken as it is in one
-- bucket; plain PostgreSQL: each once, no bucket filter.
CREATE OR REPLACE FUNCTION cronbox.tally_runs_at(
    p_batch integer,
    p_now timestamptz
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A background pass over up to p_batch rows: JIT compiling its statements (chosen for their
-- row estimates) cost more than it saved.
SET jit = off
AS $$
DECLARE
    v_from bigint;
    v_upto timestamptz := p_now - interval '30 seconds';
    v_to bigint := cronbox.run_id_at(v_upto);
    v_last bigint;
    v_n integer := 0;
    v_after bigint;      -- the pending runs looked at are those after this one
    v_pending bigint[];  -- the pending runs this call looks at, in run id order
    v_buckets boolean := to_regclass('cronbox.bucket') IS NOT NULL;  -- false: plain PostgreSQL
    v_b integer;         -- the bucket read (NULL: every row, plain PostgreSQL)
    -- the pending runs gone from the outbox: id, job, queue, the bucket to read them in
    v_ids bigint[];
    v_jobs bigint[];
    v_queues text[];
    v_at integer[];      -- NULL: no buckets (plain PostgreSQL)
    v_found bigint[];    -- (with buckets) those read in the bucket their id carries
    v_where jsonb;       -- run id -> its bucket, for those not in the bucket their id carries
    -- the counts read: per finish minute, queue and owner (not yet summed over the buckets)
    v_minute timestamptz[] := '{}';
    v_queue text[] := '{}';
    v_owner name[] := '{}';
    v_succeeded bigint[] := '{}';
    v_failed bigint[] := '{}';
BEGIN
    SELECT t.next_run_id, t.pending_after INTO v_from, v_after FROM cronbox.run_tally_mark t FOR UPDATE;
    IF v_from IS NULL THEN
        RAISE EXCEPTION 'tally_runs: cronbox.run_tally_mark has no row (migration 0150)'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- 1. Pending runs that have finished (or whose history was dropped): counted, forgotten. At
    --    most p_batch of them per call, from where the previous call stopped (a hundred
    --    thousand runs in flight made one call read them all: seconds in one transaction).
    --    The ones still unfinished are those of the chunk's run id range still in the outbox (a
    --    run in flight is its outbox row): one range of the outbox's primary key, no index of
    --    cronbox.run names the state (migration 0190).
    v_pending := ARRAY(SELECT p.run_id FROM cronbox.run_tally_pending p WHERE p.run_id > v_after
                       ORDER BY p.run_id LIMIT p_batch);
    -- a full chunk: the next call goes on after it; otherwise it starts again from the first
    UPDATE cronbox.run_tally_mark
    SET pending_after = CASE WHEN cardinality(v_pending) >= p_batch THEN v_pending[cardinality(v_pending)] ELSE 0 END;
    WITH still AS MATERIALIZED (
        SELECT o.outbox_id AS run_id FROM cronbox.outbox o
        WHERE o.kind = 'run' AND o.outbox_id >= v_pending[1] AND o.outbox_id <= v_pending[cardinality(v_pending)]
    ),
    done AS (
        DELETE FROM cronbox.run_tally_pending p
        WHERE p.run_id = ANY (v_pending)
          AND NOT EXISTS (SELECT 1 FROM still WHERE still.run_id = p.run_id)
        RETURNING p.run_id, p.job_id, p.queue
    )
    SELECT array_agg(d.run_id), array_agg(d.job_id), array_agg(d.queue) INTO v_ids, v_jobs, v_queues FROM done d;
    IF v_ids IS NOT NULL AND v_buckets THEN
        v_at := ARRAY(SELECT coalesce(cronbox.run_bucket(u.id), -1) FROM unnest(v_ids) AS u(id));
    END IF;
    -- their final history rows counted, a statement per bucket; on a database with buckets, a
    -- run not in the bucket its id carries (drawn without it) is then looked for by key over
    -- every bucket and counted in the one it is in (one found nowhere: its history dropped)
    FOR v_pass IN 1 .. 2 LOOP
        EXIT WHEN v_ids IS NULL;
        v_found := '{}';
        FOR v_b IN SELECT DISTINCT u.b FROM unnest(coalesce(v_at, ARRAY[NULL]::integer[])) AS u(b)
                   WHERE u.b IS DISTINCT FROM -1 LOOP
            WITH finished AS MATERIALIZED (
                SELECT d.run_id, date_trunc('minute', r.finished_at) AS minute, r.queue, r.job_id, r.state
                -- A probe per run naming the first column of every index holding run_id, whatever
                -- the statistics say: a hash join chosen for a large estimate read every run
                -- partition (all of history), and a partition analysed while it held no live row
                -- costs every index the same, so a probe by run_id alone could be planned on
                -- run_job_history_idx (job_id, run_id) or run_queue_history_idx (queue, run_id):
                -- a scan of a whole index per run (migrations 0400, 0420).
                FROM unnest(v_ids, v_jobs, v_queues, v_at) AS d(run_id, job_id, queue, b)
                CROSS JOIN LATERAL (
                    SELECT r.finished_at, r.queue, r.job_id, r.state FROM cronbox.run r
                    WHERE (v_b IS NULL OR r.bucket = v_b)
                      AND r.run_id = d.run_id AND r.job_id = d.job_id AND r.queue = d.queue
                      AND r.state IN ('succeeded', 'failed', 'lost') AND r.finished_at IS NOT NULL
                    LIMIT 1) r
                WHERE v_b IS NULL OR d.b = v_b
            ),
            counted AS (
                SELECT c.minute, c.queue, coalesce(j.owner, '') AS owner, sum(c.succeeded) AS succeeded,
                       sum(c.failed) AS failed
                FROM (SELECT f.minute, f.queue, f.job_id, count(*) FILTER (WHERE f.state = 'succeeded') AS succeeded,
                             count(*) FILTER (WHERE f.state <> 'succeeded') AS failed
                      FROM finished f GROUP BY 1, 2, 3) c
                -- each job's owner by its key (a join planned for many rows hashed every job: a
                -- million schedules made each tally read them all)
                LEFT JOIN LATERAL (SELECT j.owner FROM cronbox.job j
                                   WHERE (v_b IS NULL OR j.bucket = v_b) AND j.job_id = c.job_id LIMIT 1) j ON true
                GROUP BY 1, 2, 3
            )
            SELECT v_minute || coalesce(array_agg(c.minute), '{}'), v_queue || coalesce(array_agg(c.queue), '{}'),
                   v_owner || coalesce(array_agg(c.owner), '{}'), v_succeeded || coalesce(array_agg(c.succeeded), '{}'),
                   v_failed || coalesce(array_agg(c.failed), '{}'),
                   CASE WHEN v_buckets THEN v_found || ARRAY(SELECT f.run_id FROM finished f) END
              INTO v_minute, v_queue, v_owner, v_succeeded, v_failed, v_found
            FROM counted c;
        END LOOP;
        EXIT WHEN v_pass = 2 OR NOT v_buckets;
        -- those not read: where they are, by key over every bucket (no lock; the rare path)
        SELECT array_agg(u.id), array_agg(u.job_id), array_agg(u.queue) INTO v_ids, v_jobs, v_queues
        FROM unnest(v_ids, v_jobs, v_queues) AS u(id, job_id, queue)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(v_found) AS f(id) WHERE f.id = u.id);
        EXIT WHEN v_ids IS NULL;
        SELECT jsonb_object_agg(r.run_id::text, r.bucket) INTO v_where
        FROM cronbox.run r WHERE r.run_id = ANY (v_ids);
        v_at := ARRAY(SELECT coalesce((v_where ->> u.id::text)::integer, -1) FROM unnest(v_ids) AS u(id));
    END LOOP;

    -- 2. New runs: [v_from, v_to) by primary key, at most p_batch of them.
    IF v_to > v_from THEN
        SELECT count(*), max(x.run_id) INTO v_n, v_last
        FROM (SELECT r.run_id FROM cronbox.run r WHERE r.run_id >= v_from AND r.run_id < v_to
              ORDER BY r.run_id LIMIT p_batch) x;
        IF v_n >= p_batch THEN
            v_to := v_last + 1;  -- a full batch: the rest of the range is for the next call
        END IF;
        -- unfinished now: counted by step 1 of a later tally. A run in flight is found in the
        -- outbox too (in the same snapshot as history): a run whose history row is written only
        -- when it is final is not in history yet. One range of the outbox's primary key
        -- (cronbox.unfinished_runs(), a function not inlined, read every run in flight and
        -- filtered them: 1.4 s a call with 300,000 in flight).
        INSERT INTO cronbox.run_tally_pending (run_id, job_id, queue)
        SELECT r.run_id, r.job_id, r.queue FROM cronbox.run r
        WHERE r.run_id >= v_from AND r.run_id < v_to AND r.state IN ('dispatched', 'delivered', 'running')
        UNION
        SELECT o.outbox_id, o.job_id, o.queue FROM cronbox.outbox o
        WHERE o.kind = 'run' AND o.outbox_id >= v_from AND o.outbox_id < v_to
        ON CONFLICT DO NOTHING;
        -- the finished ones counted, a statement per bucket of the range (with buckets)
        FOR v_b IN SELECT NULL::integer WHERE NOT v_buckets
                   UNION ALL
                   SELECT DISTINCT r.bucket FROM cronbox.run r WHERE v_buckets AND r.run_id >= v_from AND r.run_id < v_to LOOP
            SELECT v_minute || coalesce(array_agg(x.minute), '{}'), v_queue || coalesce(array_agg(x.queue), '{}'),
                   v_owner || coalesce(array_agg(x.owner), '{}'), v_succeeded || coalesce(array_agg(x.succeeded), '{}'),
                   v_failed || coalesce(array_agg(x.failed), '{}')
              INTO v_minute, v_queue, v_owner, v_succeeded, v_failed
            FROM (SELECT c.minute, c.queue, coalesce(j.owner, '') AS owner, sum(c.succeeded) AS succeeded,
                         sum(c.failed) AS failed
                  FROM (SELECT date_trunc('minute', r.finished_at) AS minute, r.queue, r.job_id,
                               count(*) FILTER (WHERE r.state = 'succeeded') AS succeeded,
                               count(*) FILTER (WHERE r.state <> 'succeeded') AS failed
                        FROM cronbox.run r
                        WHERE (v_b IS NULL OR r.bucket = v_b) AND r.run_id >= v_from AND r.run_id < v_to
                          AND r.state IN ('succeeded', 'failed', 'lost') AND r.finished_at IS NOT NULL
                        GROUP BY 1, 2, 3) c
                  -- each job's owner by its key, once per job and minute (not a hash of every job)
                  LEFT JOIN LATERAL (SELECT j.owner FROM cronbox.job j
                                     WHERE (v_b IS NULL OR j.bucket = v_b) AND j.job_id = c.job_id LIMIT 1) j ON true
                  GROUP BY 1, 2, 3) x;
        END LOOP;
        UPDATE cronbox.run_tally_mark SET next_run_id = v_to, tallied_at = now();
    END IF;

    -- 3. The counts summed into the per-minute table.
    INSERT INTO cronbox.run_minute AS m (minute, queue, owner, succeeded, failed)
    SELECT c.minute, c.queue, c.owner, sum(c.succeeded), sum(c.failed)
    FROM unnest(v_minute, v_queue, v_owner, v_succeeded, v_failed) AS c(minute, queue, owner, succeeded, failed)
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, queue, owner) DO UPDATE
        SET succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed;

    -- 4. Counts older than two days go (the overview shows hours).
    DELETE FROM cronbox.run_minute WHERE minute < p_now - interval '2 days';
    RETURN greatest(v_n, cardinality(v_pending));
END
$$;

COMMENT ON FUNCTION cronbox.tally_runs_at(integer, timestamp with time zone) IS
'Internal body of cronbox.tally_runs with the time as a parameter (tests fix the clock with it).';

ALTER FUNCTION cronbox.tally_runs_at(integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.tally_runs_at(integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
