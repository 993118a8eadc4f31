-- Internal: the body of cronbox.nack_outbox, with the time as its last parameter p_now. The public
-- cronbox.nack_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.nack_outbox_at(p_owner, p_ids, p_errors, p_retryable, p_retry_after, p_max_attempts,
-- p_backoff, p_backoff_max, p_now): the relay reports failed sends, one array slot per row.
-- Rows still leased to p_owner either wait (available_at = now + exponential backoff from
-- p_backoff per attempt, capped at p_backoff_max, equal jitter, at least Retry-After) or,
-- when not retryable or out of attempts, move to cronbox.dead_letter; their runs become
-- failed with 'undeliverable: <error>' (job_stat.active_runs decremented). Two statements, no loop.
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
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (retried integer, dead integer, dead_ids bigint[])
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_retried integer;
    v_dead integer;
    v_dead_ids bigint[];
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
    SELECT jsonb_object_agg(f.outbox_id::text, jsonb_build_object(
               'error', f.error, 'retryable', f.retryable, 'retry_after', f.retry_after))
      INTO v_report_of
    FROM unnest(p_ids, p_errors, p_retryable, p_retry_after) AS f(outbox_id, error, retryable, retry_after)
    WHERE f.outbox_id IS NOT NULL;

    WITH mine AS MATERIALIZED (
        SELECT o.outbox_id, o.kind,
               ((v_report_of -> o.outbox_id::text ->> 'retryable')::boolean IS FALSE
                OR o.attempts >= p_max_attempts) AS give_up
        FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
    ),
    retried AS (
        UPDATE cronbox.outbox o SET
            available_at = p_now + greatest(
                least(p_backoff * power(2, least(o.attempts - 1, 30)), p_backoff_max) * (0.5 + random() * 0.5),
                CASE WHEN v_report_of -> o.outbox_id::text ->> 'retry_after' IS NOT NULL  -- greatest skips NULLs
                     THEN make_interval(secs => least((v_report_of -> o.outbox_id::text ->> 'retry_after')::float8, 86400)) END),
            lease_owner = NULL,
            lease_until = NULL,
            last_error = v_report_of -> o.outbox_id::text ->> 'error'
        WHERE o.outbox_id = ANY (ARRAY(SELECT m.outbox_id FROM mine m WHERE NOT m.give_up))
          AND o.lease_owner = p_owner
        RETURNING o.outbox_id
    ),
    -- A notification given up on leaves the outbox; a run's row stays until finish_runs below
    -- ends the run (its row deleted and its history row inserted failed, one statement).
    buried AS (
        DELETE FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (ARRAY(SELECT m.outbox_id FROM mine m WHERE m.give_up AND m.kind <> 'run'))
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
        WHERE o.outbox_id = ANY (ARRAY(SELECT m.outbox_id FROM mine m WHERE m.give_up AND m.kind = 'run'))
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
    SELECT (SELECT count(*) FROM retried)::integer, count(*)::integer,
           coalesce(array_agg(mv.outbox_id), '{}'),
           array_agg(mv.run_id) FILTER (WHERE mv.run_id IS NOT NULL AND mv.kind = 'run'),
           array_agg(mv.last_error) FILTER (WHERE mv.run_id IS NOT NULL AND mv.kind = 'run')
      INTO v_retried, v_dead, v_dead_ids, v_runs, v_errors
    FROM moved mv;

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

COMMENT ON FUNCTION cronbox.nack_outbox_at(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval) with the time as p_now; tests use it to fix the clock. Relay: records failed sends of rows leased to p_owner. Retryable rows wait for exponential backoff with jitter (at least Retry-After); non-retryable rows and rows out of attempts move to cronbox.dead_letter and their runs become failed (undeliverable). Returns (retried, dead, dead_ids).';

ALTER FUNCTION cronbox.nack_outbox_at(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.nack_outbox_at(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
