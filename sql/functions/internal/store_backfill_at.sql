-- Internal: the body of cronbox.store_backfill, with the time as its last parameter p_now. The public
-- cronbox.store_backfill passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.store_backfill_at(...): the second half of a backfill pass, set-based over parallel
-- arrays. Inserts the computed fires as futures of origin 'backfill' (due one after another,
-- 0.5 ms apart in fire order, from the later of p_now and the last due time any backfill pass
-- gave (backfill.due_tail, backfill_due_tail_idx): at most 2,000 backfilled fires come due per
-- second whatever is requested, so they never pile up ahead of other jobs' next fires; behind
-- regular fires of the same priority already due; the request's overlap and priority), except fires of the job that already ran (a run
-- in any state but missed, skipped or cancelled before delivery: run_job_history_idx, from a
-- day before the first fire)
-- or are pending (a scheduled, retry or backfilled future): counted as duplicates; and except
-- fires the job's exclusion calendars exclude (cronbox.excluded_by, the predicate store_fires
-- applies to regular fires): counted as excluded. Records
-- each request's progress and marks finished ones done. The jobs must be locked by
-- claim_backfills in the same transaction (then a concurrent saturation or dispatch of the
-- same fire has committed before this statement's snapshot, or waits for this transaction).
CREATE OR REPLACE FUNCTION cronbox.store_backfill_at(
    p_backfill      bigint[],       -- one element per claimed request
    p_done_through  timestamptz[],  -- last fire handled (NULL = unchanged)
    p_done          boolean[],      -- true: nothing left to do
    p_note          text[],         -- why it stopped early (cap, error), or NULL
    p_fire_backfill bigint[],       -- one element per fire
    p_fire_at       timestamptz[],
    p_now           timestamptz DEFAULT now()
) RETURNS TABLE (futures integer, duplicates integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    c_spacing constant interval := interval '500 microseconds';  -- 2,000 fires/s (docs/schedules.md)
    v_futures integer;
    v_duplicates integer;
    v_from timestamptz;
BEGIN
    -- After the last backfilled fire given a due time (one index probe), or now.
    v_from := greatest(p_now, (SELECT max(b.due_tail) FROM cronbox.backfill b));
    WITH
    fire AS MATERIALIZED (
        SELECT f.backfill_id, f.fire_at, b.job_id, b.overlap, b.priority, j.bucket, j.queue,
               row_number() OVER (ORDER BY f.fire_at, f.backfill_id) AS n
        FROM unnest(p_fire_backfill, p_fire_at) AS f(backfill_id, fire_at)
        JOIN cronbox.backfill b ON b.backfill_id = f.backfill_id
        CROSS JOIN LATERAL (SELECT j.bucket, j.queue FROM cronbox.job j WHERE j.job_id = b.job_id LIMIT 1) j
    ),
    -- Fires the job's exclusion calendars exclude: the same predicate as regular fires.
    excl AS MATERIALIZED (
        SELECT p.job_id, x.fire_at
        FROM (SELECT fire.job_id, c.ids, array_agg(fire.fire_at ORDER BY fire.fire_at) AS fires
              FROM fire
              JOIN (SELECT jc.job_id, array_agg(jc.calendar_id) AS ids FROM cronbox.job_calendar jc
                    WHERE jc.job_id = ANY (ARRAY(SELECT DISTINCT fire.job_id FROM fire))
                    GROUP BY jc.job_id) c ON c.job_id = fire.job_id
              GROUP BY fire.job_id, c.ids) p
        CROSS JOIN LATERAL unnest(p.fires, cronbox.excluded_by(p.ids, p.fires)) AS x(fire_at, cal)
        WHERE x.cal IS NOT NULL
    ),
    -- Fires of these jobs that ran: one walk of each job's history since the first fire.
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
        -- and those in flight (a run is its outbox row until its final report)
        SELECT o.job_id, o.fire_at
        FROM cronbox.outbox o
        WHERE o.kind = 'run' AND o.job_id = ANY (ARRAY(SELECT DISTINCT fire.job_id FROM fire))
          AND o.fire_at >= (SELECT min(fire.fire_at) FROM fire)
          AND o.fire_at <= (SELECT max(fire.fire_at) FROM fire)
          AND o.origin IN ('schedule', 'retry', 'backfill')
    ),
    fresh AS (
        SELECT fire.*
        FROM fire
        WHERE NOT EXISTS (SELECT 1 FROM ran WHERE ran.job_id = fire.job_id AND ran.fire_at = fire.fire_at)
          AND NOT EXISTS (SELECT 1 FROM excl WHERE excl.job_id = fire.job_id AND excl.fire_at = fire.fire_at)
          AND NOT EXISTS (SELECT 1 FROM cronbox.job_future p
                          WHERE p.job_id = fire.job_id AND p.fire_at = fire.fire_at
                            AND p.origin IN ('schedule', 'retry', 'backfill'))
    ),
    inserted AS (
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, overlap, created_at, bucket, queue)
        SELECT fresh.job_id, fresh.fire_at, v_from + fresh.n * c_spacing, fresh.priority,
               'backfill', fresh.overlap, p_now, fresh.bucket, fresh.queue
        FROM fresh
        ORDER BY fresh.n
        ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
        RETURNING job_id, fire_at
    ),
    per_request AS (
        SELECT fire.backfill_id,
               count(*) FILTER (WHERE i.job_id IS NOT NULL) AS n_new,
               count(*) FILTER (WHERE i.job_id IS NULL AND e.job_id IS NULL) AS n_dup,
               count(e.job_id) AS n_excl
        FROM fire
        LEFT JOIN excl e ON e.job_id = fire.job_id AND e.fire_at = fire.fire_at
        -- two requests of one job covering the same fire in one pass: the first one made it
        LEFT JOIN (SELECT DISTINCT ON (i.job_id, i.fire_at) i.job_id, i.fire_at, fire.backfill_id
                   FROM inserted i JOIN fire ON fire.job_id = i.job_id AND fire.fire_at = i.fire_at
                   ORDER BY i.job_id, i.fire_at, fire.backfill_id) i
               ON i.job_id = fire.job_id AND i.fire_at = fire.fire_at AND i.backfill_id = fire.backfill_id
        GROUP BY fire.backfill_id
    ),
    progress AS (
    UPDATE cronbox.backfill b SET
        fires = b.fires + coalesce(c.n_new, 0),
        duplicates = b.duplicates + coalesce(c.n_dup, 0),
        excluded = b.excluded + coalesce(c.n_excl, 0),
        done_through = coalesce(a.done_through, b.done_through),
        due_tail = CASE WHEN coalesce(c.n_new, 0) > 0
                        THEN v_from + coalesce(cardinality(p_fire_at), 0) * c_spacing ELSE b.due_tail END,
        done_at = CASE WHEN a.done THEN p_now END,
        outcome = CASE WHEN a.done THEN
                      format('done: %s fire%s backfilled, %s already ran or pending%s%s',
                             b.fires + coalesce(c.n_new, 0),
                             CASE WHEN b.fires + coalesce(c.n_new, 0) = 1 THEN '' ELSE 's' END,
                             b.duplicates + coalesce(c.n_dup, 0),
                             CASE WHEN b.excluded + coalesce(c.n_excl, 0) > 0
                                  THEN format(', %s excluded by calendars', b.excluded + coalesce(c.n_excl, 0))
                                  ELSE '' END,
                             CASE WHEN a.note IS NOT NULL THEN '; ' || a.note ELSE '' END)
                  ELSE format('in progress: fires up to %s handled%s',
                              coalesce(a.done_through, b.done_through),
                              CASE WHEN a.note IS NOT NULL THEN '; ' || a.note ELSE '' END) END
    FROM unnest(p_backfill, p_done_through, p_done, p_note) AS a(backfill_id, done_through, done, note)
    LEFT JOIN per_request c ON c.backfill_id = a.backfill_id
    WHERE b.backfill_id = a.backfill_id
    )
    SELECT (SELECT count(*) FROM inserted),
           (SELECT count(*) FROM fire) - (SELECT count(*) FROM inserted) - (SELECT count(*) FROM excl)
      INTO v_futures, v_duplicates;

    IF v_futures > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN QUERY SELECT v_futures, v_duplicates;
END
$$;

COMMENT ON FUNCTION cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[]) with the time as p_now; tests use it to fix the clock. Poller: stores a backfill pass computed from cronbox.claim_backfills: fires as futures of origin backfill (due 0.5 ms apart in fire order from the later of now and the last backfilled fire''s due time: at most 2,000 per second), except those that already ran or are pending (counted as duplicates) and those its exclusion calendars exclude (counted as excluded); each request''s progress, done ones marked done. Returns (futures, duplicates).';

ALTER FUNCTION cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
