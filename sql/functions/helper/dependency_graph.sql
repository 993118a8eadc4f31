-- cronbox.dependency_graph(name, depth): the edges around a job, up to `depth` steps each
-- way, with the last run state of both ends, for drawing (the web console's schedule page)
-- or for psql. level < 0: upstream side (-1: the job's own upstreams), level > 0: downstream
-- side. kind: 'gate' (add_dependency) or 'after' (schedule(after => ...)). Row security
-- applies: an owner sees edges among the schedules it may see (an `after` upstream it may not
-- see is named, with no state). Bounds: name 1..200 characters (22023; NULL 22004), depth
-- 1..5 (22023); P0002 for a schedule the caller may not see. At most 500 edges. No locks.
-- SECURITY DEFINER so every role that reads schedules can call it; row security decides what.
CREATE OR REPLACE FUNCTION cronbox.dependency_graph(
    name text,
    depth integer DEFAULT 2
) RETURNS TABLE (job text, upstream text, kind text, level integer, job_state text, upstream_state text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    PERFORM cronbox.assert_job_name('name', dependency_graph.name);
    IF dependency_graph.depth IS NULL OR dependency_graph.depth NOT BETWEEN 1 AND 5 THEN
        RAISE EXCEPTION 'depth: must be 1 to 5, got %', coalesce(dependency_graph.depth::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM cronbox.job j WHERE j.name = dependency_graph.name) THEN
        RAISE EXCEPTION 'name: no schedule named %', quote_literal(dependency_graph.name)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN QUERY
    WITH RECURSIVE up(job, upstream, kind, depth) AS (
        SELECT d.job, d.upstream, d.kind, 1 FROM cronbox.dependencies d WHERE d.job = dependency_graph.name
        UNION
        SELECT d.job, d.upstream, d.kind, up.depth + 1
        FROM cronbox.dependencies d JOIN up ON d.job = up.upstream WHERE up.depth < dependency_graph.depth
    ), down(job, upstream, kind, depth) AS (
        SELECT d.job, d.upstream, d.kind, 1 FROM cronbox.dependencies d WHERE d.upstream = dependency_graph.name
        UNION
        SELECT d.job, d.upstream, d.kind, down.depth + 1
        FROM cronbox.dependencies d JOIN down ON d.upstream = down.job WHERE down.depth < dependency_graph.depth
    ), edges AS (
        SELECT u.job, u.upstream, u.kind, min(-u.depth) AS level FROM up u GROUP BY 1, 2, 3
        UNION ALL
        SELECT w.job, w.upstream, w.kind, min(w.depth) FROM down w GROUP BY 1, 2, 3
    ), page AS (
        SELECT * FROM edges e ORDER BY abs(e.level), e.job, e.upstream LIMIT 500
    ), named AS (
        SELECT DISTINCT n FROM page p CROSS JOIN LATERAL (VALUES (p.job), (p.upstream)) v(n)
    ), states AS (
        SELECT n.n AS node, s.last_run_state
        FROM named n LEFT JOIN cronbox.schedules s ON s.name = n.n
    )
    SELECT p.job, p.upstream, p.kind, p.level, sj.last_run_state, su.last_run_state
    FROM page p
    LEFT JOIN states sj ON sj.node = p.job
    LEFT JOIN states su ON su.node = p.upstream
    ORDER BY abs(p.level), p.job, p.upstream;
END
$$;

COMMENT ON FUNCTION cronbox.dependency_graph(text, integer) IS
'The edges around a job up to depth steps each way (level < 0 upstream, > 0 downstream; kind gate or after), with the last run state of both ends; row security applies. Bounds: depth 1 to 5; at most 500 edges. P0002 for a schedule the caller may not see.';

ALTER FUNCTION cronbox.dependency_graph(text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dependency_graph(text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.dependency_graph(text, integer) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
