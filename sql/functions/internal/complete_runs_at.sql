-- Internal: the body of cronbox.complete_runs, with the time as its last parameter p_now. The public
-- cronbox.complete_runs passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.complete_runs_at(run_ids, results, p_now): complete_run for a batch in one call
-- (the relay, when a worker answers with outcomes, and fast workers). Set-based through
-- cronbox.finish_runs; never raises for one bad id: each row says its verdict (finished,
-- late, not_reportable, not_found). results, when given, is parallel to run_ids.
CREATE OR REPLACE FUNCTION cronbox.complete_runs_at(
    run_ids bigint[],
    results jsonb[] DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (run_id bigint, state text, verdict text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
BEGIN
    -- run_ids checked; results, when given, has one element per run id
    PERFORM cronbox.assert_run_ids(complete_runs_at.run_ids, CASE WHEN complete_runs_at.results IS NOT NULL THEN 'results' END,
                                   array_length(complete_runs_at.results, 1));
    IF EXISTS (SELECT 1 FROM unnest(complete_runs_at.results) r(v) WHERE octet_length(r.v::text) > cronbox.max_result_bytes()) THEN
        RAISE EXCEPTION 'results: each must be at most % bytes as JSON text (cronbox.max_result_bytes)', cronbox.max_result_bytes()
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(complete_runs_at.results) r(v) WHERE cronbox.json_too_deep(r.v)) THEN
        RAISE EXCEPTION 'results: each must be nested at most 2048 levels deep (cronbox.json_too_deep)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT f.run_id, f.state, f.verdict
    FROM cronbox.finish_visible_runs(complete_runs_at.run_ids, 'succeeded', complete_runs_at.results, NULL, true, p_now) f;
END
$$;

COMMENT ON FUNCTION cronbox.complete_runs_at(bigint[], jsonb[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.complete_runs(bigint[], jsonb[]) with the time as p_now; tests use it to fix the clock. Worker/relay: marks a batch of runs succeeded (results parallel to run_ids) in one set-based call. Returns per run its state and verdict (finished, late, not_reportable, not_found).';

ALTER FUNCTION cronbox.complete_runs_at(bigint[], jsonb[], timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.complete_runs_at(bigint[], jsonb[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
