-- cronbox.start_runs(run_ids, worker): start_run for a batch (the worker kit's push mode gets
-- its messages in batches from the relay): one statement and one transaction for the batch
-- instead of one of each per run (a durable commit per run). Each run is started as start_run
-- starts it, or refused with the error start_run would raise, in its own row: `deadline` (the
-- run's lease end) when started, else `code` ('P0002': unknown to this caller, '55000': finished,
-- asked to cancel or running on another worker) and `error` (start_run's message). Rows in the
-- order of run_ids; a duplicate id is answered once per occurrence, each the same (the second
-- sees the first's start: the same worker's repeat returns the lease). At most 10,000 ids, none NULL.
-- Set-based: the runs hidden by the owner rule (cronbox.caller_hidden_runs) and those of a queue
-- the caller may not work (cronbox.worker_denied_run_ids: docs/operations.md, "Tenants") are
-- unknown to it; the others' outbox rows (the runs in flight) are locked in one statement, by
-- key, in id order, and each decided as start_run_try decides it (with its job's timeout, a
-- probe per run); the runs to start are updated in a second statement by key, their leases read
-- by key from one JSON object (seconds from now). On a database with buckets, these two statements per bucket the
-- ids carry (cronbox.run_bucket), in bucket order, each on that bucket's rows alone: where Citus
-- distributes the outbox and the jobs, each is one shard's (a statement over several buckets is
-- refused there); plain PostgreSQL: the two statements once, no bucket filter. An id with no outbox row here (a run already final, an unknown id,
-- or on a database with buckets an id drawn without its bucket) is answered by
-- cronbox.start_run_try, one at a time (history by key, the refusal returned, not raised: no
-- subtransaction per run).
CREATE OR REPLACE FUNCTION cronbox.start_runs(
    run_ids bigint[],
    worker text
) RETURNS TABLE (run_id bigint, deadline timestamptz, code text, error text)
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_now timestamptz := now();
    v_unknown bigint[];     -- hidden by the owner rule, or of a queue the caller may not work
    v_buckets integer[];    -- the buckets the ids carry ({NULL}: no buckets, plain PostgreSQL)
    v_b integer;            -- the bucket worked (NULL: every row, plain PostgreSQL)
    v_answers jsonb := '{}'; -- id -> [deadline, code, error]
    v_decided jsonb;        -- the same, of the bucket worked
    v_start jsonb;          -- id -> seconds from now to the lease end of each run started in the bucket worked
    v_found bigint[];
    v_id bigint;
    v_try record;
