-- cronbox.find_dependency_cycle(p_job_id, p_upstream_ids): would making job p_job_id wait for
-- p_upstream_ids close a cycle? Follows "waits for" edges (cronbox.job_dependency and
-- `after` lists) upward from the upstreams; each (job, reached-from) pair is visited once, so
-- the cost is linear in the edges reached. Returns the cycle as names ('a -> b -> a', each
-- waiting for the next; past 10 jobs the first 5 and the last 4 around '... N more ...') or NULL. No locks: callers serialise with the dependency lock.
CREATE OR REPLACE FUNCTION cronbox.find_dependency_cycle(
    p_job_id bigint,
    p_upstream_ids bigint[]
) RETURNS text
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_nodes bigint[];
    v_parents bigint[];
    v_path bigint[];
    v_cur bigint;
    v_level_nodes bigint[];  -- the pairs reached at this level
    v_level_parents bigint[];
    v_from bigint[];
    v_names text[];  -- the after-lists' names at this level, and the jobs listing them
    v_named_by bigint[];
    v_bucket integer;
BEGIN
    -- Level by level (a statement per level, and per bucket of the after-lists' names), over the
    -- gates (cronbox.job_dependency) and the after-job edges (cronbox.job_after_edge), reference
    -- tables on Citus; an edge's upstream name found in the bucket the name gives: no statement
    -- reads the jobs of several buckets (Citus refuses a recursive walk over a distributed table).
    v_level_nodes := p_upstream_ids;
    v_level_parents := array_fill(p_job_id, ARRAY[cardinality(p_upstream_ids)]);
    v_nodes := '{}';
    v_parents := '{}';
    LOOP
        -- the pairs (job, reached from) not seen yet: each is visited once
        SELECT coalesce(array_agg(l.node), '{}'), coalesce(array_agg(l.parent), '{}') INTO v_level_nodes, v_level_parents
        FROM (SELECT DISTINCT x.node, x.parent FROM unnest(v_level_nodes, v_level_parents) AS x(node, parent)
              WHERE x.node IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM unnest(v_nodes, v_parents) AS s(node, parent)
                                WHERE s.node = x.node AND s.parent = x.parent)) l;
        EXIT WHEN cardinality(v_level_nodes) = 0;
        v_nodes := v_nodes || v_level_nodes;
        v_parents := v_parents || v_level_parents;
        v_from := ARRAY(SELECT DISTINCT u.node FROM unnest(v_level_nodes) AS u(node) WHERE u.node <> p_job_id);
        -- what those jobs wait for: their gates' upstreams, and the jobs their after-lists name
        SELECT coalesce(array_agg(d.upstream_id), '{}'), coalesce(array_agg(d.job_id), '{}')
          INTO v_level_nodes, v_level_parents
        FROM cronbox.job_dependency d WHERE d.job_id = ANY (v_from);
        SELECT coalesce(array_agg(e.upstream), '{}'), coalesce(array_agg(e.job_id), '{}') INTO v_names, v_named_by
        FROM cronbox.job_after_edge e WHERE e.job_id = ANY (v_from);
        FOR v_bucket IN SELECT DISTINCT cronbox.job_bucket(n.name) FROM unnest(v_names) AS n(name) LOOP
            SELECT v_level_nodes || coalesce(array_agg(up.job_id), '{}'), v_level_parents || coalesce(array_agg(n.by), '{}')
              INTO v_level_nodes, v_level_parents
            FROM unnest(v_names, v_named_by) AS n(name, by)
            JOIN cronbox.job up ON up.bucket = v_bucket AND up.name = n.name
            WHERE n.name = ANY (ARRAY(SELECT m.name FROM unnest(v_names) AS m(name)
                                      WHERE cronbox.job_bucket(m.name) = v_bucket));
        END LOOP;
    END LOOP;
    IF NOT p_job_id = ANY (v_nodes) THEN
        RETURN NULL;
    END IF;
    -- Walk back from the job (reached) to the edge being added (parent = the job itself).
    v_path := ARRAY[p_job_id];
    v_cur := p_job_id;
    FOR i IN 1 .. cardinality(v_nodes) LOOP
        SELECT e.parent INTO v_cur
        FROM unnest(v_nodes, v_parents) AS e(node, parent)
        WHERE e.node = v_cur AND NOT (e.parent = ANY (v_path[1:cardinality(v_path) - 1]))
        ORDER BY (e.parent = p_job_id) DESC, e.parent
        LIMIT 1;
        EXIT WHEN v_cur IS NULL;
        v_path := v_cur || v_path;
        EXIT WHEN v_cur = p_job_id;
    END LOOP;
    -- Named in full up to 10 jobs; a longer cycle as its first 5 and last 4 around the count
    -- left out, so the error stays short however long the chain is.
    RETURN (SELECT string_agg(CASE WHEN p.ord = 6 AND cardinality(v_path) > 10
                                   THEN format('... %s more ...', cardinality(v_path) - 9)
                                   ELSE j.name END, ' -> ' ORDER BY p.ord)
            FROM unnest(v_path) WITH ORDINALITY AS p(id, ord)
            JOIN cronbox.job j ON j.job_id = p.id
            WHERE cardinality(v_path) <= 10 OR p.ord <= 6 OR p.ord > cardinality(v_path) - 4);
END
$$;

COMMENT ON FUNCTION cronbox.find_dependency_cycle(bigint,bigint[]) IS
'Returns the cycle (''a -> b -> a'', each waiting for the next; past 10 jobs the first 5 and the last 4 around ''... N more ...'') that making a job wait for the given upstreams would close, or NULL. Used by add_dependency; schedule(after => ...) may use it too.';

ALTER FUNCTION cronbox.find_dependency_cycle(bigint,bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.find_dependency_cycle(bigint,bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
