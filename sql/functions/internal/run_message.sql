-- cronbox.run_message(...): the message a worker receives for a run, built in one place for
-- cronbox.dispatch and cronbox.dispatch_ahead (the relay adds `deadline` when it claims it).
-- LANGUAGE sql, STABLE (jsonb renders the timestamptz) and without SET clauses, so that it is
-- inlined into the INSERT that calls it (no function call per row); every name in it is
-- schema-qualified.
CREATE OR REPLACE FUNCTION cronbox.run_message(
    p_run_id bigint,
    p_job text,
    p_queue text,
    p_payload jsonb,
    p_fire_at timestamptz,
    p_attempt integer
) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
SECURITY INVOKER
AS $$
    SELECT pg_catalog.jsonb_build_object(
        'run_id', p_run_id, 'job', p_job, 'queue', p_queue, 'payload', p_payload,
        'fire_at', p_fire_at, 'attempt', p_attempt,
        'idempotency_key', pg_catalog.textcat(pg_catalog.textcat(p_run_id::text, ':'), p_attempt::text))
$$;

COMMENT ON FUNCTION cronbox.run_message(bigint,text,text,jsonb,timestamp with time zone,integer) IS
'Internal: the JSON message of a run (run_id, job, queue, payload, fire_at, attempt, idempotency_key = run_id:attempt).';

ALTER FUNCTION cronbox.run_message(bigint,text,text,jsonb,timestamp with time zone,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.run_message(bigint,text,text,jsonb,timestamp with time zone,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
