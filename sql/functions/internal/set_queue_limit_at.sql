-- Internal: the body of cronbox.set_queue_limit, with the time as its last parameter p_now. The public
-- cronbox.set_queue_limit passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.set_queue_limit_at(queue, max_running, p_now): caps the unfinished (dispatched,
-- delivered, running) runs of a queue, like an Airflow pool. Fires beyond the cap are held
-- and go, in priority order, as slots free. NULL max_running removes the cap (held fires are
-- released). Locks the queue's limit row, recounts its unfinished runs from cronbox.run, and
-- releases as many held fires as there are free slots. Returns the unfinished runs counted.
CREATE OR REPLACE FUNCTION cronbox.set_queue_limit_at(
    queue text,
    max_running integer,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_running integer;
BEGIN
    IF set_queue_limit_at.queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'queue: must be 1 to 100 characters of letters, digits, _ . : - (starting with a letter or digit), got %',
            quote_literal(left(set_queue_limit_at.queue, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limit_at.max_running > 100000 THEN
        RAISE EXCEPTION 'max_running: must be at most 100000 (NULL removes the limit), got %', set_queue_limit_at.max_running
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limit_at.queue IS NULL OR set_queue_limit_at.queue = '' THEN
        RAISE EXCEPTION 'queue: must name a queue' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF set_queue_limit_at.max_running IS NOT NULL AND set_queue_limit_at.max_running < 1 THEN
        RAISE EXCEPTION 'max_running: must be at least 1 (NULL removes the limit), got %',
            set_queue_limit_at.max_running USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limit_at.max_running IS NULL THEN
        DELETE FROM cronbox.queue_limit q WHERE q.queue = set_queue_limit_at.queue;
        PERFORM cronbox.release_futures(ARRAY(
            SELECT f.future_id FROM cronbox.job_future f
            WHERE f.hold = 'queue_limit' AND f.hold_queue = set_queue_limit_at.queue));
        RETURN NULL;
    END IF;
    INSERT INTO cronbox.queue_limit AS q (queue, max_running, updated_at)
    VALUES (set_queue_limit_at.queue, set_queue_limit_at.max_running, p_now)
    ON CONFLICT ON CONSTRAINT queue_limit_pkey
    DO UPDATE SET max_running = excluded.max_running, updated_at = excluded.updated_at;
    PERFORM cronbox.reconcile_queue_limits_at(ARRAY[set_queue_limit_at.queue], p_now);
    SELECT q.running INTO v_running FROM cronbox.queue_limit q WHERE q.queue = set_queue_limit_at.queue;
    RETURN v_running;
END
$$;

COMMENT ON FUNCTION cronbox.set_queue_limit_at(text, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.set_queue_limit(text, integer) with the time as p_now; tests use it to fix the clock. Caps the unfinished runs of a queue at max_running (NULL removes the cap); fires beyond it are held and go in priority order as slots free. Returns the unfinished runs counted now.';

ALTER FUNCTION cronbox.set_queue_limit_at(text, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.set_queue_limit_at(text, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
