-- cronbox.notify_stakeholders(): a notification of cronbox.notifications (run_failed,
-- schedule_paused: on_error pause and quarantine, dependency_timeout, unavailable) also goes to
-- the job's own recipients (job.notify): one outbox row per recipient, on the queue
-- cronbox.mail (mailto:) or cronbox.webhooks (http(s):), which the relay routes to its mail and
-- webhook sinks (docs/relay.md). No mail storm: per job and recipient, the first event of a
-- window (cronbox.notify_window()) is sent at once; the next ones are folded into one digest,
-- due at the window's end, whose `count` says how many events it stands for (`events` keeps the
-- latest 10). Row trigger on cronbox.outbox, only for notification rows of that queue (its WHEN
-- clause: dispatch's run rows never call it). Locks the job's digest rows (per recipient) and
-- the pending message it folds into; a message a relay is sending is left alone (a new digest
-- follows). The trigger is (re)created here with its function.
CREATE OR REPLACE FUNCTION cronbox.notify_stakeholders() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job_id bigint;
    v_notify text[];
    v_to text;
    v_queue text;
    v_window interval := cronbox.notify_window();
    v_now timestamptz := NEW.created_at;  -- the event's time (the database clock of its writer)
    v_digest cronbox.stakeholder_digest;
    v_event jsonb := NEW.message - 'idempotency_key';
    v_id bigint;
    v_due timestamptz;
BEGIN
    SELECT j.job_id, j.notify INTO v_job_id, v_notify
    FROM cronbox.job j WHERE j.name = NEW.message ->> 'job';
    IF v_notify IS NULL THEN
        RETURN NULL;
    END IF;
    FOREACH v_to IN ARRAY v_notify LOOP
        v_queue := CASE WHEN v_to ILIKE 'mailto:%' THEN 'cronbox.mail' ELSE 'cronbox.webhooks' END;
        INSERT INTO cronbox.stakeholder_digest AS d (job_id, recipient, window_start, outbox_id)
        VALUES (v_job_id, v_to, '-infinity', 0)
        ON CONFLICT ON CONSTRAINT stakeholder_digest_pkey DO NOTHING;
        SELECT d.* INTO v_digest FROM cronbox.stakeholder_digest d
        WHERE d.job_id = v_job_id AND d.recipient = v_to FOR UPDATE;
        IF v_digest.window_start + v_window > v_now THEN
            -- within the window: fold into the pending message if no relay has it yet
            UPDATE cronbox.outbox o SET message = jsonb_set(jsonb_set(jsonb_set(o.message,
                       '{count}', to_jsonb((o.message ->> 'count')::integer + 1)),
                       '{last_at}', to_jsonb(v_now)),
                       '{events}', (SELECT coalesce(jsonb_agg(e.value ORDER BY e.n), '[]'::jsonb) FROM (
                           SELECT x.value, x.n FROM jsonb_array_elements(o.message -> 'events' || jsonb_build_array(v_event))
                               WITH ORDINALITY AS x(value, n)
                           ORDER BY x.n DESC LIMIT 10) e))
            WHERE o.outbox_id = v_digest.outbox_id AND o.queue = v_queue
              AND (o.lease_until IS NULL OR o.lease_until < v_now)
            RETURNING o.outbox_id INTO v_id;
            CONTINUE WHEN v_id IS NOT NULL;
            -- already sent (or being sent): a digest due at the end of the window
            v_due := v_digest.window_start + v_window;
        ELSE
            v_due := v_now;
        END IF;
        INSERT INTO cronbox.outbox (queue, kind, message, created_at, available_at)
        VALUES (v_queue, 'notification',
                jsonb_build_object('event', NEW.message ->> 'event', 'job', NEW.message ->> 'job', 'to', v_to,
                                   'count', 1, 'first_at', v_now, 'last_at', v_now,
                                   'events', jsonb_build_array(v_event),
                                   'idempotency_key', format('notify:%s:%s:%s', v_job_id, md5(v_to),
                                                             extract(epoch FROM v_due))),
                v_now, v_due)
        RETURNING outbox_id INTO v_id;
        UPDATE cronbox.stakeholder_digest d SET window_start = v_due, outbox_id = v_id
        WHERE d.job_id = v_job_id AND d.recipient = v_to;
    END LOOP;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION cronbox.notify_stakeholders() IS
'Internal (trigger): copies a job''s notification to its own recipients (job.notify) as outbox rows on cronbox.mail or cronbox.webhooks; within cronbox.notify_window() of the last message to a recipient, events fold into one digest with a count.';

ALTER FUNCTION cronbox.notify_stakeholders() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.notify_stakeholders() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;

CREATE OR REPLACE TRIGGER outbox_notify_stakeholders AFTER INSERT ON cronbox.outbox
    FOR EACH ROW WHEN (NEW.kind = 'notification' AND NEW.queue = 'cronbox.notifications')
    EXECUTE FUNCTION cronbox.notify_stakeholders();
