-- cronbox.finished_reason(p_max_runs, p_fires_made, p_kind, p_ends_at): why a job has nothing left
-- to schedule, the reason of its 'finished' row in the change log (cronbox.record_finished,
-- cronbox.dispatch_plain). p_fires_made is read only where p_max_runs is set (NULL otherwise).
-- LANGUAGE sql, STABLE, no SET clause: inlined into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.finished_reason(p_max_runs integer, p_fires_made bigint, p_kind text,
                                                   p_ends_at timestamptz)
RETURNS text
LANGUAGE sql STABLE  -- as format(): IMMUTABLE over a STABLE call is never inlined
SECURITY INVOKER
AS $$
    SELECT CASE WHEN p_fires_made >= p_max_runs THEN format('max_runs reached: %s fires', p_max_runs)
                WHEN p_kind = 'at' THEN 'one-off fire handled'
                WHEN p_ends_at IS NOT NULL THEN 'ends_at passed'
                ELSE 'no fire left' END
$$;

COMMENT ON FUNCTION cronbox.finished_reason(integer, bigint, text, timestamp with time zone) IS
'Internal: the reason of a job''s ''finished'' change row (max_runs reached, one-off fire handled, ends_at passed, no fire left). Inlined.';

ALTER FUNCTION cronbox.finished_reason(integer, bigint, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.finished_reason(integer, bigint, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
