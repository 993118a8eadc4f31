-- cronbox.finish_visible_runs(run_ids, outcome, results, errors, retryable, p_now):
-- cronbox.finish_runs for the batch report functions that run as cronbox_runner
-- (complete_runs, fail_runs; complete_run and fail_run check their one run themselves), with the owner rule the row-security policies no longer apply to them: the
-- runs the caller may not see (cronbox.caller_hidden_runs) are answered 'not_found' and left
-- alone, the others are finished; rows in the order of run_ids. For every cronbox_worker and
-- cronbox_process member (nothing hidden) it is finish_runs, one call.
CREATE OR REPLACE FUNCTION cronbox.finish_visible_runs(
    p_run_ids   bigint[],
    p_outcome   text,
    p_results   jsonb[] DEFAULT NULL,
    p_errors    text[] DEFAULT NULL,
    p_retryable boolean DEFAULT true,
    p_now       timestamptz DEFAULT now()
) RETURNS TABLE (run_id bigint, state text, verdict text)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_hidden bigint[] := cronbox.caller_hidden_runs(p_run_ids);
BEGIN
    IF v_hidden IS NULL OR cardinality(v_hidden) = 0 THEN
        RETURN QUERY SELECT * FROM cronbox.finish_runs(p_run_ids, p_outcome, p_results, p_errors, p_retryable, p_now);
        RETURN;
    END IF;
    RETURN QUERY
    WITH given AS (
        SELECT u.id, u.result, u.error, u.i, u.id = ANY (v_hidden) AS hidden
        FROM unnest(p_run_ids, p_results, p_errors) WITH ORDINALITY AS u(id, result, error, i)
        WHERE u.id IS NOT NULL
    ),
    done AS (
        SELECT f.run_id, f.state, f.verdict
        FROM cronbox.finish_runs(ARRAY(SELECT g.id FROM given g WHERE NOT g.hidden ORDER BY g.i), p_outcome,
                                 CASE WHEN p_results IS NOT NULL
                                      THEN ARRAY(SELECT g.result FROM given g WHERE NOT g.hidden ORDER BY g.i) END,
                                 CASE WHEN p_errors IS NOT NULL
                                      THEN ARRAY(SELECT g.error FROM given g WHERE NOT g.hidden ORDER BY g.i) END,
                                 p_retryable, p_now) f
        WHERE EXISTS (SELECT 1 FROM given g WHERE NOT g.hidden)
    )
    SELECT g.id, d.state, coalesce(d.verdict, 'not_found')
    FROM given g
    LEFT JOIN (SELECT DISTINCT ON (d.run_id) d.* FROM done d) d ON d.run_id = g.id AND NOT g.hidden
    ORDER BY g.i;
END
$$;

COMMENT ON FUNCTION cronbox.finish_visible_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone) IS
'Internal: cronbox.finish_runs for the report functions, with the owner rule: runs the caller may not see are answered not_found and left alone.';

ALTER FUNCTION cronbox.finish_visible_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.finish_visible_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
