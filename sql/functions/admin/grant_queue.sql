-- cronbox.grant_queue(queue, role, kind): grants a queue to a role (administrators only).
-- kind 'owner' (default): the role (and its members) may schedule() and trigger() onto the
-- queue; once a queue has an owner grant, other cronbox_user roles may not (42501). kind
-- 'worker': the role may claim, start, heartbeat, complete and fail the queue's runs; once a
-- queue has a worker grant only its grantees may, and a worker role with grants works only
-- those queues (docs/operations.md, "Tenants"). Schedules already on the queue stay as they
-- are. Idempotent: returns false when the grant existed. Bounds: queue as schedule()'s; role an
-- existing role, not cronbox_* (22004/22023/P0002). Writes one cronbox.queue_grant row.
CREATE OR REPLACE FUNCTION cronbox.grant_queue(
    queue text,
    role text,
    kind text DEFAULT 'owner'
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role name;
    v_new boolean;
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.assert_queue_name('queue', grant_queue.queue);
    v_role := cronbox.assert_tenant_role('role', grant_queue.role);
    PERFORM cronbox.assert_one_of('kind', grant_queue.kind, ARRAY['owner', 'worker']);
    INSERT INTO cronbox.queue_grant (queue, grantee, kind, granted_by, granted_at)
    VALUES (grant_queue.queue, v_role, grant_queue.kind, cronbox.caller(), now())
    ON CONFLICT ON CONSTRAINT queue_grant_pkey DO NOTHING;
    GET DIAGNOSTICS v_new = ROW_COUNT;
    RETURN v_new;
EXCEPTION WHEN OTHERS THEN
    -- Re-raised from here so that psql shows the message and one CONTEXT line naming the
    -- function the user called, not the internal frames (docs/sql.md, "Errors").
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    v_hint := cronbox.error_hint(v_state, v_message, v_hint);  -- a known cause's way out, if it has none
    IF v_detail <> '' AND v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
    ELSIF v_detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    ELSIF v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
END
$$;

COMMENT ON FUNCTION cronbox.grant_queue(text, text, text) IS
'Administrators: grants a queue to a role. kind owner (default): the role may schedule and trigger onto it, and once a queue has owner grants nobody else may (42501). kind worker: the role may claim and report its runs; a queue with worker grants is worked by its grantees only, and a worker role with grants works only its queues. Returns false if it was granted already. See docs/operations.md, Tenants.';

ALTER FUNCTION cronbox.grant_queue(text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.grant_queue(text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.grant_queue(text, text, text) TO cronbox_admin;
