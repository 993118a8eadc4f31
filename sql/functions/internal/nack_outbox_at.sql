-- Internal: the body of cronbox.nack_outbox, with the time as its last parameter p_now. The public
-- cronbox.nack_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.nack_outbox_at(p_owner, p_ids, p_errors, p_retryable, p_retry_after, p_max_attempts,
-- p_backoff, p_backoff_max, p_bucket, p_now): the relay reports failed sends, one array slot per row.
-- Rows still leased to p_owner either wait (available_at = now + exponential backoff from
-- p_backoff per attempt, capped at p_backoff_max, equal jitter, at least Retry-After) or,
-- when not retryable or out of attempts, move to cronbox.dead_letter; their runs become
-- failed with 'undeliverable: <error>' (job_stat.active_runs decremented).
-- By bucket (docs/citus.md): p_bucket names the bucket of the rows and every statement reads
-- and writes only its rows (`bucket = ANY (v_set)`: one shard where the outbox is distributed);
-- NULL visits every bucket (cronbox.bucket_walks; plain PostgreSQL has one, 0). The rows are
-- read, the retried ones updated by key (their jitter drawn beforehand, their times computed in
-- UTC: Citus runs no STABLE or volatile function of a row's columns in an UPDATE); only when
-- some are given up, a third statement moves them to the dead letters.
-- The result type changed (dead_ids added): CREATE OR REPLACE cannot change it, so drop first
-- (same transaction as the re-create; grants.sql re-grants after every re-apply).
CREATE OR REPLACE FUNCTION cronbox.nack_outbox_at(
    p_owner text,
    p_ids bigint[],
    p_errors text[],
    p_retryable boolean[] DEFAULT NULL,
    p_retry_after double precision[] DEFAULT NULL,
    p_max_attempts integer DEFAULT 10,
    p_backoff interval DEFAULT '1 second',
    p_backoff_max interval DEFAULT '10 minutes',
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (retried integer, dead integer, dead_ids bigint[])
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_walks integer[];
    v_set integer[];
    v_retry bigint[];
    v_give_up bigint[];
    v_n integer;
    v_retried integer := 0;
    v_dead integer := 0;
    v_dead_ids bigint[] := '{}';
    v_runs bigint[];
    v_errors text[];
    v_report_of jsonb;
BEGIN
    IF p_max_attempts IS NULL OR p_max_attempts < 1 THEN
        RAISE EXCEPTION 'p_max_attempts: must be at least 1, got %', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_backoff IS NULL OR p_backoff <= interval '0' OR p_backoff_max IS NULL OR p_backoff_max < p_backoff THEN
        RAISE EXCEPTION 'p_backoff: must be positive and at most p_backoff_max, got % and %', p_backoff, p_backoff_max
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_errors) IS DISTINCT FROM cardinality(p_ids) THEN
        RAISE EXCEPTION 'p_errors: expected one error per id (%), got %', cardinality(p_ids), cardinality(p_errors)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The report of each row, by outbox id (unnest pads the shorter optional arrays with NULL
    -- = retryable, no Retry-After). The rows are reached by key and their reports looked up
    -- here, no join: the outbox's statistics swing (after a drain they say it is empty), and a
    -- join planned on them walked the whole outbox once per row, or sorted the id array again
    -- on every probe.
    -- Each row's jitter is drawn here, so the update that applies it calls nothing volatile
    -- (Citus runs no volatile function in an UPDATE: docs/citus.md).
    SELECT jsonb_object_agg(f.outbox_id::text, jsonb_build_object(
               'error', f.error, 'retryable', f.retryable, 'retry_after', f.retry_after,
               'jitter', 0.5 + random() * 0.5))
      INTO v_report_of
    FROM unnest(p_ids, p_errors, p_retryable, p_retry_after) AS f(outbox_id, error, retryable, retry_after)
    WHERE f.outbox_id IS NOT NULL;

    v_walks := cronbox.bucket_walks('cronbox.outbox', p_bucket);
    FOR i IN 1 .. array_length(v_walks, 1) LOOP
        v_set := ARRAY(SELECT unnest(v_walks[i:i]));
        -- The rows still leased to p_owner: retried, or given up (not retryable, or out of attempts).
        SELECT array_agg(m.outbox_id ORDER BY m.outbox_id) FILTER (WHERE NOT m.give_up),
               array_agg(m.outbox_id ORDER BY m.outbox_id) FILTER (WHERE m.give_up)
          INTO v_retry, v_give_up
        FROM (
            SELECT o.outbox_id,
                   ((v_report_of -> o.outbox_id::text ->> 'retryable')::boolean IS FALSE
                    OR o.attempts >= p_max_attempts) AS give_up
            FROM cronbox.outbox o
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
        ) m;

        IF v_retry IS NOT NULL THEN
            -- Exponential backoff from p_backoff per attempt, capped at p_backoff_max, equal
            -- jitter, at least Retry-After; computed in UTC (timestamp + interval is IMMUTABLE,
            -- timestamptz + interval STABLE: docs/citus.md).
            UPDATE cronbox.outbox o SET
                available_at = ((p_now AT TIME ZONE 'UTC') + greatest(
                    least(p_backoff * power(2, least(o.attempts - 1, 30)), p_backoff_max)
                        * (v_report_of -> o.outbox_id::text ->> 'jitter')::float8,
                    CASE WHEN v_report_of -> o.outbox_id::text ->> 'retry_after' IS NOT NULL  -- greatest skips NULLs
                         THEN make_interval(secs => least((v_report_of -> o.outbox_id::text ->> 'retry_after')::float8, 86400)) END))
                    AT TIME ZONE 'UTC',
                lease_owner = NULL,
                lease_until = NULL,
                last_error = v_report_of -> o.outbox_id::text ->> 'error'
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (v_retry) AND o.lease_owner = p_owner;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_retried := v_retried + v_n;
        END IF;
        CONTINUE WHEN v_give_up IS NULL;

        -- Given up: a notification leaves the outbox for the dead letters; a run's row stays
        -- until finish_runs below ends the run (its row deleted and its history row inserted
        -- failed, one statement), its message kept in the dead letter as sent.
        WITH buried AS (
            DELETE FROM cronbox.outbox o
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (v_give_up) AND o.kind <> 'run'
              AND o.lease_owner = p_owner
            RETURNING o.outbox_id, o.run_id, o.queue, o.kind, o.message, o.timeout, o.created_at, o.attempts,
                      o.lease_owner, v_report_of -> o.outbox_id::text ->> 'error' AS error
        ),
        dead_runs AS (
            SELECT o.outbox_id, o.run_id, o.queue, o.kind,
                   -- the dead letter keeps the message as sent: built from the run's row
                   coalesce(o.message, cronbox.run_message(o.outbox_id, o.job_name, o.queue, o.payload,
                                                           o.fire_at, o.attempt)) AS message,
                   o.timeout, o.created_at, o.attempts, o.lease_owner,
                   v_report_of -> o.outbox_id::text ->> 'error' AS error
            FROM cronbox.outbox o
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (v_give_up) AND o.kind = 'run'
              AND o.lease_owner = p_owner
        ),
        moved AS (
            INSERT INTO cronbox.dead_letter (outbox_id, run_id, queue, kind, message, timeout, created_at,
                                             attempts, last_error, lease_owner, dead_at)
            SELECT b.outbox_id, b.run_id, b.queue, b.kind, b.message, b.timeout, b.created_at, b.attempts,
                   b.error, b.lease_owner, p_now
            FROM (SELECT * FROM buried UNION ALL SELECT * FROM dead_runs) b
            RETURNING outbox_id, run_id, kind, last_error
        )
        SELECT v_dead + count(*)::integer,
               v_dead_ids || coalesce(array_agg(mv.outbox_id), '{}'),
               array_cat(v_runs, array_agg(mv.run_id) FILTER (WHERE mv.run_id IS NOT NULL AND mv.kind = 'run')),
               array_cat(v_errors, array_agg(mv.last_error) FILTER (WHERE mv.run_id IS NOT NULL AND mv.kind = 'run'))
          INTO v_dead, v_dead_ids, v_runs, v_errors
        FROM moved mv;
    END LOOP;

    IF v_runs IS NOT NULL THEN
        -- dispatched -> failed (undeliverable) through the run side's one finishing path, so
        -- the failure streak, on_error, notifications and held fires follow as for any final
        -- failure. Not retryable: delivery itself was already retried; redrive() re-sends.
        PERFORM cronbox.finish_runs(v_runs, 'failed', NULL,
            ARRAY(SELECT 'undeliverable: ' || coalesce(e.error, 'unknown error')
                  FROM unnest(v_errors) WITH ORDINALITY AS e(error, n) ORDER BY e.n),
            false, p_now);
    END IF;
    RETURN QUERY SELECT v_retried, v_dead, v_dead_ids;
END
$$;

COMMENT ON FUNCTION cronbox.nack_outbox_at(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer) with the time as p_now; tests use it to fix the clock. Relay: records failed sends of rows leased to p_owner. Retryable rows wait for exponential backoff with jitter (at least Retry-After); non-retryable rows and rows out of attempts move to cronbox.dead_letter and their runs become failed (undeliverable). Only the rows of bucket p_bucket (NULL: every bucket). Returns (retried, dead, dead_ids).';

ALTER FUNCTION cronbox.nack_outbox_at(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.nack_outbox_at(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
