        WITH
        entry AS MATERIALIZED (
            SELECT c.change_id, u.job_id, u.active, u.last_fire, u.last_run, u.last_state, u.ok,
                   u.failures, u.crashes, u.missed, c.success_at
            FROM cronbox.job_stat_change c
            CROSS JOIN LATERAL unnest(c.job_ids, c.active, c.last_fire, c.last_run, c.last_state, c.ok,
                                      c.failures, c.crashes, c.missed)
                AS u(job_id, active, last_fire, last_run, last_state, ok, failures, crashes, missed)
            WHERE (NULL::integer IS NULL OR c.bucket = NULL::integer)
              AND (NULL::bigint[] IS NULL OR c.change_id = ANY (NULL::bigint[]))
              
              
              AND (NULL::bigint[] IS NULL OR (NULL::bigint[])[width_bucket(u.job_id, NULL::bigint[])] = u.job_id)
        ),
        
        
        fresh AS (
            SELECT e.*, max(e.change_id) FILTER (WHERE e.ok > 0) OVER w AS reset_at,
                   
                   
                   first_value(e.last_state) OVER w AS newest_state
            FROM entry e
            
            WHERE NULL::bigint[] IS NULL OR e.change_id > (NULL::bigint[])[width_bucket(e.job_id, NULL::bigint[])]
            
            
            WINDOW w AS (PARTITION BY e.job_id ORDER BY e.last_run DESC NULLS LAST, e.change_id DESC
                         ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
        ),
        per_job AS (
            SELECT f.job_id,
                   sum(f.active)::integer AS active,
                   max(f.last_fire) AS last_fire,
                   max(f.last_run) AS last_run,
                   min(f.newest_state) AS last_state,  
                   max(f.success_at) FILTER (WHERE f.ok > 0) AS success_at,
                   bool_or(f.ok > 0) AS reset,
                   coalesce(sum(f.failures) FILTER (WHERE f.reset_at IS NULL OR f.change_id > f.reset_at), 0)::integer AS failures,
                   coalesce(sum(f.crashes) FILTER (WHERE f.reset_at IS NULL OR f.change_id > f.reset_at), 0)::integer AS crashes,
                   sum(f.missed)::bigint AS missed,
                   max(f.change_id) AS through,
                   min(f.change_id) AS since
            FROM fresh f
            GROUP BY f.job_id
        ),
        
        
        done AS (
            UPDATE cronbox.job_stat s SET
                active_runs = greatest(s.active_runs + coalesce(p.active, 0), 0),
                last_fire_at = greatest(s.last_fire_at, p.last_fire),
                last_run_id = CASE WHEN p.last_run >= coalesce(s.last_run_id, 0) THEN p.last_run ELSE s.last_run_id END,
                last_run_state = CASE WHEN p.last_run >= coalesce(s.last_run_id, 0) THEN p.last_state ELSE s.last_run_state END,
                last_success_at = greatest(s.last_success_at, p.success_at),
                consecutive_failures = CASE WHEN p.reset THEN 0 ELSE s.consecutive_failures END + p.failures,
                consecutive_crashes = CASE WHEN p.reset THEN 0 ELSE s.consecutive_crashes END + p.crashes,
                missed_count = s.missed_count + coalesce(p.missed, 0),
                folded_through = greatest(s.folded_through, p.through)
            FROM per_job p
            WHERE s.job_id = p.job_id AND s.folded_through < p.since
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM per_job)