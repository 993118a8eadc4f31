-- cronbox.revoke_queue(queue, role, kind): takes back a grant of cronbox.grant_queue
-- (administrators only). A queue whose last grant of a kind goes is open again for that kind;
-- a worker role whose last grant goes is no longer limited. Schedules already on the queue stay.
-- Returns false when there was no such grant. Bounds as grant_queue (a dropped role's grant
-- can be revoked by its name). Deletes at most one cronbox.queue_grant row.
CREATE OR REPLACE FUNCTION cronbox.revoke_queue(
    queue text,
    role text,
    kind text DEFAULT 'owner'
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_gone boolean;
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.assert_queue_name('queue', revoke_queue.queue);
    PERFORM cronbox.assert_not_null('role', revoke_queue.role);
    IF length(revoke_queue.role) NOT BETWEEN 1 AND 63 THEN
        RAISE EXCEPTION 'role: must be a role name of 1 to 63 characters, got % characters', length(revoke_queue.role)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_one_of('kind', revoke_queue.kind, ARRAY['owner', 'worker']);
    DELETE FROM cronbox.queue_grant g
    WHERE g.kind = revoke_queue.kind AND g.queue = revoke_queue.queue AND g.grantee = revoke_queue.role;
    GET DIAGNOSTICS v_gone = ROW_COUNT;
    RETURN v_gone;
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

COMMENT ON FUNCTION cronbox.revoke_queue(text, text, text) IS
'Administrators: takes back a queue grant (kind owner or worker). A queue without grants of a kind is open again for it. Returns false if there was no such grant.';

ALTER FUNCTION cronbox.revoke_queue(text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.revoke_queue(text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.revoke_queue(text, text, text) TO cronbox_admin;
