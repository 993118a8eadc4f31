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
BEGIN
    WITH RECURSIVE walk(node, parent) AS (
        SELECT u.id, p_job_id FROM unnest(p_upstream_ids) u(id)
        UNION
        SELECT nx.id, w.node
        FROM walk w
        CROSS JOIN LATERAL (
            SELECT d.upstream_id AS id FROM cronbox.job_dependency d WHERE d.job_id = w.node
            UNION
            SELECT up.job_id FROM cronbox.job x JOIN cronbox.job up ON up.name = ANY (x.after)
            WHERE x.job_id = w.node
        ) nx
        WHERE w.node <> p_job_id
    )
    SELECT array_agg(walk.node), array_agg(walk.parent) INTO v_nodes, v_parents FROM walk;
    IF v_nodes IS NULL OR NOT p_job_id = ANY (v_nodes) THEN
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
