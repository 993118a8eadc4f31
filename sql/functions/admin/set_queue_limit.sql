-- cronbox.set_queue_limit(queue, max_running): caps the unfinished (dispatched,
-- delivered, running) runs of a queue, like an Airflow pool. Fires beyond the cap are held
-- and go, in priority order, as slots free. NULL max_running removes the cap (held fires are
-- released). Locks the queue's limit row, recounts its unfinished runs from cronbox.run, and
-- releases as many held fires as there are free slots. Returns the unfinished runs counted.
-- Thin wrapper: the body is cronbox.set_queue_limit_at (internal/set_queue_limit_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.set_queue_limit(
    queue text,
    max_running integer
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.set_queue_limit_at($1, $2, now())
$$;

COMMENT ON FUNCTION cronbox.set_queue_limit(text, integer) IS
'Caps the unfinished runs of a queue at max_running (NULL removes the cap); fires beyond it are held and go in priority order as slots free. Returns the unfinished runs counted now.';

ALTER FUNCTION cronbox.set_queue_limit(text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.set_queue_limit(text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.set_queue_limit(text, integer) TO cronbox_admin;
