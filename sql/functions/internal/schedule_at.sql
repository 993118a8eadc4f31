-- Internal: the body of cronbox.schedule, with the time as its last parameter p_now. The public
-- cronbox.schedule passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.schedule_at(name, cron | every | at | after, options...): create or update a job.
-- Validates every argument before writing anything (cronbox.validate_schedule_args). The same
-- name again updates the definition in place under the job's row lock: pending scheduled
-- futures after p_now are deleted and the frontier is set so the poller recomputes them from
-- the new definition in its next pass; history and the change log are kept. An identical call
-- is a no-op (nothing written, no change-log row). Returns the job id. exclude: the job's links
-- to its calendars (cronbox.job_calendar) follow it; max_runs: a job that has made that many
-- scheduled fires is finished (fires this update drops no longer count). The options are those
-- of cronbox.schedule_options(): checked, compared and written from that declaration (the
-- INSERT/UPDATE are built from it with EXECUTE); only the timing columns are computed here.
CREATE OR REPLACE FUNCTION cronbox.schedule_at(
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
    max_runs        integer     DEFAULT NULL,
    exclude         text        DEFAULT NULL,
    needs           jsonb       DEFAULT NULL,
    on_unavailable  text        DEFAULT 'wait',
    unavailable_timeout interval DEFAULT NULL,
    notify          text[]      DEFAULT NULL,
    p_now           timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- The options as declared by cronbox.schedule_options(), keyed by name (plus the name):
    -- validated, compared, inserted and updated from here. A new option goes here and in the
    -- two signatures, nowhere else in this file.
    v_args jsonb := jsonb_build_object('name', schedule_at.name,
        'cron', schedule_at.cron, 'every', schedule_at.every, 'at', schedule_at.at,
        'payload', schedule_at.payload, 'queue', schedule_at.queue, 'timezone', schedule_at.timezone,
        'priority', schedule_at.priority, 'overlap', schedule_at.overlap, 'on_error', schedule_at.on_error,
        'max_attempts', schedule_at.max_attempts, 'retry_delay', schedule_at.retry_delay,
        'retry_max_delay', schedule_at.retry_max_delay, 'timeout', schedule_at.timeout,
        'catchup', schedule_at.catchup, 'catchup_window', schedule_at.catchup_window,
        'jitter', schedule_at.jitter, 'starts_at', schedule_at.starts_at, 'ends_at', schedule_at.ends_at,
        'after', schedule_at.after, 'every_mode', schedule_at.every_mode,
        'max_runs', schedule_at.max_runs, 'exclude', schedule_at.exclude,
        'needs', schedule_at.needs, 'on_unavailable', schedule_at.on_unavailable,
        'unavailable_timeout', schedule_at.unavailable_timeout, 'notify', schedule_at.notify);
    v_cols text;              -- the columns written: computed ones + every declared option
    v_vals text;              -- the same columns of the record $1 (v_new)
    v_kind text;
    v_cron text;
    v_new cronbox.job;        -- the definition asked for (timing columns computed below)
    v_old cronbox.job;
    v_old_fire cronbox.job_fire;  -- its saturation state (frontier, next fire, fires made)
    v_bucket integer;
    v_frontier timestamptz;   -- the new saturation state, written to cronbox.job_fire
    v_next_fire timestamptz;
    v_fires_made bigint;
    v_pending timestamptz;    -- fixed delay: the deleted pending fire, kept when `every` is unchanged
    v_job_id bigint;
    v_missing text;
    v_up_names text[];  -- (after) the upstreams found: names, ids, buckets
    v_up_ids bigint[];
    v_up_buckets integer[];
    v_cycle text;
    v_calendars bigint[];     -- exclude, resolved (cronbox.job_calendar)
    v_gone bigint := 0;       -- scheduled fires dropped by this update: no longer counted (max_runs)
    v_rate double precision;  -- its fire rate, counted against the owner's quota (NULL: no quota)
BEGIN
    PERFORM cronbox.validate_schedule_args(v_args);
    -- A queue with owner grants takes schedules of its grantees only (42501; docs/operations.md, "Tenants").
    PERFORM cronbox.assert_queue_owner(schedule_at.queue);
    IF length(schedule_at.reason) > 1000 THEN
        RAISE EXCEPTION 'reason: must be at most 1000 characters, got %', length(schedule_at.reason)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A one-off before the catch-up window would only ever be recorded as missed.
    IF schedule_at.at < p_now - schedule_at.catchup_window THEN
        RAISE EXCEPTION 'at: % is before the catch-up window (catchup_window %, from %): it would never fire',
            schedule_at.at, schedule_at.catchup_window, p_now - schedule_at.catchup_window
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_kind := CASE WHEN schedule_at.cron IS NOT NULL THEN 'cron'
                   WHEN schedule_at.every IS NOT NULL THEN 'every'
                   WHEN schedule_at.at IS NOT NULL THEN 'at'
                   ELSE 'after' END;
    IF v_kind = 'after' THEN
        -- Upstreams must exist (and be visible to the caller); serialise with add_dependency
        -- so two concurrent changes cannot close a cycle between them.
        PERFORM pg_advisory_xact_lock(hashtext('cronbox.dependencies'));
        -- each read in the bucket its name gives (one task per statement on Citus)
        SELECT coalesce(array_agg(u.name), '{}'), coalesce(array_agg(u.job_id), '{}'), coalesce(array_agg(u.bucket), '{}')
          INTO v_up_names, v_up_ids, v_up_buckets
        FROM cronbox.find_jobs_named(schedule_at.after) u;
        SELECT string_agg(quote_literal(u.name), ', ') INTO v_missing
        FROM unnest(schedule_at.after) AS u(name)
        WHERE NOT u.name = ANY (v_up_names);
        IF v_missing IS NOT NULL THEN
            RAISE EXCEPTION 'after: no schedule named %', v_missing
                USING ERRCODE = 'no_data_found';
        END IF;
    END IF;
    IF v_kind = 'cron' THEN
        v_cron := cronbox.normalize_cron(schedule_at.cron);
    END IF;

    -- the job's bucket (its name's): every statement on the job's rows in it (one task on Citus)
    v_bucket := cronbox.job_bucket(schedule_at.name);
    PERFORM cronbox.lock_job_named(schedule_at.name, v_bucket);  -- the job's lock, before its row lock
    SELECT * INTO v_old FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = schedule_at.name FOR UPDATE;
    SELECT * INTO v_old_fire FROM cronbox.job_fire f WHERE f.bucket = v_bucket AND f.job_id = v_old.job_id;

    -- Exclusion calendars: the schedule's owner's own (row security hides the others from a user).
    v_calendars := cronbox.resolve_calendars(schedule_at.exclude);
    SELECT string_agg(quote_literal(c.name), ', ') INTO v_missing
    FROM cronbox.calendar c
    WHERE c.calendar_id = ANY (v_calendars) AND c.owner <> coalesce(v_old.owner, cronbox.caller());
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'exclude: calendar % belongs to another role than the schedule''s owner %',
            v_missing, coalesce(v_old.owner, cronbox.caller()) USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- An identical call changes nothing (config-as-code may re-apply the same definition).
    IF v_old.job_id IS NOT NULL AND v_old.kind = v_kind
       AND jsonb_populate_record(v_old, v_args) IS NOT DISTINCT FROM v_old THEN
        RETURN v_old.job_id;
    END IF;

    -- The new definition may give the job (overlap, fixed delay) or the jobs it waits for
    -- (after) a policy that reads their statistics while deciding: those folded off the hot path
    -- are folded now, under the jobs' locks (cronbox.job_stat_folded).
    PERFORM cronbox.fold_job_stats_of(ARRAY[v_old.job_id], v_bucket);
    IF v_kind = 'after' THEN  -- its upstreams, in their buckets
        PERFORM cronbox.fold_job_stats_of(array_agg(u.job_id), u.bucket)
        FROM unnest(v_up_ids, v_up_buckets) AS u(job_id, bucket) GROUP BY u.bucket;
    END IF;
    -- The owner's quota (53400 when over), before anything is written; its fire rate is stored below.
    v_rate := cronbox.check_owner_quota(coalesce(v_old.owner, cronbox.caller()), v_old, v_args, v_kind, p_now);

    IF v_old.job_id IS NOT NULL THEN
        -- A finish the change log reads from the job's state (cronbox.job_finishes) is logged
        -- before the update may reopen the job or delete its pending fires.
        IF v_old.finished_at IS NOT NULL THEN
            PERFORM cronbox.record_finished(ARRAY[v_old.job_id], ARRAY[v_bucket]);
        END IF;
        -- Pending fires of the old definition go; the poller recomputes them. Fires already
        -- due (<= p_now) stay: they belonged to the old definition's past. Retries and manual
        -- runs are not the schedule's to drop.
        WITH gone AS (
            DELETE FROM cronbox.job_future f
            WHERE f.bucket = v_bucket AND f.job_id = v_old.job_id AND f.origin = 'schedule' AND f.attempt = 1
              AND f.fire_at > p_now
            RETURNING f.fire_at
        )
        SELECT min(g.fire_at), count(*) INTO v_pending, v_gone FROM gone g;
        -- Fires of the old definition already written by early dispatch, unclaimed: cancelled.
        v_gone := v_gone + cronbox.withdraw_early_runs(v_old.job_id, 'cancelled: schedule updated before its fire time', p_now,
                                                     v_bucket);
    END IF;

    -- Where saturation starts: the poller materialises fires strictly after the frontier.
    v_frontier := CASE
        WHEN v_kind = 'after' THEN NULL
        -- A one-off: consider its time unless it is the same time that was already handled
        -- (its fire decided: not one of the pending fires this update just dropped).
        WHEN v_kind = 'at' THEN
            CASE WHEN v_old.kind = 'at' AND v_old.at = schedule_at.at AND v_gone = 0 THEN v_old_fire.frontier
                 ELSE least(schedule_at.at, p_now) - interval '1 microsecond' END
        -- Fixed delay: the single next fire is the anchor itself.
        WHEN v_kind = 'every' AND schedule_at.every_mode = 'fixed_delay' THEN NULL
        -- A start in the future: nothing before it.
        WHEN schedule_at.starts_at > p_now THEN schedule_at.starts_at - interval '1 microsecond'
        -- An update never re-fires what was handled before p_now; fires the poller has not
        -- reached yet stay catch-up candidates under the new definition.
        WHEN v_old.kind IN ('cron', 'every') AND v_old.every_mode = 'fixed_rate'
             AND v_old_fire.frontier IS NOT NULL THEN least(v_old_fire.frontier, p_now)
        WHEN v_old.job_id IS NOT NULL THEN p_now
        -- A new job with a past start looks back at most catchup_window (older fires predate it).
        WHEN schedule_at.starts_at IS NOT NULL
            THEN greatest(schedule_at.starts_at, cronbox.catchup_start(p_now, schedule_at.catchup_window)) - interval '1 microsecond'
        ELSE p_now END;

    -- every: fixed rate fires at anchor + k*every; fixed delay's next fire is the anchor.
    IF v_kind = 'every' AND schedule_at.every_mode = 'fixed_rate' THEN
        v_new.anchor := CASE
            WHEN schedule_at.starts_at IS NOT NULL THEN schedule_at.starts_at
            WHEN v_old.kind = 'every' AND v_old.every_mode = 'fixed_rate'
                 AND v_old.every = schedule_at.every AND v_old.starts_at IS NULL THEN v_old.anchor
            ELSE date_trunc('second', p_now) + schedule_at.every END;
    ELSIF v_kind = 'every' THEN
        v_new.anchor := CASE
            WHEN schedule_at.starts_at >= p_now THEN schedule_at.starts_at
            WHEN schedule_at.starts_at IS NOT NULL
                 AND schedule_at.starts_at IS DISTINCT FROM v_old.starts_at THEN date_trunc('second', p_now)
            WHEN v_old.kind = 'every' AND v_old.every_mode = 'fixed_delay' AND v_old.every = schedule_at.every
                THEN coalesce(v_pending, v_old_fire.next_fire,
                              CASE WHEN (SELECT s.active_runs FROM cronbox.job_stat s
                                         WHERE s.bucket = v_bucket AND s.job_id = v_old.job_id) > 0 THEN NULL
                                   ELSE date_trunc('second', p_now) + schedule_at.every END)
            ELSE date_trunc('second', p_now) + schedule_at.every END;
        v_frontier := v_new.anchor - interval '1 microsecond';
    END IF;

    -- A lower bound of the first fire after the frontier (exact for at / fixed delay); the
    -- poller computes the exact one. NULL: nothing to materialise.
    v_next_fire := CASE
        WHEN v_kind = 'after' THEN NULL
        WHEN v_kind = 'at' THEN CASE WHEN schedule_at.at > v_frontier THEN schedule_at.at END
        WHEN v_kind = 'every' AND schedule_at.every_mode = 'fixed_delay' THEN v_new.anchor
        ELSE v_frontier END;
    IF v_next_fire > schedule_at.ends_at THEN
        v_next_fire := NULL;
    END IF;
    -- max_runs reached (fires dropped just now no longer count): nothing left to fire.
    v_fires_made := greatest(coalesce(v_old_fire.fires_made, 0) - v_gone, 0);
    IF v_fires_made >= schedule_at.max_runs THEN
        v_next_fire := NULL;
    END IF;
    -- Finished: nothing left to fire (a one-off already handled, ends_at passed, max_runs reached).
    v_new.finished_at := CASE
        WHEN v_fires_made >= schedule_at.max_runs THEN coalesce(v_old.finished_at, p_now)
        WHEN v_next_fire IS NULL AND (v_kind = 'at' OR v_frontier >= schedule_at.ends_at)
            THEN coalesce(v_old.finished_at, p_now) END;

    -- The row to write: the declared options as given, the computed columns beside them.
    v_new := jsonb_populate_record(v_new, v_args);
    v_new.kind := v_kind;
    v_new.cron_normalized := v_cron;
    v_new.updated_at := p_now;
    SELECT string_agg(quote_ident(c.col), ', '), string_agg('($1).' || quote_ident(c.col), ', ')
    INTO v_cols, v_vals
    FROM (SELECT unnest(ARRAY['kind', 'cron_normalized', 'anchor', 'finished_at', 'updated_at', 'excluded_run_id'])
          UNION ALL SELECT o.option FROM cronbox.schedule_options() o) AS c(col);
    IF v_old.job_id IS NULL THEN
        EXECUTE format('INSERT INTO cronbox.job AS j (name, bucket, created_at, %s) '
                       'VALUES (($1).name, $2, ($1).updated_at, %s) RETURNING j.job_id',
                       v_cols, v_vals)
            USING v_new, v_bucket INTO v_job_id;
        PERFORM cronbox.add_job_rows(ARRAY[v_job_id], v_bucket);  -- its saturation state, statistics, owner's count
        PERFORM cronbox.record_change(v_job_id, schedule_at.name, 'created',
                                      coalesce(schedule_at.reason, 'created'), p_now);
    ELSE
        v_job_id := v_old.job_id;
        EXECUTE format('UPDATE cronbox.job j SET (%s) = ROW(%s), '
                       'definition_version = j.definition_version + 1 WHERE j.bucket = $3 AND j.job_id = $2',
                       v_cols, v_vals)
            USING v_new, v_job_id, v_bucket;
        -- Moved to another queue: its futures left (retries, manual fires, fires already due)
        -- are dispatched in the new queue's share of a batch (cronbox.dispatch).
        UPDATE cronbox.job_future f SET queue = j.queue
        FROM cronbox.job j
        WHERE j.bucket = v_bucket AND j.job_id = v_job_id AND f.bucket = v_bucket AND f.job_id = v_job_id
          AND f.queue <> j.queue;
        -- its after-job edges (cronbox.job_after_edge) follow its after list
        IF v_old.after IS DISTINCT FROM v_new.after THEN
            PERFORM cronbox.sync_after_edges(ARRAY[v_job_id]);
        END IF;
        PERFORM cronbox.record_change(v_job_id, schedule_at.name, 'updated',
                                      coalesce(schedule_at.reason, 'updated'), p_now);
    END IF;
    -- The saturation state (its row made with the job, cronbox.add_job_rows).
    UPDATE cronbox.job_fire f
    SET frontier = v_frontier, next_fire = v_next_fire, fires_made = v_fires_made
    WHERE f.bucket = v_bucket AND f.job_id = v_job_id;
    -- The calendars the job honours (cronbox.store_fires reads these links). Key-share locked
    -- first: a drop_calendar that committed meanwhile is a clean P0002, not a foreign-key error.
    IF (SELECT count(*) FROM (SELECT 1 FROM cronbox.calendar c WHERE c.calendar_id = ANY (v_calendars)
                              FOR KEY SHARE) l) < cardinality(v_calendars) THEN
        RAISE EXCEPTION 'exclude: a calendar named in % was dropped meanwhile', quote_literal(schedule_at.exclude)
            USING ERRCODE = 'no_data_found';
    END IF;
    DELETE FROM cronbox.job_calendar jc WHERE jc.job_id = v_job_id AND NOT jc.calendar_id = ANY (v_calendars);
    INSERT INTO cronbox.job_calendar (job_id, calendar_id, bucket)
    SELECT v_job_id, c, v_bucket FROM unnest(v_calendars) AS c
    ON CONFLICT ON CONSTRAINT job_calendar_pkey DO NOTHING;
    IF v_kind = 'after' THEN
        -- A cycle can only close through existing jobs; the error aborts the whole statement.
        v_cycle := cronbox.find_dependency_cycle(v_job_id, v_up_ids);
        IF v_cycle IS NOT NULL THEN
            RAISE EXCEPTION 'after: % waiting for % would make a cycle: %', quote_literal(schedule_at.name),
                cronbox.clip_text(array_to_string(schedule_at.after, ', '), 300), v_cycle
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    PERFORM cronbox.note_fire_rate(v_job_id, coalesce(v_old.owner, cronbox.caller()), v_old.fire_rate, v_rate);
    PERFORM pg_notify('cronbox_schedule', v_job_id::text);
    RETURN v_job_id;
END
$$;

COMMENT ON FUNCTION cronbox.schedule_at(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[]) with the time as p_now; tests use it to fix the clock. Creates or updates (same name) a job; returns its id. Exactly one of cron, every, at, after. Every argument is validated before anything is written (SQLSTATE 22004/22023, message starting with the field name). An update deletes the pending scheduled futures and lets the poller recompute them in the same way, atomically; history and the change log (cronbox.schedule_changes) are kept. An identical call is a no-op. See docs/schedules.md.';

ALTER FUNCTION cronbox.schedule_at(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.schedule_at(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
