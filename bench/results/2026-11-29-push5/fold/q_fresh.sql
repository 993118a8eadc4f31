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
        x AS (SELECT 1) SELECT (SELECT count(*) FROM (SELECT * FROM fresh OFFSET 0) f), 0