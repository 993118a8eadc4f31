-- Internal: the body of cronbox.release_holds, with the time as its last parameter p_now. The public
-- cronbox.release_holds passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.release_holds_at(p_limit, p_bucket, p_now): the backstop for held futures. Each hold carries a
-- time for a second look (hold_until: at most 30 s after it was set, a dependency's
-- wait_timeout sooner); this releases those due, so dispatch decides again (and a dependency
-- past its timeout fails). Precise wake-ups (a run finishing, an upstream succeeding,
-- resume) happen where those events are written; this bounds any miss. job_future_recheck_idx.
-- p_bucket: the held futures of that bucket only, the walk and the second look filtered on it
-- and the release (cronbox.release_futures(ids, buckets)); NULL: every bucket.
CREATE OR REPLACE FUNCTION cronbox.release_holds_at(
    p_limit integer DEFAULT 10000,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_set integer[];  -- the buckets walked; NULL: every bucket
    v_go bigint[];
    v_later bigint[];
BEGIN
    IF p_bucket IS NOT NULL THEN
        v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.job_future', p_bucket)));
    END IF;
    -- An overlap buffer (buffer_one / buffer_all) runs its fires one after the other: of a
    -- job's due overlap holds only the earliest may go (as a run's end releases it in
    -- finish_runs); the others would only be held again by dispatch, and released by the
    -- thousand (a buffered backfill) they would stand in dispatch's walk ahead of other jobs'
    -- due fires. They get their next look 30 s on instead.
    WITH due AS MATERIALIZED (
        SELECT h.future_id, h.job_id, h.hold, h.fire_at FROM cronbox.job_future h
        WHERE h.hold IS NOT NULL AND h.hold_until <= p_now AND (v_set IS NULL OR h.bucket = ANY (v_set))
        ORDER BY h.hold_until
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    ranked AS (
        SELECT d.future_id, d.hold = 'overlap' AND row_number() OVER (
                   PARTITION BY d.job_id, d.hold = 'overlap' ORDER BY d.fire_at, d.future_id) > 1 AS later
        FROM due d
    )
    SELECT array_agg(r.future_id) FILTER (WHERE NOT r.later), array_agg(r.future_id) FILTER (WHERE r.later)
    INTO v_go, v_later
    FROM ranked r;
    IF v_later IS NOT NULL THEN
        UPDATE cronbox.job_future f SET hold_until = p_now + interval '30 seconds'
        WHERE f.future_id = ANY (v_later) AND coalesce(f.hold, '') <> '' AND (v_set IS NULL OR f.bucket = ANY (v_set));
    END IF;
    RETURN cronbox.release_futures(v_go, v_set);
END
$$;

COMMENT ON FUNCTION cronbox.release_holds_at(integer, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.release_holds(integer, integer) with the time as p_now; tests use it to fix the clock. Poller backstop: releases held futures whose second-look time has come, so dispatch decides again. p_bucket: that bucket''s only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.release_holds_at(integer, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_holds_at(integer, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
