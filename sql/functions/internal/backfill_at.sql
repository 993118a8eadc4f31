-- Internal: the body of cronbox.backfill, with the time as its last parameter p_now. The public
-- cronbox.backfill passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.backfill_at(name, from, to, overlap, priority, p_now): validates, then under the
-- job's row lock (lock_job: row security makes another owner's job P0002) records a backfill
-- request and a 'backfill' change-log row. The poller materialises the fires
-- (cronbox.claim_backfills, cronbox.store_backfill). Every and one-off jobs: the fire count is
-- arithmetic here (at most 1000, at least 1); cron jobs: the range bound holds here and the
-- poller stops at 1000 fires. Returns the request id.
CREATE OR REPLACE FUNCTION cronbox.backfill_at(
    name     text,
    "from"   timestamptz,
    "to"     timestamptz,
    overlap  text DEFAULT 'buffer_all',
    priority integer DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_max constant integer := 1000;  -- fires per request (docs/schedules.md, "Backfill")
    v_job cronbox.job;
    v_lo timestamptz;
    v_hi timestamptz;
    v_count numeric;
    v_id bigint;
BEGIN
    PERFORM cronbox.assert_job_name('name', backfill_at.name);
    PERFORM cronbox.assert_not_null('from', backfill_at."from");
    PERFORM cronbox.assert_not_null('to', backfill_at."to");
    IF NOT isfinite(backfill_at."from") THEN
        RAISE EXCEPTION 'from: must be a finite time, got %', backfill_at."from" USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT isfinite(backfill_at."to") OR backfill_at."to" > p_now THEN
        RAISE EXCEPTION 'to: must be a finite time not after now (%), got %', p_now, backfill_at."to"
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF backfill_at."from" >= backfill_at."to" THEN
        RAISE EXCEPTION 'from: must be before to, got % and %', backfill_at."from", backfill_at."to"
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF backfill_at."to" - backfill_at."from" > interval '366 days' THEN
        RAISE EXCEPTION 'from: the range from .. to must be at most 366 days, got %',
            backfill_at."to" - backfill_at."from" USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_one_of('overlap', backfill_at.overlap,
                                  ARRAY['skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other']);
    IF backfill_at.priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority: must be between -32768 and 32767, got %', backfill_at.priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_job := cronbox.lock_job(backfill_at.name);
    -- Tenants (docs/operations.md): the queue's owner grants, and the owner's most urgent priority.
    PERFORM cronbox.assert_queue_owner(v_job.queue);
    IF backfill_at.priority < (SELECT q.top_priority FROM cronbox.owner_quota q WHERE q.owner = v_job.owner) THEN
        RAISE EXCEPTION 'priority: role % may use priorities from % (the most urgent, top_priority) to 32767, got %',
            quote_ident(v_job.owner), (SELECT q.top_priority FROM cronbox.owner_quota q WHERE q.owner = v_job.owner),
            backfill_at.priority USING ERRCODE = 'configuration_limit_exceeded';
    END IF;
    IF v_job.kind = 'after' OR (v_job.kind = 'every' AND v_job.every_mode = 'fixed_delay') THEN
        RAISE EXCEPTION 'name: % has no fixed fire times to backfill (%)', quote_literal(v_job.name),
            CASE WHEN v_job.kind = 'after' THEN 'fired by its upstream jobs' ELSE 'fixed delay' END
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- The fires the poller would make: never before starts_at nor after ends_at.
    v_lo := greatest(backfill_at."from", v_job.starts_at);
    v_hi := least(backfill_at."to", v_job.ends_at);
    IF v_job.kind = 'every' THEN
        v_count := CASE WHEN v_hi < v_lo OR v_hi < v_job.anchor THEN 0 ELSE
            floor(extract(epoch FROM v_hi - v_job.anchor) / extract(epoch FROM v_job.every))
            - greatest(0, ceil(extract(epoch FROM v_lo - v_job.anchor) / extract(epoch FROM v_job.every))) + 1 END;
    ELSIF v_job.kind = 'at' THEN
        v_count := CASE WHEN v_job.at BETWEEN v_lo AND v_hi THEN 1 ELSE 0 END;
    END IF;
    IF v_count > c_max THEN
        RAISE EXCEPTION 'from: the range holds % fires of %, at most % may be backfilled at once',
            v_count, quote_literal(v_job.name), c_max USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_count <= 0 THEN
        RAISE EXCEPTION 'from: no scheduled time of % falls between % and %', quote_literal(v_job.name),
            backfill_at."from", backfill_at."to" USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO cronbox.backfill (job_id, from_at, to_at, overlap, priority, requested_by, requested_at, bucket)
    VALUES (v_job.job_id, backfill_at."from", backfill_at."to", backfill_at.overlap,
            coalesce(backfill_at.priority, v_job.priority), cronbox.caller(), p_now, v_job.bucket)
    RETURNING backfill_id INTO v_id;
    PERFORM cronbox.record_change(v_job.job_id, v_job.name, 'backfill',
        format('backfill %s: fires from %s to %s%s, overlap %s, priority %s', v_id,
               backfill_at."from", backfill_at."to",
               CASE WHEN v_count IS NOT NULL THEN ' (' || v_count || ' fire' || CASE WHEN v_count = 1 THEN ')' ELSE 's)' END ELSE '' END,
               backfill_at.overlap, coalesce(backfill_at.priority, v_job.priority)), p_now);
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION cronbox.backfill_at(text, timestamp with time zone, timestamp with time zone, text, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.backfill(text, timestamp with time zone, timestamp with time zone, text, integer) with the time as p_now; tests use it to fix the clock. Fires each scheduled time of a job from "from" to "to" (both included; finite, from < to <= now(), at most 366 days apart; every/at jobs at most 1000 fires, cron jobs the first 1000), outside the catch-up policy. Records a request and a change-log row; the poller materialises the fires. Returns the request id.';

ALTER FUNCTION cronbox.backfill_at(text, timestamp with time zone, timestamp with time zone, text, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.backfill_at(text, timestamp with time zone, timestamp with time zone, text, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
