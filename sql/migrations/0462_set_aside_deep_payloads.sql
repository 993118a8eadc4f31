-- 0462: payloads nested deeper than 2,048 levels, stored before cronbox refused them at every
-- door (cronbox.json_too_deep). One within ~40 levels of PostgreSQL's own parsing limit was
-- stored, then failed every claim that reached its row ("stack depth limit exceeded", 54001),
-- other queues' rows included: the relays sent nothing until it was removed by hand. Each such
-- value is set aside here, with its reason, through the functions a user or the poller calls:
--   * a run in flight carrying one: cancelled (cronbox.cancel: a run not yet delivered ends
--     'cancelled' and its message is withdrawn; one a worker holds is flagged, as any cancel);
--   * a fire not yet dispatched carrying one (a trigger's payload, a retry's copy): dropped;
--   * the job of either, and every job whose own payload is one: quarantined
--     (cronbox.quarantine_job: paused, reason 'quarantined: <what was found>', a change-log row
--     and a notification; resume() undoes it once the payload is shallower). A job already
--     paused keeps its pause with the quarantine's reason and change-log row, so that resuming
--     it does not bring the payload back to the claims.
-- Values within the bound are left alone; a database without such values is not changed.
-- The walk: one pass over the jobs, the futures and the outbox, jsonb_path_exists stopping at
-- level 2,048 (it never runs out of stack, whatever the depth).
CREATE TEMPORARY TABLE deep_found (job_id bigint PRIMARY KEY, own boolean, runs integer, fires integer)
    ON COMMIT DROP;

INSERT INTO deep_found (job_id, own, runs, fires)
SELECT job_id, bool_or(own), sum(runs)::integer, sum(fires)::integer
FROM (SELECT j.job_id, true AS own, 0 AS runs, 0 AS fires FROM cronbox.job j
      WHERE jsonb_path_exists(j.payload, 'strict $.**{2048}')
      UNION ALL
      SELECT o.job_id, false, 1, 0 FROM cronbox.outbox o
      WHERE o.kind = 'run' AND jsonb_path_exists(o.payload, 'strict $.**{2048}')
      UNION ALL
      SELECT f.job_id, false, 0, 1 FROM cronbox.job_future f
      WHERE jsonb_path_exists(f.payload, 'strict $.**{2048}')) found
WHERE job_id IS NOT NULL
GROUP BY job_id;

DO $$
DECLARE
    v_job record;
    v_run bigint;
    v_reason text;
BEGIN
    FOR v_run IN SELECT o.outbox_id FROM cronbox.outbox o
                 WHERE o.kind = 'run' AND jsonb_path_exists(o.payload, 'strict $.**{2048}')
                 ORDER BY o.outbox_id LOOP
        PERFORM cronbox.cancel(v_run);
    END LOOP;
    DELETE FROM cronbox.job_future f WHERE jsonb_path_exists(f.payload, 'strict $.**{2048}');
    FOR v_job IN SELECT d.*, j.paused, j.name FROM deep_found d JOIN cronbox.job j USING (job_id)
                 ORDER BY d.job_id LOOP
        v_reason := concat_ws('; ',
            CASE WHEN v_job.own THEN 'its own payload' END,
            CASE WHEN v_job.runs > 0 THEN v_job.runs || CASE WHEN v_job.runs = 1 THEN ' run' ELSE ' runs' END
                                          || ' in flight (cancelled)' END,
            CASE WHEN v_job.fires > 0 THEN v_job.fires || CASE WHEN v_job.fires = 1 THEN ' fire' ELSE ' fires' END
                                           || ' not yet dispatched (dropped)' END)
            || ': payload nested deeper than 2,048 levels, stored before cronbox refused such values'
            || ' (a claim reaching it failed). Give the job a shallower payload (cronbox.schedule),'
            || ' then cronbox.resume()';
        IF NOT cronbox.quarantine_job(v_job.job_id, v_reason) AND v_job.paused THEN
            UPDATE cronbox.job j SET paused_reason = 'quarantined: ' || v_reason, updated_at = now()
            WHERE j.job_id = v_job.job_id;
            INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
            VALUES (v_job.job_id, v_job.name, 'quarantined', 'quarantined: ' || v_reason, current_user, now());
        END IF;
        RAISE WARNING 'cronbox: job % quarantined: %', v_job.name, v_reason;
    END LOOP;
END
$$;
