-- cronbox.due_ahead(p_within, p_limit): how many ready futures fall due in each of the next
-- seconds, (now(), now() + p_within], counting at most p_limit of them (soonest first): the
-- poller sizes its early-dispatch lead from it (CRONBOX_DISPATCH_LEAD_MAX: a burst of fires on
-- one minute boundary is dispatched ahead early enough to be written by its time). No locks, no
-- writes: an index-only walk of job_future_ready_idx, priority by priority.
CREATE OR REPLACE FUNCTION cronbox.due_ahead(p_within interval, p_limit integer)
RETURNS TABLE (second integer, fires integer)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
SET jit = off  -- short statement: compiling costs more than running
AS $$
    WITH
    args AS (SELECT cronbox.checked_interval('p_within', p_within, interval '0', interval '1 hour') AS within,
                    cronbox.checked_limit('p_limit', p_limit, 10000000) AS lim),
    prio(p) AS (SELECT r.p FROM cronbox.ready_priorities() AS r(p)),
    due AS (
        SELECT x.due_at
        FROM args CROSS JOIN prio CROSS JOIN LATERAL (
            SELECT f.due_at
            FROM cronbox.job_future f
            WHERE f.hold IS NULL AND f.priority = prio.p
              AND f.due_at > now() AND f.due_at <= now() + args.within
            ORDER BY f.due_at
            LIMIT args.lim
        ) x
        LIMIT (SELECT args.lim FROM args)
    )
    SELECT floor(extract(epoch FROM due.due_at - now()))::integer, count(*)::integer
    FROM due
    GROUP BY 1
    ORDER BY 1
$$;

COMMENT ON FUNCTION cronbox.due_ahead(interval, integer) IS
'Poller: per second from now, how many ready futures fall due within p_within (0 .. 1 hour), counting at most p_limit (1 .. 10,000,000) of them, soonest first. No locks. Sizes the early-dispatch lead for bursts (CRONBOX_DISPATCH_LEAD_MAX).';

ALTER FUNCTION cronbox.due_ahead(interval, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.due_ahead(interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.due_ahead(interval, integer) TO cronbox_process;
