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
        
        
        c AS MATERIALIZED (
            
            
            
            
            
            
            
            
            
            
            
            SELECT array_agg(p.job_id) AS ids,
                   array_agg(coalesce(p.active, 0)) AS active,
                   array_agg(coalesce(p.last_fire, '-infinity')) AS last_fire,
                   array_agg(coalesce(p.last_run, -1)) AS last_run,
                   array_agg(coalesce(array_position('{dispatched,delivered,running,succeeded,failed,lost,cancelled,skipped,missed}'::text[],
                                                     p.last_state), 0)) AS last_state,
                   array_agg(coalesce(p.success_at, '-infinity')) AS success_at,
                   array_agg(coalesce(p.reset, false)) AS reset,
                   array_agg(p.failures) AS failures,
                   array_agg(p.crashes) AS crashes,
                   array_agg(coalesce(p.missed, 0)) AS missed,
                   array_agg(p.through) AS through,
                   array_agg(p.since) AS since
            FROM (SELECT * FROM per_job ORDER BY per_job.job_id) p
        ),
        done AS (
            UPDATE cronbox.job_stat s SET
                active_runs = greatest(s.active_runs + c.active[width_bucket(s.job_id, c.ids)], 0),
                last_fire_at = greatest(s.last_fire_at, nullif(c.last_fire[width_bucket(s.job_id, c.ids)], '-infinity')),
                last_run_id = CASE WHEN c.last_run[width_bucket(s.job_id, c.ids)] >= coalesce(s.last_run_id, 0)
                                   THEN c.last_run[width_bucket(s.job_id, c.ids)] ELSE s.last_run_id END,
                last_run_state = CASE WHEN c.last_run[width_bucket(s.job_id, c.ids)] >= coalesce(s.last_run_id, 0)
                                      THEN ('{dispatched,delivered,running,succeeded,failed,lost,cancelled,skipped,missed}'::text[])[nullif(c.last_state[width_bucket(s.job_id, c.ids)], 0)]
                                      ELSE s.last_run_state END,
                last_success_at = greatest(s.last_success_at, nullif(c.success_at[width_bucket(s.job_id, c.ids)], '-infinity')),
                consecutive_failures = CASE WHEN c.reset[width_bucket(s.job_id, c.ids)] THEN 0 ELSE s.consecutive_failures END
                                       + c.failures[width_bucket(s.job_id, c.ids)],
                consecutive_crashes = CASE WHEN c.reset[width_bucket(s.job_id, c.ids)] THEN 0 ELSE s.consecutive_crashes END
                                      + c.crashes[width_bucket(s.job_id, c.ids)],
                missed_count = s.missed_count + c.missed[width_bucket(s.job_id, c.ids)],
                folded_through = greatest(s.folded_through, c.through[width_bucket(s.job_id, c.ids)])
            FROM c
            WHERE (NULL::integer IS NULL OR s.bucket = NULL::integer) AND s.job_id = ANY (c.ids)
              
              
              AND s.folded_through < c.since[width_bucket(s.job_id, c.ids)]
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM done), coalesce((SELECT cardinality(c.ids) FROM c), 0) 