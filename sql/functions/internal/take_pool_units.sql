-- cronbox.take_pool_units(p_needs, p_now): adds the units of runs put back in flight outside
-- dispatch (redrive of a dead-lettered run) to their pools' in_use, under the pools' row locks
-- taken in name order (after the runs: the finishing functions' order). Capacity is not checked:
-- the run was dispatched once already; the pool waits for it as for any run holding units.
-- p_needs: the runs' own needs (run.needs); NULL or empty does nothing. Returns the pools touched.
CREATE OR REPLACE FUNCTION cronbox.take_pool_units(p_needs jsonb[], p_now timestamptz) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
BEGIN
    IF p_needs IS NULL OR cardinality(p_needs) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM FROM cronbox.pool p
    WHERE p.name = ANY (ARRAY(SELECT DISTINCT e.key FROM unnest(p_needs) AS n(needs) CROSS JOIN LATERAL jsonb_each(n.needs) e))
    ORDER BY p.name FOR NO KEY UPDATE;
    UPDATE cronbox.pool p SET in_use = p.in_use + c.n, updated_at = p_now
    FROM (SELECT e.key AS pool, sum(e.value::text::bigint) AS n
          FROM unnest(p_needs) AS n(needs) CROSS JOIN LATERAL jsonb_each(n.needs) e
          GROUP BY e.key) c
    WHERE p.name = c.pool;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.take_pool_units(jsonb[], timestamp with time zone) IS
'Internal: adds the units of runs put back in flight (redrive) to their pools, under the pools'' locks in name order. Returns the pools touched.';

ALTER FUNCTION cronbox.take_pool_units(jsonb[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.take_pool_units(jsonb[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
