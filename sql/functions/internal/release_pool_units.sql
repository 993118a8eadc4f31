-- cronbox.release_pool_units(p_pools, p_freed, p_now): the one release of pool units. For each
-- pool in p_pools (rows locked FOR NO KEY UPDATE in name order, after the queue_limit rows: the
-- locking order of dispatch and the finishing functions), in_use goes down by the matching
-- p_freed units (runs that just ended give back what they took at dispatch), or, when p_freed
-- is NULL, is set to p_in_use (the recount of cronbox.reconcile_pools, made under these locks). Then
-- the fires waiting for the pool (hold = 'pool', job_future_pool_held_idx) are released in
-- priority order, oldest first, as long as their units fit the free units: the first that does
-- not fit stops the release (no smaller fire overtakes it). Waiting futures locked elsewhere
-- are skipped (the 30 s backstop, cronbox.release_holds). Where Citus distributes the futures
-- by bucket, they are read bucket by bucket and released in their buckets, every statement
-- reading either the counters (a reference table there) or one bucket's rows (docs/citus.md,
-- "The finishing calls, bucket by bucket"). Returns the number released.
CREATE OR REPLACE FUNCTION cronbox.release_pool_units(
    p_pools text[],
    p_freed bigint[],
    p_now timestamptz,
    p_in_use bigint[] DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_pools text[];
    v_free_pools text[];      -- the pools with free units, and how many
    v_free bigint[];
    v_release bigint[];
    v_walks integer[];
    v_cand jsonb := '[]';     -- several bucket sets: each one's first waiting fires per pool
    v_b integer;
    v_n integer := 0;
BEGIN
    SELECT array_agg(x.name) INTO v_pools FROM (
        SELECT p.name FROM cronbox.pool p
        WHERE p.name = ANY (p_pools)
        ORDER BY p.name FOR NO KEY UPDATE) x;
    IF v_pools IS NULL THEN
        RETURN 0;
    END IF;
    -- Plain PostgreSQL (no buckets): one statement writes the counters and chooses the waiting
    -- fires (locked SKIP LOCKED). With buckets (Citus), the statements below.
    IF to_regclass('cronbox.bucket') IS NULL THEN
        WITH given AS (
            SELECT u.pool, sum(u.n) AS n
            FROM unnest(p_pools, p_freed) AS u(pool, n)
            WHERE p_freed IS NOT NULL
            GROUP BY u.pool
        ),
        held AS (
            SELECT u.pool, u.n FROM unnest(p_pools, p_in_use) AS u(pool, n) WHERE p_freed IS NULL
        ),
        counted AS (
            UPDATE cronbox.pool p SET
                in_use = CASE WHEN p_freed IS NULL THEN coalesce(h.n, 0)
                              ELSE greatest(p.in_use - coalesce(g.n, 0), 0) END,
                updated_at = CASE WHEN p_freed IS NULL OR coalesce(g.n, 0) <> 0 THEN p_now ELSE p.updated_at END
            FROM unnest(v_pools) AS u(pool)
            LEFT JOIN given g ON g.pool = u.pool
            LEFT JOIN held h ON h.pool = u.pool
            WHERE p.name = u.pool
            RETURNING p.name, p.capacity - p.in_use AS free
        )
        SELECT array_agg(x.future_id) INTO v_release
        FROM counted CROSS JOIN LATERAL (
            SELECT w.future_id
            FROM (SELECT h.future_id,
                         sum(h.units) OVER (ORDER BY h.priority, h.due_at, h.future_id) AS upto
                  FROM (SELECT f.future_id, f.priority, f.due_at,
                               coalesce((SELECT (j.needs ->> counted.name)::bigint FROM cronbox.job j
                                         WHERE j.job_id = f.job_id), 0) AS units
                        FROM cronbox.job_future f
                        WHERE f.hold = 'pool' AND f.hold_queue = counted.name
                        ORDER BY f.priority, f.due_at
                        LIMIT 1000
                        FOR UPDATE OF f SKIP LOCKED) h) w
            WHERE w.upto <= counted.free) x
        WHERE counted.free > 0;
        RETURN cronbox.release_futures(v_release);
    END IF;
    -- The counters: a statement of their own (values only; on Citus a reference table, which a
    -- statement reading the futures may not write).
    WITH given AS (
        SELECT u.pool, sum(u.n) AS n
        FROM unnest(p_pools, p_freed) AS u(pool, n)
        WHERE p_freed IS NOT NULL
        GROUP BY u.pool
    ),
    held AS (
        SELECT u.pool, u.n FROM unnest(p_pools, p_in_use) AS u(pool, n) WHERE p_freed IS NULL
    ),
    counted AS (
        UPDATE cronbox.pool p SET
            in_use = CASE WHEN p_freed IS NULL THEN coalesce(h.n, 0)
                          ELSE greatest(p.in_use - coalesce(g.n, 0), 0) END,
            updated_at = CASE WHEN p_freed IS NULL OR coalesce(g.n, 0) <> 0 THEN p_now ELSE p.updated_at END
        FROM unnest(v_pools) AS u(pool)
        LEFT JOIN given g ON g.pool = u.pool
        LEFT JOIN held h ON h.pool = u.pool
        WHERE p.name = u.pool
        RETURNING p.name, p.capacity - p.in_use AS free
    )
    SELECT array_agg(c.name), array_agg(c.free) INTO v_free_pools, v_free
    FROM counted c WHERE c.free > 0;
    IF v_free_pools IS NULL THEN
        RETURN 0;
    END IF;
    -- The fires waiting for these pools, in priority order as long as their units fit; futures
    -- locked elsewhere are skipped. One bucket set (plain PostgreSQL, or tables still the
    -- coordinator's own): one statement. Where Citus distributes the futures by bucket: each
    -- bucket's first 1,000 waiting fires of each pool with their units (the job in the same
    -- bucket), read without locks (a statement per bucket and pool), the pool's fitting fires
    -- over every bucket chosen in that order, then locked (SKIP LOCKED) and released bucket by
    -- bucket.
    v_walks := cronbox.bucket_walks('cronbox.job_future');
    IF array_length(v_walks, 1) = 1 THEN
        SELECT array_agg(x.future_id) INTO v_release
        FROM unnest(v_free_pools, v_free) AS c(name, free) CROSS JOIN LATERAL (
            SELECT w.future_id
            FROM (SELECT h.future_id,
                         sum(h.units) OVER (ORDER BY h.priority, h.due_at, h.future_id) AS upto
                  FROM (SELECT f.future_id, f.priority, f.due_at,
                               coalesce((SELECT (j.needs ->> c.name)::bigint FROM cronbox.job j
                                         WHERE j.job_id = f.job_id), 0) AS units
                        FROM cronbox.job_future f
                        WHERE f.hold = 'pool' AND f.hold_queue = c.name
                        ORDER BY f.priority, f.due_at
                        LIMIT 1000
                        FOR UPDATE OF f SKIP LOCKED) h) w
            WHERE w.upto <= c.free) x;
        RETURN cronbox.release_futures(v_release);
    END IF;
    FOR i IN 1 .. cardinality(v_free_pools) LOOP
        FOR k IN 1 .. array_length(v_walks, 1) LOOP
            SELECT v_cand || coalesce(jsonb_agg(jsonb_build_array(i, h.priority, h.due_at, h.future_id, h.bucket, h.units)), '[]')
              INTO v_cand
            FROM (SELECT f.future_id, f.priority, f.due_at, f.bucket,
                         coalesce((SELECT (jb.needs ->> v_free_pools[i])::bigint FROM cronbox.job jb
                                   WHERE jb.bucket = v_walks[k][1] AND jb.job_id = f.job_id), 0) AS units
                  FROM cronbox.job_future f
                  WHERE f.bucket = v_walks[k][1] AND f.hold = 'pool' AND f.hold_queue = v_free_pools[i]
                  ORDER BY f.priority, f.due_at
                  LIMIT 1000) h;
        END LOOP;
    END LOOP;
    FOR v_b, v_release IN
        SELECT x.bucket, array_agg(x.future_id)
        FROM (SELECT (e ->> 4)::integer AS bucket, (e ->> 3)::bigint AS future_id,
                     sum((e ->> 5)::bigint) OVER (PARTITION BY e ->> 0 ORDER BY (e ->> 1)::integer,
                                                  (e ->> 2)::timestamptz, (e ->> 3)::bigint) AS upto,
                     v_free[(e ->> 0)::integer] AS free
              FROM jsonb_array_elements(v_cand) AS e) x
        WHERE x.upto <= x.free
        GROUP BY x.bucket ORDER BY x.bucket
    LOOP
        v_release := ARRAY(SELECT f.future_id FROM cronbox.job_future f
                           WHERE f.bucket = v_b AND f.future_id = ANY (v_release) AND f.hold = 'pool'
                           FOR UPDATE SKIP LOCKED);
        v_n := v_n + cronbox.release_futures(v_release, ARRAY[v_b]);
    END LOOP;
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.release_pool_units(text[], bigint[], timestamp with time zone, bigint[]) IS
'Internal: gives pool units back (in_use minus p_freed, or set to the recount p_in_use when p_freed is NULL) and releases the fires waiting for those pools, in priority order, as long as their units fit. Returns the number released.';

ALTER FUNCTION cronbox.release_pool_units(text[], bigint[], timestamp with time zone, bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_pool_units(text[], bigint[], timestamp with time zone, bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
