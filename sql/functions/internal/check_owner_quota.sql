-- cronbox.check_owner_quota(p_owner, p_old, p_args, p_kind, p_now): schedule()'s quota check,
-- before it writes. Without a quota row for p_owner (cronbox.set_quota): NULL, nothing locked.
-- Otherwise locks the owner's cronbox.owner_quota row (FOR UPDATE: one schedule() of that owner
-- at a time decides, so two concurrent calls cannot both take the last slot) and refuses with
-- 53400 (configuration_limit_exceeded): a new schedule past max_schedules, a priority more
-- urgent (lower) than top_priority, a fire rate (cronbox.schedule_fire_rate) that would take the
-- owner's sum past max_fires_per_second (the job's old rate, p_old.fire_rate, no longer counts).
-- Returns the schedule's fire rate, which schedule() stores (cronbox.note_fire_rate).
CREATE OR REPLACE FUNCTION cronbox.check_owner_quota(
    p_owner name, p_old cronbox.job, p_args jsonb, p_kind text, p_now timestamptz
) RETURNS double precision
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_quota cronbox.owner_quota;
    v_rate double precision;
    v_priority integer := (p_args ->> 'priority')::integer;
BEGIN
    SELECT * INTO v_quota FROM cronbox.owner_quota q WHERE q.owner = p_owner FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_old.job_id IS NULL AND v_quota.schedules >= v_quota.max_schedules THEN
        RAISE EXCEPTION 'name: role % has % schedules, its quota (max_schedules) is %',
            quote_ident(p_owner), v_quota.schedules, v_quota.max_schedules
            USING ERRCODE = 'configuration_limit_exceeded',
                  HINT = 'unschedule some, or ask an administrator to raise it with cronbox.set_quota';
    END IF;
    IF v_priority < v_quota.top_priority THEN
        RAISE EXCEPTION 'priority: role % may use priorities from % (the most urgent, top_priority) to 32767, got %',
            quote_ident(p_owner), v_quota.top_priority, v_priority
            USING ERRCODE = 'configuration_limit_exceeded';
    END IF;
    v_rate := cronbox.schedule_fire_rate(p_kind, (p_args ->> 'every')::interval, p_args ->> 'cron',
                                         p_args ->> 'timezone', p_now);
    IF v_quota.fire_rate - coalesce(p_old.fire_rate, 0) + v_rate > v_quota.max_fires_per_second * (1 + 1e-9) THEN
        RAISE EXCEPTION '%: this schedule fires % times a second; with role %''s other schedules (% a second) that is past its quota (max_fires_per_second) of %',
            p_kind, round(v_rate::numeric, 4), quote_ident(p_owner),
            round((v_quota.fire_rate - coalesce(p_old.fire_rate, 0))::numeric, 4), v_quota.max_fires_per_second
            USING ERRCODE = 'configuration_limit_exceeded';
    END IF;
    RETURN v_rate;
END
$$;

COMMENT ON FUNCTION cronbox.check_owner_quota(name, cronbox.job, jsonb, text, timestamp with time zone) IS
'Internal: schedule()''s check of the owner''s quota (max_schedules, top_priority, max_fires_per_second) before writing; 53400 when over; returns the schedule''s fire rate (NULL: the owner has no quota).';

ALTER FUNCTION cronbox.check_owner_quota(name, cronbox.job, jsonb, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.check_owner_quota(name, cronbox.job, jsonb, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