BEGIN
    PERFORM cronbox.assert_run_ids(start_runs.run_ids, NULL, NULL);
    PERFORM cronbox.assert_worker(start_runs.worker);
    IF start_runs.worker IS NULL OR start_runs.worker = '' THEN
        RAISE EXCEPTION 'worker: must name the worker' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_unknown := coalesce(cronbox.caller_hidden_runs(start_runs.run_ids), '{}')
                 || cronbox.worker_denied_run_ids(start_runs.run_ids);
    v_buckets := ARRAY[NULL]::integer[];
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        -- (an id whose bits name no bucket has no outbox row in one: answered in step 3)
        v_buckets := ARRAY(SELECT DISTINCT b.b FROM unnest(start_runs.run_ids) AS u(id)
                           CROSS JOIN LATERAL cronbox.run_bucket(u.id) AS b(b)
                           WHERE b.b IS NOT NULL ORDER BY b.b);
    END IF;
    FOREACH v_b IN ARRAY v_buckets LOOP
        -- 1. The runs in flight, locked by key in id order, and decided (start_run_try's order of
        --    refusals): already running here (its lease), running elsewhere or final, asked to
        --    cancel, else started with its job's timeout from now.
        WITH
        locked AS MATERIALIZED (
            SELECT o.outbox_id, o.state, o.worker, o.cancel_requested, o.run_lease_until, o.bucket, o.job_id
            FROM cronbox.outbox o
            WHERE o.outbox_id = ANY (ARRAY(SELECT DISTINCT u.id FROM unnest(start_runs.run_ids) AS u(id)
                                           WHERE u.id <> ALL (v_unknown)))
              AND o.kind = 'run' AND (v_b IS NULL OR o.bucket = v_b)
            ORDER BY o.outbox_id
            FOR UPDATE
        ),
        decided AS (
            SELECT l.outbox_id,
                   CASE WHEN l.state = 'running' AND l.worker = start_runs.worker AND NOT l.cancel_requested
                            THEN 'again'
                        WHEN l.state NOT IN ('dispatched', 'delivered') THEN 'busy'
                        WHEN l.cancel_requested THEN 'cancel'
                        ELSE 'start' END AS verdict,
                   l.state, l.worker, l.run_lease_until,
                   v_now + coalesce(j.timeout, interval '5 minutes') AS lease
            FROM locked l
            LEFT JOIN LATERAL (SELECT j.timeout FROM cronbox.job j
                               WHERE j.bucket = l.bucket AND (v_b IS NULL OR j.bucket = v_b) AND j.job_id = l.job_id
                               LIMIT 1) j ON true
        )
        SELECT array_agg(d.outbox_id),
               jsonb_object_agg(d.outbox_id::text, CASE d.verdict
                   WHEN 'again' THEN jsonb_build_array(d.run_lease_until, NULL, NULL)
                   WHEN 'start' THEN jsonb_build_array(d.lease, NULL, NULL)
                   WHEN 'busy' THEN jsonb_build_array(NULL, '55000', format('run_id: run %s is %s, it cannot be started', d.outbox_id,
                       d.state || CASE WHEN d.state = 'running' THEN format(' on worker %s', d.worker) ELSE '' END))
                   ELSE jsonb_build_array(NULL, '55000', format('run_id: run %s was asked to cancel, it cannot be started', d.outbox_id))
                   END),
               jsonb_object_agg(d.outbox_id::text, extract(epoch FROM d.lease - v_now)) FILTER (WHERE d.verdict = 'start')
          INTO v_found, v_decided, v_start
        FROM decided d;
        v_answers := v_answers || coalesce(v_decided, '{}');
        -- 2. The runs started: the run's lease only (as start_run_try: a run started before any
        --    relay's ack keeps its delivery open).
        IF v_start IS NOT NULL THEN
            UPDATE cronbox.outbox o SET
                state = 'running', started_at = v_now, worker = start_runs.worker,
                -- v_now plus the seconds to the lease end, in UTC (Citus refuses a STABLE
                -- function of a column in an UPDATE: timestamptz + interval, text::timestamptz)
                run_lease_until = ((v_now AT TIME ZONE 'UTC')
                                   + make_interval(secs => (v_start ->> o.outbox_id::text)::float8)) AT TIME ZONE 'UTC'
            WHERE o.outbox_id = ANY (v_found) AND (v_b IS NULL OR o.bucket = v_b)
              AND v_start ? o.outbox_id::text;
        END IF;
    END LOOP;
    -- 3. The ids unknown to the caller, and those with no outbox row here, one at a time.
    FOREACH v_id IN ARRAY ARRAY(SELECT DISTINCT u.id FROM unnest(start_runs.run_ids) AS u(id)
                                WHERE NOT v_answers ? u.id::text) LOOP
        IF v_id = ANY (v_unknown) THEN
            v_answers := v_answers || jsonb_build_object(v_id::text,
                jsonb_build_array(NULL, 'P0002', format('run_id: no run %s', v_id)));
        ELSE
            v_try := cronbox.start_run_try(v_id, start_runs.worker, v_now);
            v_answers := v_answers || jsonb_build_object(v_id::text,
                jsonb_build_array(v_try.deadline, v_try.code, v_try.error));
        END IF;
    END LOOP;
    RETURN QUERY
        SELECT u.id, (v_answers -> u.id::text ->> 0)::timestamptz, v_answers -> u.id::text ->> 1,
               v_answers -> u.id::text ->> 2
        FROM unnest(start_runs.run_ids) WITH ORDINALITY AS u(id, n)
        ORDER BY u.n;
END
$$;

COMMENT ON FUNCTION cronbox.start_runs(bigint[], text) IS
'Worker (optional): start_run for a batch of runs in one statement: each started (its deadline) or refused (code P0002 or 55000 and start_run''s message) in its own row, in the order given; at most 10,000 ids.';

ALTER FUNCTION cronbox.start_runs(bigint[], text) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.start_runs(bigint[], text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.start_runs(bigint[], text) TO cronbox_worker;
