-- cronbox.search_schedules(p_text, p_after, p_limit): names of the schedules the caller may
-- see whose name contains p_text (case-insensitive; %, _ and \ match themselves), in name
-- order after p_after (keyset), at most p_limit. The web console's schedule search. Reads
-- cronbox.job_name_search through its trigram index (or its name index when most names
-- match) plus the schedules created since the last cronbox.sync_schedule_names (a
-- primary-key range of cronbox.job); for a caller limited to its own schedules, every match
-- is joined back to cronbox.job, so row security decides what comes out; for a worker limited
-- to queues (cronbox.caller_work_scoped), only the schedules of the queues it may work.
-- Bounds: p_text 1..200 characters, p_limit 1..1000 (22023; NULL p_text 22004). No locks.
-- SECURITY DEFINER only to read the side table, which no cronbox role may read directly.
CREATE OR REPLACE FUNCTION cronbox.search_schedules(
    p_text text,
    p_after text DEFAULT NULL,
    p_limit integer DEFAULT 50
) RETURNS SETOF text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_few constant integer := 2000;
    v_pattern text;
    v_n integer;
    v_synced bigint;
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    IF p_text IS NULL THEN
        RAISE EXCEPTION 'p_text: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(p_text) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'p_text: must be 1 to 200 characters, got %', length(p_text)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.checked_limit('p_limit', p_limit, 1000);
    v_pattern := '%' || replace(replace(replace(p_text, '\', '\\'), '%', '\%'), '_', '\_') || '%';
    IF cronbox.caller_work_scoped() THEN
        -- A worker limited to queues (docs/operations.md, "Tenants"): the schedules of the
        -- queues it may work (and its own, if it owns any).
        RETURN QUERY EXECUTE $q$
            SELECT j.name FROM cronbox.job j WHERE j.name ILIKE $1 AND ($2::text IS NULL OR j.name > $2)
              AND (j.owner = cronbox.caller() OR cronbox.worker_may_work(j.queue))
            ORDER BY j.name LIMIT $3 $q$ USING v_pattern, p_after, p_limit;
        RETURN;
    END IF;
    IF NOT cronbox.caller_reads_all() THEN
        -- Limited to its own schedules: row security on cronbox.job decides (cronbox.job has
        -- no index on owner, so this reads every name once, as the owner's plain list does).
        RETURN QUERY EXECUTE $q$
            SELECT j.name FROM cronbox.job j WHERE j.name ILIKE $1 AND ($2::text IS NULL OR j.name > $2)
            ORDER BY j.name LIMIT $3 $q$ USING v_pattern, p_after, p_limit;
        RETURN;
    END IF;
    -- Sees everything: the side table, without joining cronbox.job (a name unscheduled since
    -- the last sync may come out; the console's page query drops it). First count the
    -- matches, at most c_few + 1, through the trigram index (EXECUTE: planned with the
    -- pattern's value). Few: sort them. Many: they are dense, so walking the name index
    -- from p_after finds a page after a few hundred names (a rare substring walked that way
    -- would read half the index: why it is counted first).
    EXECUTE $q$SELECT count(*) FROM (SELECT 1 FROM cronbox.job_name_search s
                WHERE s.name ILIKE $1 AND ($2::text IS NULL OR s.name > $2) LIMIT $3) c$q$
        INTO v_n USING v_pattern, p_after, c_few + 1;
    -- schedules created since the last sync: a primary-key range (a value, not a sub-query,
    -- so the plan knows the range is small)
    SELECT coalesce(max(s.job_id), 0) INTO v_synced FROM cronbox.job_name_search s;
    RETURN QUERY EXECUTE format($q$
        SELECT x.name FROM (
            (SELECT s.name FROM cronbox.job_name_search s
             WHERE s.name ILIKE $1 AND ($2::text IS NULL OR s.name > $2)
             %s)
            UNION ALL
            (SELECT j.name FROM cronbox.job j
             WHERE j.job_id > $4 AND j.name ILIKE $1 AND ($2::text IS NULL OR j.name > $2)
             ORDER BY j.name LIMIT $3)
        ) x
        ORDER BY x.name LIMIT $3 $q$,
        CASE WHEN v_n > c_few THEN 'ORDER BY s.name LIMIT $3' ELSE 'OFFSET 0' END)
        USING v_pattern, p_after, p_limit, v_synced;
END
$$;

COMMENT ON FUNCTION cronbox.search_schedules(text, text, integer) IS
'Names of the schedules the caller may see that contain p_text (1..200 characters, case-insensitive substring), in name order after p_after, at most p_limit (1..1000). Served by a trigram index (migration 0151); row security applies.';

ALTER FUNCTION cronbox.search_schedules(text, text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.search_schedules(text, text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.search_schedules(text, text, integer) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
