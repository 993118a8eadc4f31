-- cronbox.ready_priorities(): the priorities that have ready (not held) futures, lowest first,
-- by a loose index scan of job_future_ready_idx (one probe per distinct value, however many
-- futures share it). Used by cronbox.dispatch, cronbox.dispatch_ahead and cronbox.next_due,
-- which then walk each priority in due order. LANGUAGE sql, STABLE, no SET clause: inlined
-- into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.ready_priorities() RETURNS SETOF integer
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    WITH RECURSIVE prio(p) AS (
        (SELECT f.priority FROM cronbox.job_future f WHERE f.hold IS NULL ORDER BY f.priority LIMIT 1)
        UNION ALL
        SELECT (SELECT f.priority FROM cronbox.job_future f
                WHERE f.hold IS NULL AND f.priority > prio.p ORDER BY f.priority LIMIT 1)
        FROM prio WHERE prio.p IS NOT NULL
    )
    SELECT prio.p FROM prio WHERE prio.p IS NOT NULL
$$;

COMMENT ON FUNCTION cronbox.ready_priorities() IS
'Internal: the priorities that have ready futures, lowest first (a loose index scan, one probe per value).';

ALTER FUNCTION cronbox.ready_priorities() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.ready_priorities() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
