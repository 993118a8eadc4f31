-- cronbox.early_candidates(p_lead, p_now, p_limit): the ready futures early dispatch may take
-- (cronbox.dispatch_ahead_at), lowest priority first and in due order within a priority, up to
-- p_limit per priority (NULL: no limit, for a caller whose own LIMIT stops the walk after a
-- filter, such as passing over jobs locked elsewhere): scheduled fires due in (p_now, p_now + p_lead] of unpaused jobs with
-- overlap 'allow', no upstream dependency and a queue without a limit. The job's eligibility is
-- a scalar sub-SELECT per future, never a join: the walk stays on job_future_ready_idx in due
-- order and stops when the caller has enough, whatever the row estimates (a join let the
-- planner start from cronbox.job and sort every future of a burst inside the lead: ~1 s per
-- call for 200,000 of them, bench.scale --burst). No locks. LANGUAGE sql, STABLE, no SET
-- clause: inlined into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.early_candidates(p_lead interval, p_now timestamptz, p_limit integer)
RETURNS TABLE (future_id bigint, job_id bigint)
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    SELECT x.future_id, x.job_id
    FROM cronbox.ready_priorities() AS prio(p)
    CROSS JOIN LATERAL (
        SELECT f.future_id, f.job_id
        FROM cronbox.job_future f
        WHERE f.hold IS NULL AND f.priority = prio.p
          AND f.due_at > p_now AND f.due_at <= p_now + p_lead
          AND f.origin = 'schedule'
          AND (SELECT j.overlap = 'allow' AND NOT j.paused
                      AND NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = j.queue)
               FROM cronbox.job j WHERE j.job_id = f.job_id)
          AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = f.job_id)
        ORDER BY f.due_at
        LIMIT p_limit
    ) x
$$;

COMMENT ON FUNCTION cronbox.early_candidates(interval, timestamp with time zone, integer) IS
'Internal: the ready futures early dispatch may take (scheduled, due within the lead, job allow/unpaused/no dependency/no queue limit), by priority then due time, at most p_limit per priority. No locks.';

ALTER FUNCTION cronbox.early_candidates(interval, timestamp with time zone, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.early_candidates(interval, timestamp with time zone, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
