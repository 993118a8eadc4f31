-- cronbox.notify_stakeholders(p_ids): each notification of cronbox.notifications among the
-- outbox rows p_ids (run_failed, schedule_paused: on_error pause and quarantine,
-- dependency_timeout, unavailable) also goes to the job's own recipients (job.notify): one
-- outbox row per recipient, on the queue cronbox.mail (mailto:) or cronbox.webhooks
-- (http(s):), which the relay routes to its mail and webhook sinks (docs/relay.md), in the
-- job's bucket. No mail storm: per job and recipient, the first event of a window
-- (cronbox.notify_window()) is sent at once; the next ones are folded into one digest, due at
-- the window's end, whose `count` says how many events it stands for (`events` keeps the latest
-- 10). Called by the functions that insert such notifications, with the ids they inserted
-- (dispatch, the finishing calls, quarantine, redrive), after the inserting statement; not a
-- trigger on the outbox: Citus distributes no table with triggers (docs/citus.md). Locks the
-- job's digest rows (per recipient) and the pending message it folds into; a message a relay is
-- sending is left alone (a new digest follows).
CREATE OR REPLACE FUNCTION cronbox.notify_stakeholders(p_ids bigint[]) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_note record;
    v_job_id bigint;
    v_bucket integer;
    v_notify text[];
    v_to text;
    v_queue text;
    v_window interval := cronbox.notify_window();
    v_now timestamptz;
    v_digest cronbox.stakeholder_digest;
    v_event jsonb;
    v_id bigint;
    v_due timestamptz;
BEGIN
    FOR v_note IN
        SELECT o.message, o.created_at FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (p_ids) AND o.kind = 'notification' AND o.queue = 'cronbox.notifications'
        ORDER BY o.outbox_id
    LOOP
        v_now := v_note.created_at;  -- the event's time (the database clock of its writer)
        v_event := v_note.message - 'idempotency_key';
        SELECT j.job_id, j.notify, j.bucket INTO v_job_id, v_notify, v_bucket
        FROM cronbox.job j WHERE j.name = v_note.message ->> 'job';
        CONTINUE WHEN v_notify IS NULL;
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
            INSERT INTO cronbox.outbox (queue, kind, message, created_at, available_at, bucket)
            VALUES (v_queue, 'notification',
                    jsonb_build_object('event', v_note.message ->> 'event', 'job', v_note.message ->> 'job', 'to', v_to,
                                       'count', 1, 'first_at', v_now, 'last_at', v_now,
                                       'events', jsonb_build_array(v_event),
                                       'idempotency_key', format('notify:%s:%s:%s', v_job_id, md5(v_to),
                                                                 extract(epoch FROM v_due))),
                    v_now, v_due, v_bucket)
            RETURNING outbox_id INTO v_id;
            UPDATE cronbox.stakeholder_digest d SET window_start = v_due, outbox_id = v_id
            WHERE d.job_id = v_job_id AND d.recipient = v_to;
        END LOOP;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.notify_stakeholders(bigint[]) IS
'Internal: copies the notifications among these outbox rows to their jobs'' own recipients (job.notify) as outbox rows on cronbox.mail or cronbox.webhooks; within cronbox.notify_window() of the last message to a recipient, events fold into one digest with a count.';

ALTER FUNCTION cronbox.notify_stakeholders(bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.notify_stakeholders(bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
