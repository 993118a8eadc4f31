-- cronbox.find_dependency_cycle(p_job_id, p_upstream_ids): would making job p_job_id wait for
-- p_upstream_ids close a cycle? Follows "waits for" edges (cronbox.job_dependency and
-- `after` lists) upward from the upstreams; each (job, reached-from) pair is visited once, so
-- the cost is linear in the edges reached (a round of statements per after-list hop). Returns the cycle as names ('a -> b -> a', each
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
    v_nodes bigint[] := '{}';  -- every pair (job, reached from) found
    v_parents bigint[] := '{}';
    v_path bigint[];
    v_cur bigint;
    v_front bigint[] := p_upstream_ids;  -- where a walk starts: the upstreams, then after-list names' jobs
    v_front_parents bigint[] := array_fill(p_job_id, ARRAY[cardinality(p_upstream_ids)]);
    v_walked bigint[];  -- the pairs one walk found
    v_walked_parents bigint[];
    v_new bigint[];  -- the jobs one walk reached first
    v_names text[];  -- their after-lists' names, and the jobs listing them
    v_named_by bigint[];
BEGIN
    -- In rounds: a walk through the gates (one recursive statement over cronbox.job_dependency, a
    -- reference table on Citus), then the after-lists of the jobs it reached first
    -- (cronbox.job_after_edge, also one), each name read in the bucket it gives
    -- (cronbox.find_jobs_named: a statement per bucket): no statement reads the jobs of several buckets (Citus refuses a recursive walk
    -- over a distributed table). A job is walked from in one round only (a hashed NOT IN), so
    -- the rounds together cost what one walk over the edges reached costs.
    WHILE cardinality(v_front) > 0 LOOP
        WITH RECURSIVE walk(node, parent) AS (
            SELECT f.node, f.parent FROM unnest(v_front, v_front_parents) AS f(node, parent)
            WHERE f.node IS NOT NULL
            UNION
            SELECT g.upstream_id, w.node FROM walk w
            -- each job's gates by their key (OFFSET 0 keeps the probe: a generic plan's hash
            -- join would read every gate at each level)
            CROSS JOIN LATERAL (SELECT d.upstream_id FROM cronbox.job_dependency d WHERE d.job_id = w.node OFFSET 0) g
            WHERE w.node <> p_job_id AND w.node NOT IN (SELECT unnest(v_nodes))
        )
        SELECT coalesce(array_agg(w.node), '{}'), coalesce(array_agg(w.parent), '{}') INTO v_walked, v_walked_parents
        FROM walk w;
        v_new := ARRAY(SELECT DISTINCT w.node FROM unnest(v_walked) AS w(node)
                       WHERE w.node <> p_job_id AND w.node NOT IN (SELECT unnest(v_nodes)));
        v_nodes := v_nodes || v_walked;
        v_parents := v_parents || v_walked_parents;
        SELECT coalesce(array_agg(e.upstream), '{}'), coalesce(array_agg(e.job_id), '{}') INTO v_names, v_named_by
        FROM cronbox.job_after_edge e WHERE e.job_id = ANY (v_new);
        -- the jobs those names give, the next round's start
        SELECT coalesce(array_agg(up.job_id), '{}'), coalesce(array_agg(n.by), '{}') INTO v_front, v_front_parents
        FROM unnest(v_names, v_named_by) AS n(name, by)
        JOIN cronbox.find_jobs_named(v_names) up ON up.name = n.name;
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
