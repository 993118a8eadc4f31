-- Internal: the body of cronbox.reconcile_pools, with the time as its last parameter p_now. The
-- public cronbox.reconcile_pools passes now(); no cronbox role may execute this one (tests call
-- it as the owner or a superuser to fix the clock).
-- cronbox.reconcile_pools_at(p_pools, p_now): recounts pool.in_use from the unfinished runs'
-- own needs (found by their leases and outbox rows) for the given pools (NULL: all), under the
-- pools' row locks taken in name order, and releases waiting fires into free units. The
-- counters are exact by construction (dispatch adds, the one final transition of a run gives
-- back); this repairs what an operator's hand could break. The poller calls it every minute.
-- Returns the number of pools recounted.
CREATE OR REPLACE FUNCTION cronbox.reconcile_pools_at(
    p_pools text[] DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_pools text[];
    v_in_use bigint[];
BEGIN
    SELECT array_agg(p.name ORDER BY p.name) INTO v_pools FROM cronbox.pool p
    WHERE p_pools IS NULL OR p.name = ANY (p_pools);
    IF v_pools IS NULL THEN
        RETURN 0;
    END IF;
    -- the pools' locks first, in name order, so that the count below (a new statement, a new
    -- snapshot) sees every dispatch and end that changed them
    PERFORM FROM cronbox.pool p WHERE p.name = ANY (v_pools) ORDER BY p.name FOR NO KEY UPDATE;
    -- every unfinished run's own units (found by its lease or its outbox row)
    SELECT array_agg(coalesce(c.n, 0) ORDER BY u.pool) INTO v_in_use
    FROM unnest(v_pools) AS u(pool)
    LEFT JOIN (
        SELECT e.key AS pool, sum(e.value::text::bigint)::bigint AS n
        FROM (SELECT o.needs FROM cronbox.outbox o  -- the runs in flight
              WHERE o.kind = 'run' AND o.needs IS NOT NULL) h
        CROSS JOIN LATERAL jsonb_each(h.needs) e
        GROUP BY e.key) c ON c.pool = u.pool;
    PERFORM cronbox.release_pool_units(v_pools, NULL, p_now, v_in_use);
    RETURN cardinality(v_pools);
END
$$;

COMMENT ON FUNCTION cronbox.reconcile_pools_at(text[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.reconcile_pools(text[]) with the time as p_now; tests use it to fix the clock. Recounts the units held by unfinished runs of the given pools (NULL: all) and releases waiting fires into free units. Returns the number of pools recounted.';

ALTER FUNCTION cronbox.reconcile_pools_at(text[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reconcile_pools_at(text[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
