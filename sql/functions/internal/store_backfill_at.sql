-- Internal: the body of cronbox.store_backfill, with the time as its last parameter p_now. The public
-- cronbox.store_backfill passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.store_backfill_at(...): the second half of a backfill pass, set-based over parallel
-- arrays. Inserts the computed fires as futures of origin 'backfill' (due one after another,
-- 0.5 ms apart in fire order, from the later of p_now and the last due time a backfill pass
-- gave in the bucket (backfill.due_tail, backfill_due_tail_idx): at most 2,000 backfilled fires
-- come due per second in a bucket whatever is requested, so they never pile up ahead of other
-- jobs' next fires; behind
-- regular fires of the same priority already due; the request's overlap and priority), except fires of the job that already ran (a run
-- in any state but missed, skipped or cancelled before delivery: run_job_history_idx, from a
-- day before the first fire)
-- or are pending (a scheduled, retry or backfilled future): counted as duplicates; and except
-- fires the job's exclusion calendars exclude (cronbox.excluded_by, the predicate store_fires
-- applies to regular fires): counted as excluded. Records
-- each request's progress and marks finished ones done. The jobs must be locked by
-- claim_backfills in the same transaction (then a concurrent saturation or dispatch of the
-- same fire has committed before this function's statements, or waits for this transaction).
-- By bucket (docs/citus.md, "Backfill, bucket by bucket"): p_bucket is the bucket of the pass's
-- requests (the poller stores a pass bucket by bucket, as claimed; NULL: every bucket at once,
-- plain PostgreSQL's one). Each statement reads and writes either that bucket's rows (backfill,
-- job, job_future) or the coordinator's own tables (calendars, history, outbox) from values read
-- before, never both; the requests' progress is updated by key, computed beforehand (the outcome
-- formats times: no STABLE function of a column in an update on Citus).
CREATE OR REPLACE FUNCTION cronbox.store_backfill_at(
    p_backfill      bigint[],       -- one element per claimed request
    p_done_through  timestamptz[],  -- last fire handled (NULL = unchanged)
    p_done          boolean[],      -- true: nothing left to do
    p_note          text[],         -- why it stopped early (cap, error), or NULL
    p_fire_backfill bigint[],       -- one element per fire
    p_fire_at       timestamptz[],
    p_bucket        integer DEFAULT NULL,  -- the requests' bucket; NULL: every bucket
    p_now           timestamptz DEFAULT now()
) RETURNS TABLE (futures integer, duplicates integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    c_spacing constant interval := interval '500 microseconds';  -- 2,000 fires/s (docs/schedules.md)
    v_set integer[];          -- the bucket set written (cronbox.bucket_walks)
    v_from timestamptz;
    v_tail timestamptz;
    v_rq_ids bigint[];        -- the requests read in the bucket set, in id order, with their job,
    v_rq_job bigint[];        -- overlap, priority, progress so far and the job's bucket and queue
    v_rq_overlap text[];
    v_rq_priority integer[];
    v_rq_fires integer[];
    v_rq_dups integer[];
    v_rq_excl integer[];
    v_rq_through timestamptz[];
    v_rq_bucket integer[];
    v_rq_queue text[];
    v_job bigint[];           -- per fire: its request's job (NULL: a request not in the bucket set)
    v_excluded boolean[];     -- per fire: excluded by the job's calendars
    v_dup boolean[];          -- per fire: ran, in flight or pending
    v_new_job bigint[];       -- the futures written
    v_new_at timestamptz[];
    v_up_ids bigint[];        -- each request's progress, in id order
    v_up_fires integer[];
    v_up_dups integer[];
    v_up_excl integer[];
    v_up_through timestamptz[];
    v_up_done boolean[];
    v_up_outcome text[];
    v_up_new integer[];
    v_futures integer;
    v_duplicates integer;
BEGIN
    v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.backfill', p_bucket)));
    -- After the last due time a pass gave in the bucket (one probe of backfill_due_tail_idx per
    -- bucket of the set), or now.
    IF cardinality(v_set) = 1 THEN
        v_from := greatest(p_now, (SELECT max(b.due_tail) FROM cronbox.backfill b WHERE b.bucket = v_set[1]));
    ELSE
        v_from := greatest(p_now, (SELECT max(t.tail) FROM unnest(v_set) AS s(bucket)
                                   CROSS JOIN LATERAL (SELECT max(b.due_tail) AS tail FROM cronbox.backfill b
                                                       WHERE b.bucket = s.bucket) t));
    END IF;
    v_tail := v_from + coalesce(cardinality(p_fire_at), 0) * c_spacing;

    -- The requests with their jobs, read in the bucket (one probe per request).
    SELECT array_agg(b.backfill_id ORDER BY b.backfill_id), array_agg(b.job_id ORDER BY b.backfill_id),
           array_agg(b.overlap ORDER BY b.backfill_id), array_agg(b.priority ORDER BY b.backfill_id),
           array_agg(b.fires ORDER BY b.backfill_id), array_agg(b.duplicates ORDER BY b.backfill_id),
           array_agg(b.excluded ORDER BY b.backfill_id), array_agg(b.done_through ORDER BY b.backfill_id),
           array_agg(j.bucket ORDER BY b.backfill_id), array_agg(j.queue ORDER BY b.backfill_id)
      INTO v_rq_ids, v_rq_job, v_rq_overlap, v_rq_priority, v_rq_fires, v_rq_dups, v_rq_excl, v_rq_through,
           v_rq_bucket, v_rq_queue
    FROM cronbox.backfill b
    CROSS JOIN LATERAL (SELECT j.bucket, j.queue FROM cronbox.job j
                        WHERE j.bucket = ANY (v_set) AND j.job_id = b.job_id LIMIT 1) j
    WHERE b.bucket = ANY (v_set) AND b.backfill_id = ANY (p_backfill || p_fire_backfill);
    IF v_rq_ids IS NULL THEN
        RETURN QUERY SELECT 0, 0;
        RETURN;
    END IF;
    -- each fire's job, its request found by binary search (width_bucket)
    v_job := ARRAY(SELECT CASE WHEN v_rq_ids[x.k] = f.backfill_id THEN v_rq_job[x.k] END
                   FROM unnest(p_fire_backfill) WITH ORDINALITY AS f(backfill_id, i)
                   CROSS JOIN LATERAL (SELECT width_bucket(f.backfill_id, v_rq_ids) AS k) x
                   ORDER BY f.i);

    -- Fires the job's exclusion calendars exclude: the same predicate as regular fires.
    IF EXISTS (SELECT 1 FROM cronbox.job_calendar jc WHERE jc.job_id = ANY (v_rq_job)) THEN
        WITH per_job AS (
            SELECT array_agg(f.i ORDER BY f.fire_at, f.i) AS pos, array_agg(f.fire_at ORDER BY f.fire_at, f.i) AS fires, c.ids
            FROM unnest(v_job, p_fire_at) WITH ORDINALITY AS f(job_id, fire_at, i)
            JOIN (SELECT jc.job_id, array_agg(jc.calendar_id) AS ids FROM cronbox.job_calendar jc
                  WHERE jc.job_id = ANY (v_rq_job) GROUP BY jc.job_id) c ON c.job_id = f.job_id
            GROUP BY f.job_id, c.ids
        ),
        why AS (
            SELECT x.i, x.cal FROM per_job p
            CROSS JOIN LATERAL unnest(p.pos, cronbox.excluded_by(p.ids, p.fires)) AS x(i, cal)
        )
        SELECT array_agg(w.cal IS NOT NULL ORDER BY f.i) INTO v_excluded
        FROM generate_subscripts(p_fire_at, 1) AS f(i)
        LEFT JOIN why w ON w.i = f.i;
    END IF;

    -- Fires of these jobs that ran (one walk of each job's history since the first fire) or
    -- are in flight (a run is its outbox row until its final report): the coordinator's tables.
    WITH fire AS (
        SELECT f.job_id, f.fire_at FROM unnest(v_job, p_fire_at) AS f(job_id, fire_at) WHERE f.job_id IS NOT NULL
    ),
    ran AS MATERIALIZED (
        SELECT DISTINCT r.job_id, r.fire_at
        FROM cronbox.run r
        WHERE r.job_id = ANY (ARRAY(SELECT DISTINCT fire.job_id FROM fire))
          AND r.run_id >= cronbox.run_id_at((SELECT min(fire.fire_at) FROM fire) - interval '1 day')
          AND r.fire_at >= (SELECT min(fire.fire_at) FROM fire)
          AND r.fire_at <= (SELECT max(fire.fire_at) FROM fire)
          AND r.state NOT IN ('missed', 'skipped')
          -- cancelled before any worker had it (pause() withdrawing an early run): never ran
          AND NOT (r.state = 'cancelled' AND r.delivered_at IS NULL AND r.started_at IS NULL)
          AND r.origin IN ('schedule', 'retry', 'backfill')
        UNION
        SELECT o.job_id, o.fire_at
        FROM cronbox.outbox o
        WHERE o.kind = 'run' AND o.job_id = ANY (ARRAY(SELECT DISTINCT fire.job_id FROM fire))
          AND o.fire_at >= (SELECT min(fire.fire_at) FROM fire)
          AND o.fire_at <= (SELECT max(fire.fire_at) FROM fire)
          AND o.origin IN ('schedule', 'retry', 'backfill')
    )
    SELECT array_agg(r.job_id IS NOT NULL ORDER BY f.i) INTO v_dup
    FROM unnest(v_job, p_fire_at) WITH ORDINALITY AS f(job_id, fire_at, i)
    LEFT JOIN ran r ON r.job_id = f.job_id AND r.fire_at = f.fire_at;
    -- and those pending (a scheduled, retry or backfilled future), read in the bucket
    SELECT array_agg(v_dup[f.i] OR p.hit IS NOT NULL ORDER BY f.i) INTO v_dup
    FROM unnest(v_job, p_fire_at) WITH ORDINALITY AS f(job_id, fire_at, i)
    LEFT JOIN LATERAL (SELECT true AS hit FROM cronbox.job_future p
                       WHERE p.bucket = ANY (v_set) AND p.job_id = f.job_id AND p.fire_at = f.fire_at
                         AND p.origin IN ('schedule', 'retry', 'backfill')
                       LIMIT 1) p ON true;

    -- The new fires as futures, from the values read (no bucket table in the insert's SELECT),
    -- due in fire order from v_from.
    WITH written AS (
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, overlap, created_at, bucket, queue)
        SELECT f.job_id, f.fire_at, v_from + f.n * c_spacing, v_rq_priority[x.k],
               'backfill', v_rq_overlap[x.k], p_now, v_rq_bucket[x.k], v_rq_queue[x.k]
        FROM (SELECT f.*, row_number() OVER (ORDER BY f.fire_at, f.backfill_id) AS n
              FROM unnest(p_fire_backfill, p_fire_at, v_job) WITH ORDINALITY AS f(backfill_id, fire_at, job_id, i)
              WHERE f.job_id IS NOT NULL) f
        CROSS JOIN LATERAL (SELECT width_bucket(f.backfill_id, v_rq_ids) AS k) x
        WHERE v_excluded[f.i] IS NOT TRUE AND NOT v_dup[f.i]
        ORDER BY f.n
        ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
        RETURNING job_id, fire_at
    )
    SELECT array_agg(w.job_id), array_agg(w.fire_at) INTO v_new_job, v_new_at FROM written w;
    v_futures := coalesce(cardinality(v_new_job), 0);

    -- Each request's progress and outcome, computed from the values read.
    WITH fire AS (
        SELECT f.backfill_id, f.job_id, f.fire_at, f.i
        FROM unnest(p_fire_backfill, v_job, p_fire_at) WITH ORDINALITY AS f(backfill_id, job_id, fire_at, i)
        WHERE f.job_id IS NOT NULL
    ),
    -- two requests of one job covering the same fire in one pass: the first one made it
    made AS (
        SELECT DISTINCT ON (n.job_id, n.fire_at) n.job_id, n.fire_at, fire.backfill_id
        FROM unnest(v_new_job, v_new_at) AS n(job_id, fire_at)
        JOIN fire ON fire.job_id = n.job_id AND fire.fire_at = n.fire_at
        ORDER BY n.job_id, n.fire_at, fire.backfill_id
    ),
    counts AS (
        SELECT fire.backfill_id,
               count(m.job_id) AS n_new,
               count(*) FILTER (WHERE m.job_id IS NULL AND v_excluded[fire.i] IS NOT TRUE) AS n_dup,
               count(*) FILTER (WHERE v_excluded[fire.i]) AS n_excl
        FROM fire
        LEFT JOIN made m ON m.job_id = fire.job_id AND m.fire_at = fire.fire_at AND m.backfill_id = fire.backfill_id
        GROUP BY fire.backfill_id
    ),
    req AS (
        SELECT a.backfill_id, a.done, a.note, coalesce(c.n_new, 0)::integer AS n_new,
               v_rq_fires[x.k] + coalesce(c.n_new, 0)::integer AS fires,
               v_rq_dups[x.k] + coalesce(c.n_dup, 0)::integer AS dups,
               v_rq_excl[x.k] + coalesce(c.n_excl, 0)::integer AS excl,
               coalesce(a.done_through, v_rq_through[x.k]) AS through
        FROM unnest(p_backfill, p_done_through, p_done, p_note) AS a(backfill_id, done_through, done, note)
        CROSS JOIN LATERAL (SELECT width_bucket(a.backfill_id, v_rq_ids) AS k) x
        LEFT JOIN counts c ON c.backfill_id = a.backfill_id
        WHERE v_rq_ids[x.k] = a.backfill_id
    )
    SELECT array_agg(r.backfill_id ORDER BY r.backfill_id), array_agg(r.fires ORDER BY r.backfill_id),
           array_agg(r.dups ORDER BY r.backfill_id), array_agg(r.excl ORDER BY r.backfill_id),
           array_agg(r.through ORDER BY r.backfill_id), array_agg(r.done ORDER BY r.backfill_id),
           array_agg(CASE WHEN r.done THEN
                         format('done: %s fire%s backfilled, %s already ran or pending%s%s',
                                r.fires, CASE WHEN r.fires = 1 THEN '' ELSE 's' END, r.dups,
                                CASE WHEN r.excl > 0 THEN format(', %s excluded by calendars', r.excl) ELSE '' END,
                                CASE WHEN r.note IS NOT NULL THEN '; ' || r.note ELSE '' END)
                     ELSE format('in progress: fires up to %s handled%s', r.through,
                                 CASE WHEN r.note IS NOT NULL THEN '; ' || r.note ELSE '' END) END
                     ORDER BY r.backfill_id),
           array_agg(r.n_new ORDER BY r.backfill_id)
      INTO v_up_ids, v_up_fires, v_up_dups, v_up_excl, v_up_through, v_up_done, v_up_outcome, v_up_new
    FROM req r;

    -- The requests' rows by key (each SET wraps its subscript: docs/citus.md).
    IF v_up_ids IS NOT NULL THEN
        WITH per_request AS (
            SELECT v_up_ids AS ids, v_up_fires AS fires, v_up_dups AS dups, v_up_excl AS excl,
                   v_up_through AS through, v_up_done AS done, v_up_outcome AS outcome, v_up_new AS n_new
        )
        UPDATE cronbox.backfill b SET
            fires = coalesce(p.fires[width_bucket(b.backfill_id, p.ids)], b.fires),
            duplicates = coalesce(p.dups[width_bucket(b.backfill_id, p.ids)], b.duplicates),
            excluded = coalesce(p.excl[width_bucket(b.backfill_id, p.ids)], b.excluded),
            done_through = coalesce(p.through[width_bucket(b.backfill_id, p.ids)], b.done_through),
            due_tail = CASE WHEN p.n_new[width_bucket(b.backfill_id, p.ids)] > 0 THEN v_tail ELSE b.due_tail END,
            done_at = CASE WHEN p.done[width_bucket(b.backfill_id, p.ids)] THEN p_now END,
            outcome = coalesce(p.outcome[width_bucket(b.backfill_id, p.ids)], b.outcome)
        FROM per_request p
        WHERE b.bucket = ANY (v_set) AND b.backfill_id = ANY (p.ids);
    END IF;

    v_duplicates := coalesce((SELECT count(*) FROM unnest(v_job) WITH ORDINALITY AS f(job_id, i)
                              WHERE f.job_id IS NOT NULL AND v_excluded[f.i] IS NOT TRUE), 0) - v_futures;
    IF v_futures > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN QUERY SELECT v_futures, v_duplicates;
END
$$;

COMMENT ON FUNCTION cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer) with the time as p_now; tests use it to fix the clock. Poller: stores a backfill pass computed from cronbox.claim_backfills: fires as futures of origin backfill (due 0.5 ms apart in fire order from the later of now and the last due time given to a backfilled fire of the bucket: at most 2,000 per second per bucket; p_bucket the requests'' bucket, NULL: every bucket), except those that already ran or are pending (counted as duplicates) and those its exclusion calendars exclude (counted as excluded); each request''s progress, done ones marked done. Returns (futures, duplicates).';

ALTER FUNCTION cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
