-- cronbox.manual_fire_due(p_owner, p_now): when a manual fire (trigger) of p_owner's may go. An
-- owner without max_fires_per_second: p_now (nothing locked). Otherwise a token bucket on the
-- owner's cronbox.owner_quota row (locked FOR NO KEY UPDATE until commit: one trigger of that
-- owner at a time): up to one second's worth of fires go at once, the next ones are spaced
-- 1/max_fires_per_second apart and wait for their time in job_future (the poller dispatches
-- them then), however many are asked for.
CREATE OR REPLACE FUNCTION cronbox.manual_fire_due(p_owner name, p_now timestamptz) RETURNS timestamptz
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_slot timestamptz;
    v_step interval;
BEGIN
    SELECT greatest(coalesce(q.manual_slot, p_now - interval '1 second'), p_now - interval '1 second'),
           make_interval(secs => 1.0 / q.max_fires_per_second)
      INTO v_slot, v_step
    FROM cronbox.owner_quota q
    WHERE q.owner = p_owner AND q.max_fires_per_second IS NOT NULL
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN p_now;
    END IF;
    UPDATE cronbox.owner_quota q SET manual_slot = v_slot + v_step WHERE q.owner = p_owner;
    RETURN greatest(v_slot + v_step, p_now);
END
$$;

COMMENT ON FUNCTION cronbox.manual_fire_due(name, timestamp with time zone) IS
'Internal: the due time of an owner''s manual fire under its max_fires_per_second (a token bucket: a second''s worth at once, then spaced); p_now without that quota.';

ALTER FUNCTION cronbox.manual_fire_due(name, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.manual_fire_due(name, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
