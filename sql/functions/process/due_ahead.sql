-- cronbox.due_ahead(p_within, p_limit, p_bucket): how many ready futures fall due in each of the next
-- seconds, (now(), now() + p_within], counting at most p_limit of them (soonest first): the
-- poller sizes its early-dispatch lead from it (CRONBOX_DISPATCH_LEAD_MAX: a burst of fires on
-- one minute boundary is dispatched ahead early enough to be written by its time). No locks, no
-- writes: an index-only walk of job_future_ready_idx, priority by priority. p_bucket: that
-- bucket's futures only (a poller leasing buckets sizes its lead from those it holds, one call
-- each; the priorities from cronbox.ready_lanes of the bucket); NULL: every bucket (the
-- priorities from cronbox.ready_priorities). PL/pgSQL, planned with the bucket bound (Citus
-- plans no parameterized SQL function over a distributed table).
CREATE OR REPLACE FUNCTION cronbox.due_ahead(p_within interval, p_limit integer, p_bucket integer DEFAULT NULL)
RETURNS TABLE (second integer, fires integer)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
SET jit = off  -- short statement: compiling costs more than running
AS $$
DECLARE
    v_within interval := cronbox.checked_interval('p_within', p_within, interval '0', interval '1 hour');
    v_lim integer := cronbox.checked_limit('p_limit', p_limit, 10000000);
    v_set integer[];
    v_prio integer[];  -- the bucket's priorities with ready futures, read first: on Citus a statement
                       -- may not call a function that reads a distributed table
BEGIN
    IF p_bucket IS NOT NULL THEN
        v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.job_future', p_bucket)));
        v_prio := ARRAY(SELECT DISTINCT l.priority FROM cronbox.ready_lanes(v_set) l ORDER BY 1);
    ELSE
        v_prio := ARRAY(SELECT r.p FROM cronbox.ready_priorities() AS r(p));
    END IF;
    -- priority by priority, each walk in due order up to the limit (v_set NULL: every bucket)
    RETURN QUERY
    WITH
    prio(p) AS (SELECT u.p FROM unnest(v_prio) AS u(p)),
    due AS (
        SELECT x.due_at
        FROM prio CROSS JOIN LATERAL (
            SELECT f.due_at
            FROM cronbox.job_future f
            WHERE f.hold IS NULL AND (v_set IS NULL OR f.bucket = ANY (v_set)) AND f.priority = prio.p
              AND f.due_at > now() AND f.due_at <= now() + v_within
            ORDER BY f.due_at
            LIMIT v_lim
        ) x
        LIMIT v_lim
    )
    SELECT floor(extract(epoch FROM due.due_at - now()))::integer, count(*)::integer
    FROM due
    GROUP BY 1
    ORDER BY 1;
END
$$;

COMMENT ON FUNCTION cronbox.due_ahead(interval, integer, integer) IS
'Poller: per second from now, how many ready futures fall due within p_within (0 .. 1 hour), counting at most p_limit (1 .. 10,000,000) of them, soonest first, of p_bucket only when given (NULL: every bucket). No locks. Sizes the early-dispatch lead for bursts (CRONBOX_DISPATCH_LEAD_MAX).';

ALTER FUNCTION cronbox.due_ahead(interval, integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.due_ahead(interval, integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.due_ahead(interval, integer, integer) TO cronbox_process;
