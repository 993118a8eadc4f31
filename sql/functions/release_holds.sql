-- cronbox.release_holds(p_limit, p_now): the backstop for held futures. Each hold carries a
-- time for a second look (hold_until: at most 30 s after it was set, a dependency's
-- wait_timeout sooner); this releases those due, so dispatch decides again (and a dependency
-- past its timeout fails). Precise wake-ups (a run finishing, an upstream succeeding,
-- resume) happen where those events are written; this bounds any miss. job_future_recheck_idx.
CREATE OR REPLACE FUNCTION cronbox.release_holds(
    p_limit integer DEFAULT 10000,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_n integer;
BEGIN
    UPDATE cronbox.job_future f SET hold = NULL, hold_queue = NULL, hold_until = NULL
    WHERE f.future_id IN (
        SELECT h.future_id FROM cronbox.job_future h
        WHERE h.hold IS NOT NULL AND h.hold_until <= p_now
        ORDER BY h.hold_until
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.release_holds(integer, timestamptz) IS
'Poller backstop: releases held futures whose second-look time has come, so dispatch decides again. Returns the count.';
