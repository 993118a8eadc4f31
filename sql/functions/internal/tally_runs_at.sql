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
BEGIN
    SELECT t.next_run_id, t.pending_after INTO v_from, v_after FROM cronbox.run_tally_mark t FOR UPDATE;
    IF v_from IS NULL THEN
        RAISE EXCEPTION 'tally_runs: cronbox.run_tally_mark has no row (migration 0150)'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- 1. Pending runs that have finished (or whose history was dropped): count, forget. At
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
    INSERT INTO cronbox.run_minute AS m (minute, queue, owner, succeeded, failed)
    SELECT c.minute, c.queue, coalesce(j.owner, ''), sum(c.succeeded), sum(c.failed)
    FROM (SELECT date_trunc('minute', r.finished_at) AS minute, r.queue, r.job_id,
                 count(*) FILTER (WHERE r.state = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE r.state <> 'succeeded') AS failed
          -- A probe per run naming the first column of every index holding run_id, whatever
          -- the statistics say: a hash join chosen for a large estimate read every run
          -- partition (all of history), and a partition analysed while it held no live row
          -- costs every index the same, so a probe by run_id alone could be planned on
          -- run_job_history_idx (job_id, run_id) or run_queue_history_idx (queue, run_id):
          -- a scan of a whole index per run (migrations 0400, 0420).
          FROM done d
          CROSS JOIN LATERAL (
              SELECT r.finished_at, r.queue, r.job_id, r.state FROM cronbox.run r
              WHERE r.run_id = d.run_id AND r.job_id = d.job_id AND r.queue = d.queue
                AND r.state IN ('succeeded', 'failed', 'lost') AND r.finished_at IS NOT NULL
              LIMIT 1) r
          GROUP BY 1, 2, 3) c
    -- each job's owner by its key (a join planned for many rows hashed every job: a million
    -- schedules made each tally read them all)
    LEFT JOIN LATERAL (SELECT j.owner FROM cronbox.job j WHERE j.job_id = c.job_id LIMIT 1) j ON true
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, queue, owner) DO UPDATE
        SET succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed;

    -- 2. New runs: [v_from, v_to) by primary key, at most p_batch of them.
    IF v_to > v_from THEN
        SELECT count(*), max(x.run_id) INTO v_n, v_last
        FROM (SELECT r.run_id FROM cronbox.run r WHERE r.run_id >= v_from AND r.run_id < v_to
              ORDER BY r.run_id LIMIT p_batch) x;
        IF v_n >= p_batch THEN
            v_to := v_last + 1;  -- a full batch: the rest of the range is for the next call
        END IF;
        WITH fresh AS MATERIALIZED (
            SELECT r.run_id, r.queue, r.state, r.finished_at, r.job_id
            FROM cronbox.run r WHERE r.run_id >= v_from AND r.run_id < v_to
        ), later AS (
            -- unfinished now: counted by step 1 of a later tally. A run in flight is found in
            -- the outbox too (in the same snapshot as history): a run whose history row is
            -- written only when it is final is not in history yet. One range of the outbox's
            -- primary key (cronbox.unfinished_runs(), a function not inlined, read every run
            -- in flight and filtered them: 1.4 s a call with 300,000 in flight).
            INSERT INTO cronbox.run_tally_pending (run_id, job_id, queue)
            SELECT f.run_id, f.job_id, f.queue FROM fresh f WHERE f.state IN ('dispatched', 'delivered', 'running')
            UNION
            SELECT o.outbox_id, o.job_id, o.queue FROM cronbox.outbox o
            WHERE o.kind = 'run' AND o.outbox_id >= v_from AND o.outbox_id < v_to
            ON CONFLICT DO NOTHING
        )
        INSERT INTO cronbox.run_minute AS m (minute, queue, owner, succeeded, failed)
        SELECT c.minute, c.queue, coalesce(j.owner, ''), sum(c.succeeded), sum(c.failed)
        FROM (SELECT date_trunc('minute', f.finished_at) AS minute, f.queue, f.job_id,
                     count(*) FILTER (WHERE f.state = 'succeeded') AS succeeded,
                     count(*) FILTER (WHERE f.state <> 'succeeded') AS failed
              FROM fresh f
              WHERE f.state IN ('succeeded', 'failed', 'lost') AND f.finished_at IS NOT NULL
              GROUP BY 1, 2, 3) c
        -- each job's owner by its key, once per job and minute (not a hash of every job)
        LEFT JOIN LATERAL (SELECT j.owner FROM cronbox.job j WHERE j.job_id = c.job_id LIMIT 1) j ON true
        GROUP BY 1, 2, 3
        ON CONFLICT (minute, queue, owner) DO UPDATE
            SET succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed;
        UPDATE cronbox.run_tally_mark SET next_run_id = v_to, tallied_at = now();
    END IF;

    -- 3. Counts older than two days go (the overview shows hours).
    DELETE FROM cronbox.run_minute WHERE minute < p_now - interval '2 days';
    RETURN greatest(v_n, cardinality(v_pending));
END
$$;

COMMENT ON FUNCTION cronbox.tally_runs_at(integer, timestamp with time zone) IS
'Internal body of cronbox.tally_runs with the time as a parameter (tests fix the clock with it).';

ALTER FUNCTION cronbox.tally_runs_at(integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.tally_runs_at(integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
