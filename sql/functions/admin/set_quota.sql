-- cronbox.set_quota(owner, max_schedules, max_fires_per_second, top_priority): an owner role's
-- quota (administrators only); NULL = no limit for that item, all three NULL removes the quota.
-- max_schedules 0..10,000,000: schedule() refuses a new schedule past it; max_fires_per_second
-- more than 0, at most 100,000: the sum of its schedules' fire rates (cronbox.schedule_fire_rate)
-- may not pass it (schedule() refuses), and its manual fires (trigger) past that rate wait for
-- their turn; top_priority -32,768..32,767: the most urgent (lowest) priority its schedules may
-- have. Refusals are 53400. Schedules that exist already are kept even if they exceed a new
-- quota. Locks the owner's cronbox.owner_quota row; a new quota counts the owner's schedules and
-- computes their fire rates once. Returns the owner's schedules counted.
CREATE OR REPLACE FUNCTION cronbox.set_quota(
    owner text,
    max_schedules integer DEFAULT NULL,
    max_fires_per_second numeric DEFAULT NULL,
    top_priority integer DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner name;
    v_count integer;
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    v_owner := cronbox.assert_tenant_role('owner', set_quota.owner);
    IF set_quota.max_schedules NOT BETWEEN 0 AND 10000000 THEN
        RAISE EXCEPTION 'max_schedules: must be 0 to 10000000 (NULL: no limit), got %', set_quota.max_schedules
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_quota.max_fires_per_second = 'NaN' OR set_quota.max_fires_per_second <= 0
       OR set_quota.max_fires_per_second > 100000 THEN
        RAISE EXCEPTION 'max_fires_per_second: must be more than 0 and at most 100000 (NULL: no limit), got %',
            set_quota.max_fires_per_second USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_quota.top_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'top_priority: must be -32768 to 32767 (NULL: no limit), got %', set_quota.top_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_quota.max_schedules IS NULL AND set_quota.max_fires_per_second IS NULL AND set_quota.top_priority IS NULL THEN
        DELETE FROM cronbox.owner_quota q WHERE q.owner = v_owner;
        SELECT count(*) INTO v_count FROM cronbox.job j WHERE j.owner = v_owner;
        RETURN v_count;
    END IF;
    UPDATE cronbox.owner_quota q SET
        max_schedules = set_quota.max_schedules,
        max_fires_per_second = set_quota.max_fires_per_second,
        top_priority = set_quota.top_priority,
        updated_by = cronbox.caller(), updated_at = now()
    WHERE q.owner = v_owner
    RETURNING q.schedules INTO v_count;
    IF FOUND THEN
        RETURN v_count;
    END IF;
    -- A new quota: the owner's use, counted once; from now on schedule() and the job triggers
    -- keep it (concurrent schedule() calls of this owner wait for this row).
    INSERT INTO cronbox.owner_quota (owner, max_schedules, max_fires_per_second, top_priority,
                                     updated_by, updated_at)
    VALUES (v_owner, set_quota.max_schedules, set_quota.max_fires_per_second, set_quota.top_priority,
            cronbox.caller(), now());
    PERFORM 1 FROM cronbox.owner_quota q WHERE q.owner = v_owner FOR UPDATE;
    UPDATE cronbox.job j SET fire_rate = cronbox.schedule_fire_rate(j.kind, j.every, j.cron, j.timezone, now())
    WHERE j.owner = v_owner;
    UPDATE cronbox.owner_quota q SET (schedules, fire_rate) = (
        SELECT count(*), coalesce(sum(j.fire_rate), 0) FROM cronbox.job j WHERE j.owner = v_owner)
    WHERE q.owner = v_owner
    RETURNING q.schedules INTO v_count;
    RETURN v_count;
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

COMMENT ON FUNCTION cronbox.set_quota(text, integer, numeric, integer) IS
'Administrators: the quota of an owner role (NULL: no limit; all NULL removes it). max_schedules (0..10000000): most schedules; max_fires_per_second (0..100000]: most fires per second summed over its schedules (schedule() refuses past it; manual fires past it wait their turn); top_priority (-32768..32767): the most urgent priority allowed. Over quota: 53400. Existing schedules are kept. Returns the owner''s schedules. See docs/operations.md, Tenants.';

ALTER FUNCTION cronbox.set_quota(text, integer, numeric, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.set_quota(text, integer, numeric, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.set_quota(text, integer, numeric, integer) TO cronbox_admin;
