-- Internal: the body of cronbox.next_fires, with the time as its last parameter p_now. The
-- public cronbox.next_fires passes now(); no cronbox role may execute this one.
-- cronbox.next_fires_at(name, n, p_now): the next n fires of an existing schedule: first its
-- pending scheduled futures (already stored by the poller, exclusions applied), then the fires
-- the poller will store after its frontier, computed by cronbox.plan_fires (the same fire
-- engine as preview, the same exclusion predicate as cronbox.store_fires), within starts_at /
-- ends_at and the fires max_runs still allows. A job paused until a time (pause(..., until =>))
-- shows the fires it will make once the poller resumes it from that time (cronbox.resume_at);
-- none while paused without an end, none for an `after` job; a fixed-delay job shows its one
-- known next fire. n is 1..1000; at most 10 years ahead. Reads under the caller's row
-- security; writes nothing, takes no lock.
CREATE OR REPLACE FUNCTION cronbox.next_fires_at(
    name  text,
    n     integer     DEFAULT 10,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (fire_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_pending timestamptz[];
    v_left integer;
    v_after timestamptz;
    v_resume timestamptz;  -- paused until a time: fires from that time on, as resume_at makes them
    v_fire cronbox.job_fire;  -- its saturation state
BEGIN
    PERFORM cronbox.assert_job_name('name', next_fires_at.name);
    PERFORM cronbox.checked_limit('n', next_fires_at.n, 1000);
    SELECT * INTO v_job FROM cronbox.job j WHERE j.name = next_fires_at.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'name: no schedule named %', quote_literal(next_fires_at.name) USING ERRCODE = 'no_data_found';
    END IF;
    SELECT * INTO v_fire FROM cronbox.job_fire f WHERE f.job_id = v_job.job_id;
    IF (v_job.paused AND v_job.paused_until IS NULL) OR v_job.kind = 'after' THEN
        RETURN;
    END IF;
    IF v_job.paused THEN
        -- pause() deleted the pending scheduled futures; resume_at continues from paused_until
        -- (a fire exactly then runs)
        v_resume := v_job.paused_until - interval '1 microsecond';
        v_pending := '{}';
    ELSE
        v_pending := ARRAY(
            SELECT f.fire_at FROM cronbox.job_future f
            WHERE f.job_id = v_job.job_id AND f.origin = 'schedule' AND f.attempt = 1
            ORDER BY f.fire_at LIMIT next_fires_at.n);
    END IF;
    RETURN QUERY SELECT unnest(v_pending);
    v_left := next_fires_at.n - cardinality(v_pending);
    IF v_job.max_runs IS NOT NULL THEN
        v_left := least(v_left, v_job.max_runs - v_fire.fires_made);
    END IF;
    IF v_left < 1 OR v_job.finished_at IS NOT NULL THEN
        RETURN;
    END IF;
    IF v_job.kind = 'every' AND v_job.every_mode = 'fixed_delay' THEN
        IF v_resume IS NOT NULL THEN
            -- resume_at anchors a fixed-delay job one interval after the pause's end
            RETURN QUERY SELECT greatest(date_trunc('second', v_job.paused_until) + v_job.every, v_job.starts_at);
        ELSIF cardinality(v_pending) = 0 AND v_fire.next_fire IS NOT NULL THEN
            RETURN QUERY SELECT v_fire.next_fire;
        END IF;
        RETURN;
    END IF;
    v_after := greatest(coalesce(v_fire.frontier, p_now), p_now, v_pending[cardinality(v_pending)], v_resume);
    RETURN QUERY
    SELECT f.t FROM cronbox.plan_fires(
        v_job.kind, v_job.cron_normalized, v_job.timezone, v_job.every, v_job.anchor, v_job.at,
        v_job.starts_at, v_job.ends_at, v_after,
        ARRAY(SELECT jc.calendar_id FROM cronbox.job_calendar jc WHERE jc.job_id = v_job.job_id),
        v_left, p_now + interval '10 years') AS f(t);
END
$$;

COMMENT ON FUNCTION cronbox.next_fires_at(text, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.next_fires(text, integer) with the time as p_now. The next n fires of an existing schedule: its pending futures, then the fires the poller will store (same engine as preview, same exclusion predicate as store_fires), within its window and max_runs; while paused until a time, the fires from that time on; none while paused without an end.';

ALTER FUNCTION cronbox.next_fires_at(text, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.next_fires_at(text, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
