-- cronbox.release_queue_slots(p_queues, p_freed, p_now): the one queue-slot release. For each
-- limited queue in p_queues (locked FOR NO KEY UPDATE in queue order, the locking order of
-- dispatch and the finishing functions): `running` goes down by the matching p_freed count
-- (runs of the queue that just finished), or, when p_freed is NULL, is recounted from the
-- unfinished runs (cronbox.reconcile_queue_limits, set_queue_limit); then as many
-- queue-held futures as there are free slots are released (cronbox.release_futures), lowest
-- priority first, oldest first: where Citus distributes the futures by bucket, read bucket by
-- bucket and released in their buckets, every statement reading either the counters (a
-- reference table there) or one bucket's futures (docs/citus.md, "The finishing calls, bucket by
-- bucket"). Queues without a limit are ignored. Returns the number of limited queues handled.
CREATE OR REPLACE FUNCTION cronbox.release_queue_slots(
    p_queues text[],
    p_freed bigint[],
    p_now timestamptz
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues text[];
    v_counted_n bigint[];     -- the recount (p_freed NULL), parallel to v_queues
    v_free_queues text[];     -- the queues with free slots, and how many
    v_free integer[];
    v_release bigint[];
    v_walks integer[];
    v_cand jsonb := '[]';     -- several bucket sets: each one's first fires per queue
    v_b integer;
BEGIN
    SELECT array_agg(x.queue) INTO v_queues FROM (
        SELECT q.queue FROM cronbox.queue_limit q
        WHERE q.queue = ANY (p_queues)
        ORDER BY q.queue FOR NO KEY UPDATE) x;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    -- Plain PostgreSQL (no buckets): one statement writes the counters and chooses the waiting
    -- fires (locked SKIP LOCKED). With buckets (Citus), the statements below.
    IF to_regclass('cronbox.bucket') IS NULL THEN
        WITH given AS (
            SELECT u.queue, sum(u.n) AS n
            FROM unnest(p_queues, p_freed) AS u(queue, n)
            WHERE p_freed IS NOT NULL
            GROUP BY u.queue
        ),
        actual AS (
            SELECT u.queue, count(*) AS n
            FROM cronbox.unfinished_runs() u
            WHERE p_freed IS NULL AND u.queue = ANY (v_queues)
            GROUP BY u.queue
        ),
        counted AS (
            UPDATE cronbox.queue_limit q SET
                running = CASE WHEN p_freed IS NULL THEN coalesce(a.n, 0)
                               ELSE greatest(q.running - coalesce(g.n, 0), 0) END,
                updated_at = p_now
            FROM unnest(v_queues) AS u(queue)
            LEFT JOIN given g ON g.queue = u.queue
            LEFT JOIN actual a ON a.queue = u.queue
            WHERE q.queue = u.queue
            RETURNING q.queue, q.max_running - q.running AS free
        )
        SELECT array_agg(h.future_id) INTO v_release
        FROM counted CROSS JOIN LATERAL (
            SELECT f.future_id FROM cronbox.job_future f
            WHERE f.hold = 'queue_limit' AND f.hold_queue = counted.queue
            ORDER BY f.priority, f.due_at
            LIMIT greatest(counted.free, 0)
            FOR UPDATE SKIP LOCKED) h;
        PERFORM cronbox.release_futures(v_release);
        RETURN cardinality(v_queues);
    END IF;
    -- The recount (reconcile, set_queue_limit), read first in a statement of its own: on Citus
    -- the counters are a reference table, which a statement reading the runs may not write.
    IF p_freed IS NULL THEN
        v_counted_n := ARRAY(SELECT coalesce(a.n, 0)
                             FROM unnest(v_queues) WITH ORDINALITY AS q(queue, i)
                             LEFT JOIN (SELECT u.queue, count(*) AS n FROM cronbox.unfinished_runs() u
                                        WHERE u.queue = ANY (v_queues) GROUP BY u.queue) a ON a.queue = q.queue
                             ORDER BY q.i);
    END IF;
    -- The counters: a statement of their own (values only, no other table).
    WITH given AS (
        SELECT u.queue, sum(u.n) AS n
        FROM unnest(p_queues, p_freed) AS u(queue, n)
        WHERE p_freed IS NOT NULL
        GROUP BY u.queue
    ),
    counted AS (
        UPDATE cronbox.queue_limit q SET
            running = CASE WHEN p_freed IS NULL THEN coalesce(u.n, 0)
                           ELSE greatest(q.running - coalesce(g.n, 0), 0) END,
            updated_at = p_now
        FROM unnest(v_queues, v_counted_n) AS u(queue, n)
        LEFT JOIN given g ON g.queue = u.queue
        WHERE q.queue = u.queue
        RETURNING q.queue, q.max_running - q.running AS free
    )
    SELECT array_agg(c.queue), array_agg(c.free) INTO v_free_queues, v_free
    FROM counted c WHERE c.free > 0;
    IF v_free_queues IS NULL THEN
        RETURN cardinality(v_queues);
    END IF;
    -- As many queue-held futures as free slots, lowest priority first, oldest first; futures
    -- locked elsewhere are skipped (the 30 s backstop, cronbox.release_holds). One bucket set
    -- (plain PostgreSQL, or tables still the coordinator's own): one statement. Where Citus
    -- distributes the futures by bucket: each bucket's first fires of each queue, read without
    -- locks (a statement per bucket and queue), the queue's first over every bucket chosen, then
    -- locked (SKIP LOCKED) and released bucket by bucket.
    v_walks := cronbox.bucket_walks('cronbox.job_future');
    IF array_length(v_walks, 1) = 1 THEN
        SELECT array_agg(h.future_id) INTO v_release
        FROM unnest(v_free_queues, v_free) AS c(queue, free) CROSS JOIN LATERAL (
            SELECT f.future_id FROM cronbox.job_future f
            WHERE f.hold = 'queue_limit' AND f.hold_queue = c.queue
            ORDER BY f.priority, f.due_at
            LIMIT c.free
            FOR UPDATE SKIP LOCKED) h;
        PERFORM cronbox.release_futures(v_release);
        RETURN cardinality(v_queues);
    END IF;
    FOR i IN 1 .. cardinality(v_free_queues) LOOP
        FOR j IN 1 .. array_length(v_walks, 1) LOOP
            SELECT v_cand || coalesce(jsonb_agg(jsonb_build_array(i, f.priority, f.due_at, f.future_id, f.bucket)), '[]')
              INTO v_cand
            FROM (SELECT f.priority, f.due_at, f.future_id, f.bucket FROM cronbox.job_future f
                  WHERE f.bucket = v_walks[j][1] AND f.hold = 'queue_limit' AND f.hold_queue = v_free_queues[i]
                  ORDER BY f.priority, f.due_at
                  LIMIT v_free[i]) f;
        END LOOP;
    END LOOP;
    FOR v_b, v_release IN
        SELECT x.bucket, array_agg(x.future_id)
        FROM (SELECT (e ->> 4)::integer AS bucket, (e ->> 3)::bigint AS future_id,
                     row_number() OVER (PARTITION BY e ->> 0 ORDER BY (e ->> 1)::integer, (e ->> 2)::timestamptz,
                                        (e ->> 3)::bigint) AS n,
                     v_free[(e ->> 0)::integer] AS free
              FROM jsonb_array_elements(v_cand) AS e) x
        WHERE x.n <= x.free
        GROUP BY x.bucket ORDER BY x.bucket
    LOOP
        v_release := ARRAY(SELECT f.future_id FROM cronbox.job_future f
                           WHERE f.bucket = v_b AND f.future_id = ANY (v_release) AND f.hold = 'queue_limit'
                           FOR UPDATE SKIP LOCKED);
        PERFORM cronbox.release_futures(v_release, ARRAY[v_b]);
    END LOOP;
    RETURN cardinality(v_queues);
END
$$;

COMMENT ON FUNCTION cronbox.release_queue_slots(text[], bigint[], timestamp with time zone) IS
'Internal: frees slots of limited queues (running minus p_freed, or recounted when p_freed is NULL) and releases that many queue-held futures. Returns the number of limited queues handled.';

ALTER FUNCTION cronbox.release_queue_slots(text[], bigint[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_queue_slots(text[], bigint[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
