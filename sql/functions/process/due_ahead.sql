-- cronbox.due_ahead(p_within, p_limit, p_bucket): how many ready futures fall due in each of the next
-- seconds, (now(), now() + p_within], counting at most p_limit of them (lane by lane, soonest
-- first in each: a count that reaches the limit makes the lead the cap, whichever fires it left
-- uncounted, poller/lead.py): the poller sizes its early-dispatch lead from it
-- (CRONBOX_DISPATCH_LEAD_MAX: a burst of fires on one minute boundary is dispatched ahead early
-- enough to be written by its time). No locks, no writes: a loose walk of job_future_lane_idx,
-- index-only (queue and priority from cronbox.ready_lanes, one probe per second with fires, then
-- that second's entries counted). Runs as cronbox_runner, whom row security lets through (a
-- policy's check needs each future's job, read from the heap: most of the walk's cost), so only a
-- caller that may act on every schedule may call it, as dispatch. p_bucket: that bucket's
-- futures only (a poller leasing buckets sizes its lead from those it holds, one call each);
-- NULL: every bucket (where the futures are distributed by bucket, one call per bucket, the
-- counts added up to p_limit in all). PL/pgSQL, planned with the bucket bound (Citus plans no
-- parameterized SQL function over a distributed table).
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
    v_queue text[];    -- the queues and priorities with ready futures (of the bucket), read first:
    v_prio integer[];  -- on Citus a statement may not call a function that reads a distributed table
    v_walks integer[] := cronbox.bucket_walks('cronbox.job_future', p_bucket);
    v_now timestamptz := now();  -- the coordinator's: a statement run on a worker node would read its own
BEGIN
    -- Runs as cronbox_runner (docs/architecture.md, "Row security on the batch paths"): only an
    -- all-seeing caller may, as only such roles may call it.
    IF NOT cronbox.caller_writes_all() THEN
        RAISE EXCEPTION 'due_ahead: only a caller that may act on every schedule may call it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_bucket IS NULL AND array_length(v_walks, 1) > 1 THEN
        -- futures distributed by bucket (Citus): the lanes' recursive walk must stay in one
        -- bucket, so bucket by bucket, the counts added up to p_limit in all (bucket by bucket,
        -- soonest first in each: which fires are left uncounted matters no more than above)
        RETURN QUERY
        WITH per AS (
            SELECT d.second, d.fires, sum(d.fires) OVER (ORDER BY b.ord, d.second) - d.fires AS before
            FROM unnest(v_walks) WITH ORDINALITY AS b(bucket, ord)
            CROSS JOIN LATERAL cronbox.due_ahead(v_within, v_lim, b.bucket) d
        )
        SELECT per.second, sum(least(per.fires, v_lim - per.before))::integer
        FROM per
        WHERE per.before < v_lim
        GROUP BY 1
        ORDER BY 1;
        RETURN;
    END IF;
    IF p_bucket IS NOT NULL THEN
        v_set := ARRAY[p_bucket];
    END IF;
    SELECT array_agg(l.queue ORDER BY l.queue, l.priority), array_agg(l.priority ORDER BY l.queue, l.priority)
      INTO v_queue, v_prio
    FROM cronbox.ready_lanes(v_set) l;
    -- lane by lane, soonest first in each, up to the limit (v_set NULL: every bucket): a loose
    -- walk by second. Each step finds the lane's next future after the seconds counted (one probe
    -- of job_future_lane_idx), then counts that whole second's futures by a range of the index
    -- (count(*), up to what the limit leaves); a lane with none left hands over to the next.
    -- Per future only the index entry is read: a walk that took every future up the tree and
    -- computed its second cost ~4x more at a burst of 200,000 (docs/architecture.md, "The lead").
    -- The second from now in float8 (date_part), exact within an hour (a count of microseconds
    -- over 10^6 never rounds across one); each step moves past the future it found, whatever.
    RETURN QUERY
    WITH RECURSIVE walk(i, after, second, fires, total) AS (
        SELECT 1, v_now, NULL::integer, 0::bigint, 0::bigint
        UNION ALL
        SELECT CASE WHEN nx.due IS NULL THEN w.i + 1 ELSE w.i END,
               CASE WHEN nx.due IS NULL THEN v_now ELSE greatest(nx.due, nx.upto - interval '1 microsecond') END,
               nx.second, coalesce(c.fires, 0), w.total + coalesce(c.fires, 0)
        FROM walk w
        -- the lane's next future after the seconds counted, and the end of its second
        LEFT JOIN LATERAL (
            SELECT f.due_at AS due, x.second, v_now + (x.second + 1) * interval '1 second' AS upto
            FROM (SELECT f.due_at
                  FROM cronbox.job_future f
                  WHERE f.hold IS NULL AND (v_set IS NULL OR f.bucket = ANY (v_set))
                    AND f.queue = v_queue[w.i] AND f.priority = v_prio[w.i]
                    AND f.due_at > w.after AND f.due_at <= v_now + v_within
                  ORDER BY f.due_at
                  LIMIT 1) f
            CROSS JOIN LATERAL (SELECT floor(date_part('epoch', f.due_at - v_now))::integer AS second) x
            OFFSET 0
        ) nx ON true
        -- that second's futures in the lane, up to what the limit leaves
        LEFT JOIN LATERAL (
            SELECT count(*) AS fires
            FROM (SELECT 1 FROM cronbox.job_future f
                  WHERE f.hold IS NULL AND (v_set IS NULL OR f.bucket = ANY (v_set))
                    AND f.queue = v_queue[w.i] AND f.priority = v_prio[w.i]
                    AND f.due_at >= nx.due AND f.due_at < nx.upto AND f.due_at <= v_now + v_within
                  LIMIT v_lim - w.total) z
        ) c ON nx.due IS NOT NULL
        WHERE w.i <= coalesce(cardinality(v_queue), 0) AND w.total < v_lim
    )
    SELECT walk.second, sum(walk.fires)::integer
    FROM walk
    WHERE walk.fires > 0
    GROUP BY 1
    ORDER BY 1;
END
$$;

COMMENT ON FUNCTION cronbox.due_ahead(interval, integer, integer) IS
'Poller: per second from now, how many ready futures fall due within p_within (0 .. 1 hour), counting at most p_limit (1 .. 10,000,000) of them, soonest first in each queue and priority, of p_bucket only when given (NULL: every bucket; where the futures are distributed by bucket, bucket by bucket, the counts added up to p_limit in all). No locks; an index-only walk by second with fires. Runs as cronbox_runner: only a caller that may act on every schedule may call it. Sizes the early-dispatch lead for bursts (CRONBOX_DISPATCH_LEAD_MAX).';

ALTER FUNCTION cronbox.due_ahead(interval, integer, integer) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.due_ahead(interval, integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.due_ahead(interval, integer, integer) TO cronbox_process;
