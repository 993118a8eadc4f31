-- cronbox.finish_runs_by_bucket(run_ids, outcome, results, errors, retryable, p_now): cronbox.finish_runs
-- for ids of any buckets where Citus distributes the outbox by bucket (finish_runs calls it when
-- given no bucket there): one finish_runs call per bucket, each of whose statements reads and
-- writes that bucket's rows. The ids go first to the bucket each carries (cronbox.run_bucket:
-- dispatch draws a bucket's run ids with its index), in bucket order (the order of the jobs'
-- locks across calls); an id found in none of those (drawn without its bucket, or naming no
-- bucket) is then looked up by key in the outbox and in history over every bucket, without a
-- lock (a statement over every shard: the rare path), and finished in the bucket it is in; an id
-- found nowhere is not_found. Returns per id of run_ids, in their order, its state and verdict
-- as finish_runs.
CREATE OR REPLACE FUNCTION cronbox.finish_runs_by_bucket(
    p_run_ids   bigint[],
    p_outcome   text,
    p_results   jsonb[],
    p_errors    text[],
    p_retryable boolean,
    p_now       timestamptz
) RETURNS TABLE (run_id bigint, state text, verdict text)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_ids bigint[];      -- the ids given (no NULL), in their order
    v_res jsonb[];       -- their results and errors, parallel
    v_err text[];
    v_at integer[];      -- the bucket each is finished in (-1: none)
    v_got jsonb := '{}'; -- run id -> [state, verdict], the ids found
    v_where jsonb;       -- run id -> the bucket it is in (the look-up)
    v_b integer;
BEGIN
    SELECT array_agg(u.id ORDER BY u.i), array_agg(u.result ORDER BY u.i), array_agg(u.error ORDER BY u.i),
           array_agg(coalesce(cronbox.run_bucket(u.id), -1) ORDER BY u.i)
      INTO v_ids, v_res, v_err, v_at
    FROM unnest(p_run_ids, p_results, p_errors) WITH ORDINALITY AS u(id, result, error, i)
    WHERE u.id IS NOT NULL;
    FOR v_pass IN 1 .. 2 LOOP
        -- 1: each id in the bucket it carries; 2: those not found there, in the bucket they are in
        FOR v_b IN SELECT DISTINCT u.b FROM unnest(v_at) AS u(b) WHERE u.b >= 0 ORDER BY u.b LOOP
            SELECT v_got || coalesce(jsonb_object_agg(f.run_id::text, jsonb_build_array(f.state, f.verdict))
                                         FILTER (WHERE f.verdict <> 'not_found'), '{}')
              INTO v_got
            FROM cronbox.finish_runs(
                     ARRAY(SELECT u.id FROM unnest(v_ids, v_at) WITH ORDINALITY AS u(id, b, n) WHERE u.b = v_b ORDER BY u.n),
                     p_outcome,
                     CASE WHEN p_results IS NOT NULL
                          THEN ARRAY(SELECT u.r FROM unnest(v_res, v_at) WITH ORDINALITY AS u(r, b, n) WHERE u.b = v_b ORDER BY u.n) END,
                     CASE WHEN p_errors IS NOT NULL
                          THEN ARRAY(SELECT u.e FROM unnest(v_err, v_at) WITH ORDINALITY AS u(e, b, n) WHERE u.b = v_b ORDER BY u.n) END,
                     p_retryable, p_now, v_b) f;
        END LOOP;
        EXIT WHEN v_pass = 2;
        SELECT array_agg(u.id ORDER BY u.n), array_agg(u.r ORDER BY u.n), array_agg(u.e ORDER BY u.n),
               array_agg(u.b ORDER BY u.n)
          INTO v_ids, v_res, v_err, v_at
        FROM unnest(v_ids, v_res, v_err, v_at) WITH ORDINALITY AS u(id, r, e, b, n)
        WHERE NOT v_got ? u.id::text;
        EXIT WHEN v_ids IS NULL;
        -- where they are: by key in the outbox, then in history, over every bucket (no lock)
        SELECT jsonb_object_agg(o.outbox_id::text, o.bucket) INTO v_where
        FROM cronbox.outbox o WHERE o.outbox_id = ANY (v_ids) AND o.kind = 'run';
        IF EXISTS (SELECT 1 FROM unnest(v_ids) AS u(id) WHERE NOT coalesce(v_where ? u.id::text, false)) THEN
            SELECT coalesce(v_where, '{}') || coalesce(jsonb_object_agg(r.run_id::text, r.bucket), '{}') INTO v_where
            FROM cronbox.run r
            WHERE r.run_id = ANY (ARRAY(SELECT u.id FROM unnest(v_ids) AS u(id)
                                        WHERE NOT coalesce(v_where ? u.id::text, false)));
        END IF;
        -- in another bucket than the one tried (the same one: not found there, -1)
        v_at := ARRAY(SELECT CASE WHEN (v_where ->> u.id::text)::integer <> u.b
                                  THEN (v_where ->> u.id::text)::integer ELSE -1 END
                      FROM unnest(v_ids, v_at) WITH ORDINALITY AS u(id, b, n) ORDER BY u.n);
    END LOOP;
    RETURN QUERY
        SELECT u.id, v_got -> u.id::text ->> 0, coalesce(v_got -> u.id::text ->> 1, 'not_found')
        FROM unnest(p_run_ids) AS u(id);
END
$$;

COMMENT ON FUNCTION cronbox.finish_runs_by_bucket(bigint[],text,jsonb[],text[],boolean,timestamp with time zone) IS
'Internal: cronbox.finish_runs for ids of several buckets where Citus distributes the outbox: one finish_runs call per bucket (the bucket each id carries, cronbox.run_bucket; an id not there looked up by key over every bucket). Returns per id its state and verdict.';

ALTER FUNCTION cronbox.finish_runs_by_bucket(bigint[],text,jsonb[],text[],boolean,timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.finish_runs_by_bucket(bigint[],text,jsonb[],text[],boolean,timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
