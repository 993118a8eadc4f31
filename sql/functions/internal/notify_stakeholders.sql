-- cronbox.notify_stakeholders(p_ids, p_bucket): each notification of cronbox.notifications among the
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
-- p_bucket: the notifications' bucket (a caller that knows it: quarantine); the outbox rows and
-- jobs are then read and written in that bucket only. NULL: every bucket (the other callers).
-- SECURITY INVOKER: it runs as its callers do (each a function of cronbox_owner or
-- cronbox_runner, a member of it): on Citus a transaction may not read, as another role, shard
-- placements it wrote (`cannot perform query on placements that were modified in this
-- transaction by a different user`), and its callers have just written the notifications.
CREATE OR REPLACE FUNCTION cronbox.notify_stakeholders(p_ids bigint[], p_bucket integer DEFAULT NULL) RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_set integer[] := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.outbox', p_bucket)));  -- the buckets read
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
    v_add jsonb;
    v_at jsonb;
    v_id bigint;
    v_due timestamptz;
BEGIN
    FOR v_note IN
        SELECT o.message, o.created_at FROM cronbox.outbox o
        WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (p_ids) AND o.kind = 'notification'
          AND o.queue = 'cronbox.notifications'
        ORDER BY o.outbox_id
    LOOP
        v_now := v_note.created_at;  -- the event's time (the database clock of its writer)
        v_event := v_note.message - 'idempotency_key';
        SELECT j.job_id, j.notify, j.bucket INTO v_job_id, v_notify, v_bucket
        FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.name = v_note.message ->> 'job';
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
                -- the count and the events (the latest 10) from the row, IMMUTABLE only; the rest
                -- computed before (Citus: no STABLE function of a column in an update)
                v_add := jsonb_build_array(v_event);
                v_at := to_jsonb(v_now);
                UPDATE cronbox.outbox o SET message = jsonb_set(jsonb_set(jsonb_set(o.message,
                           '{count}', (((o.message ->> 'count')::integer + 1)::text)::jsonb),
                           '{last_at}', v_at),
                           '{events}', CASE WHEN jsonb_array_length(coalesce(o.message -> 'events', '[]') || v_add) > 10
                                            THEN (coalesce(o.message -> 'events', '[]') || v_add) - 0
                                            ELSE coalesce(o.message -> 'events', '[]') || v_add END)
                WHERE o.bucket = ANY (v_set) AND o.outbox_id = v_digest.outbox_id AND o.queue = v_queue
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

COMMENT ON FUNCTION cronbox.notify_stakeholders(bigint[], integer) IS
'Internal: copies the notifications among these outbox rows to their jobs'' own recipients (job.notify) as outbox rows on cronbox.mail or cronbox.webhooks; within cronbox.notify_window() of the last message to a recipient, events fold into one digest with a count. p_bucket: the notifications'' bucket, whose rows alone are read and written (NULL: every bucket).';

ALTER FUNCTION cronbox.notify_stakeholders(bigint[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.notify_stakeholders(bigint[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
