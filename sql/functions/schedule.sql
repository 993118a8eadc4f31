-- cronbox.schedule(name, cron | every | at | after, options...): create or update a job.
-- Validates everything before writing; the same name again updates the definition in place
-- (row lock on the job), deletes its pending scheduled futures after p_now and rewinds the
-- frontier so the poller recomputes them, keeping history. Records the change in job_change.
-- Idempotent for identical calls apart from the change log. Returns the job id.
CREATE OR REPLACE FUNCTION cronbox.schedule(
    name            text,
    cron            text        DEFAULT NULL,
    every           interval    DEFAULT NULL,
    at              timestamptz DEFAULT NULL,
    payload         jsonb       DEFAULT '{}',
    queue           text        DEFAULT 'default',
    timezone        text        DEFAULT 'UTC',
    priority        integer     DEFAULT 0,
    overlap         text        DEFAULT 'skip',
    on_error        text        DEFAULT 'retry_schedule',
    max_attempts    integer     DEFAULT 1,
    retry_delay     interval    DEFAULT '10 seconds',
    retry_max_delay interval    DEFAULT '1 hour',
    timeout         interval    DEFAULT '5 minutes',
    catchup         text        DEFAULT 'latest',
    catchup_window  interval    DEFAULT '1 day',
    jitter          interval    DEFAULT '0',
    starts_at       timestamptz DEFAULT NULL,
    ends_at         timestamptz DEFAULT NULL,
    after           text[]      DEFAULT NULL,
    every_mode      text        DEFAULT 'fixed_rate',
    reason          text        DEFAULT NULL,
    p_now           timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_kind text;
    v_cron_normalized text;
    v_anchor timestamptz;
    v_frontier timestamptz;
    v_next_fire timestamptz;
    v_job_id bigint;
    v_old cronbox.job;
BEGIN
    PERFORM cronbox.validate_schedule_args(
        schedule.name, schedule.cron, schedule.every, schedule.at, schedule.payload,
        schedule.queue, schedule.timezone, schedule.priority, schedule.overlap,
        schedule.on_error, schedule.max_attempts, schedule.retry_delay,
        schedule.retry_max_delay, schedule.timeout, schedule.catchup,
        schedule.catchup_window, schedule.jitter, schedule.starts_at, schedule.ends_at,
        schedule.after, schedule.every_mode);

    v_kind := CASE WHEN schedule.cron IS NOT NULL THEN 'cron'
                   WHEN schedule.every IS NOT NULL THEN 'every'
                   WHEN schedule.at IS NOT NULL THEN 'at'
                   ELSE 'after' END;
    IF v_kind = 'cron' THEN
        v_cron_normalized := cronbox.normalize_cron(schedule.cron);
    END IF;

    SELECT * INTO v_old FROM cronbox.job j WHERE j.name = schedule.name FOR UPDATE;

    -- Where saturation starts: fires strictly after the frontier. An update never re-fires
    -- what was already materialised before p_now, and never skips fires the poller has not
    -- reached yet (those become catch-up candidates).
    v_frontier := CASE
        WHEN schedule.starts_at IS NOT NULL AND schedule.starts_at > p_now
            THEN schedule.starts_at - interval '1 microsecond'
        WHEN v_old.job_id IS NOT NULL
            THEN least(coalesce(v_old.frontier, p_now), p_now)
        WHEN schedule.starts_at IS NOT NULL
            THEN schedule.starts_at - interval '1 microsecond'
        ELSE p_now END;
    v_anchor := CASE WHEN v_kind = 'every'
                     THEN coalesce(schedule.starts_at, coalesce(v_old.anchor, p_now) + schedule.every) END;
    -- A lower bound of the first fire; the poller computes the exact one.
    v_next_fire := CASE v_kind
        WHEN 'at' THEN schedule.at
        WHEN 'after' THEN NULL
        ELSE v_frontier END;

    IF v_old.job_id IS NULL THEN
        INSERT INTO cronbox.job AS j (
            name, kind, cron, cron_normalized, every, every_mode, anchor, at, after, timezone,
            payload, queue, priority, overlap, on_error, max_attempts, retry_delay,
            retry_max_delay, timeout, catchup, catchup_window, jitter, starts_at, ends_at,
            frontier, next_fire, created_at, updated_at)
        VALUES (
            schedule.name, v_kind, schedule.cron, v_cron_normalized, schedule.every,
            schedule.every_mode, v_anchor, schedule.at, schedule.after, schedule.timezone,
            schedule.payload, schedule.queue, schedule.priority, schedule.overlap,
            schedule.on_error, schedule.max_attempts, schedule.retry_delay,
            schedule.retry_max_delay, schedule.timeout, schedule.catchup,
            schedule.catchup_window, schedule.jitter, schedule.starts_at, schedule.ends_at,
            v_frontier, v_next_fire, p_now, p_now)
        RETURNING j.job_id INTO v_job_id;
        PERFORM cronbox.record_change(v_job_id, schedule.name, 'created',
                                      coalesce(reason, 'created'), p_now);
    ELSE
        v_job_id := v_old.job_id;
        DELETE FROM cronbox.job_future f
        WHERE f.job_id = v_job_id AND f.origin = 'schedule' AND f.fire_at > p_now;
        UPDATE cronbox.job j SET
            kind = v_kind, cron = schedule.cron, cron_normalized = v_cron_normalized,
            every = schedule.every, every_mode = schedule.every_mode, anchor = v_anchor,
            at = schedule.at, after = schedule.after, timezone = schedule.timezone,
            payload = schedule.payload, queue = schedule.queue, priority = schedule.priority,
            overlap = schedule.overlap, on_error = schedule.on_error,
            max_attempts = schedule.max_attempts, retry_delay = schedule.retry_delay,
            retry_max_delay = schedule.retry_max_delay, timeout = schedule.timeout,
            catchup = schedule.catchup, catchup_window = schedule.catchup_window,
            jitter = schedule.jitter, starts_at = schedule.starts_at, ends_at = schedule.ends_at,
            frontier = v_frontier,
            next_fire = CASE WHEN v_kind = 'at' AND schedule.at <= v_frontier THEN NULL ELSE v_next_fire END,
            finished_at = NULL,
            definition_version = j.definition_version + 1,
            updated_at = p_now
        WHERE j.job_id = v_job_id;
        PERFORM cronbox.record_change(v_job_id, schedule.name, 'updated',
                                      coalesce(reason, 'updated'), p_now);
    END IF;
    PERFORM pg_notify('cronbox_schedule', v_job_id::text);
    RETURN v_job_id;
END
$$;

COMMENT ON FUNCTION cronbox.schedule(text, text, interval, timestamptz, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamptz, timestamptz, text[], text, text, timestamptz) IS
'Creates or updates (same name) a job. Exactly one of cron, every, at, after. Validates every argument before writing (SQLSTATE 22023/22004 naming the field). An update recomputes pending futures atomically and keeps history. Returns the job id.';
