-- Internal: the body of cronbox.ack_outbox, with the time as its last parameter p_now. The public
-- cronbox.ack_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.ack_outbox_at(p_owner, p_ids, p_outcomes, p_bucket, p_now): the relay's second transaction.
-- For the rows still leased to p_owner (a lease that ran out and was taken by another relay is
-- that relay's to ack): a notification's row is deleted; a run's row (the run in flight) moves
-- dispatched -> delivered in place with a run lease of the run's timeout (run_lease_until;
-- the relay's lease on the message, lease_until, ends). p_outcomes (optional, a JSON array of {outbox_id, state:
-- succeeded|failed, result, error, retryable}) finishes those runs instead, straight from
-- dispatched, set-based through cronbox.finish_runs (one call per kind, not per run), only
-- for rows acked here, so repeating an ack whose commit was lost changes nothing. p_outcomes
-- may also be one answer for every run acked here, a JSON object {state, result, error,
-- retryable} without outbox_id (what a relay sends when every row's worker answered the same
-- plain success: no answer per row to read, look up or match). The answers
-- are held to complete_run's bounds: a result over cronbox.max_result_bytes fails its run (not
-- retryable, with the reason), error texts are cut by finish_runs; a retryable that is not a
-- JSON boolean counts as true. Returns the number of rows acked.
-- By bucket (docs/citus.md, "Every hot statement a single-shard query"): p_bucket names the
-- bucket of the rows (the claim returns each row's), and every statement reads and writes only
-- that bucket's rows (`bucket = ANY (v_set)` on every reference to the outbox: one shard where
-- the outbox is distributed by bucket); NULL visits every bucket (cronbox.bucket_walks: one
-- statement per bucket only where Citus distributes the outbox, one for all anywhere else;
-- plain PostgreSQL has one bucket, 0). An id in another bucket than p_bucket is not acked.
-- Two statements per set: the rows read, then the writes by key, the run's lease end computed
-- in UTC (timestamp + interval, IMMUTABLE: Citus runs no STABLE function of a row's columns in
-- an UPDATE, and timestamptz + interval is one; docs/citus.md).
CREATE OR REPLACE FUNCTION cronbox.ack_outbox_at(
    p_owner text,
    p_ids bigint[],
    p_outcomes jsonb DEFAULT NULL,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
-- One plan per session: its statements prune run partitions at run time (BETWEEN on the
-- batch's bounds), so re-planning each call for plan-time pruning only costs (a custom plan
-- per statement made a one-run complete_run ~3 ms; generic: ~0.8 ms, batches no slower).
SET plan_cache_mode = force_generic_plan
-- ... so a plan made while the outbox was empty (a relay's first ack, just after a drain) is
-- kept for the session: without this it is a sequential scan of the whole outbox with
-- `outbox_id = ANY (p_ids)` as a filter, the array walked for every leased row (docs/architecture.md,
-- "SQL conventions" (3)); the rows are found by key instead.
SET enable_seqscan = off
AS $$
DECLARE
    v_walks integer[];
    v_set integer[];
    v_acked integer := 0;
    v_n integer;
    v_notes bigint[];
    v_runs bigint[];
    v_outcome_of jsonb;
    v_ok bigint[];
    v_ok_results jsonb[];
    v_failed bigint[];
    v_errors text[];
    v_retryable boolean[];
    v_max_result integer;
    v_all_ok boolean := false;  -- p_outcomes is {"state": "succeeded"}: every run acked succeeded
BEGIN
    -- Runs as cronbox_runner, whom row security lets through (docs/architecture.md, "Row security
    -- on the batch paths"): only an all-seeing caller may, as only such roles may call it.
    IF NOT cronbox.caller_writes_all() THEN
        RAISE EXCEPTION 'ack_outbox: only a caller that may act on every schedule may call it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The worker's answers, by outbox id (no join: a join's row estimates through a DELETE
    -- ... RETURNING and a JSON function are guesses, and a nested loop over them is quadratic).
    -- One answer for every run acked (an object with a state): a plain success needs no answer
    -- per row; any other is spelled out per row and read as an array of them.
    IF jsonb_typeof(p_outcomes) = 'object' AND p_outcomes ->> 'state' IN ('succeeded', 'failed')
       AND NOT p_outcomes ? 'outbox_id' THEN
        IF p_outcomes ->> 'state' = 'succeeded' AND nullif(p_outcomes -> 'result', 'null') IS NULL THEN
            v_all_ok := true;
            p_outcomes := NULL;
        ELSE
            p_outcomes := coalesce((SELECT jsonb_agg(p_outcomes || jsonb_build_object('outbox_id', i))
                                    FROM unnest(p_ids) AS i), '[]');
        END IF;
    END IF;
    IF p_outcomes IS NOT NULL THEN
        IF jsonb_typeof(p_outcomes) <> 'array' THEN
            RAISE EXCEPTION 'p_outcomes: must be a JSON array of {outbox_id, state, ...} or one {state, ...} for every row, got %',
                jsonb_typeof(p_outcomes) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_max_result := cronbox.max_result_bytes();
        -- A result past the bound becomes the run's failure, as complete_run refuses it.
        SELECT jsonb_object_agg(oc ->> 'outbox_id',
                   CASE WHEN oc ->> 'state' = 'succeeded'
                             AND octet_length((oc -> 'result')::text) > v_max_result
                        THEN jsonb_build_object(
                                 'state', 'failed', 'retryable', false,
                                 'error', format('result: %s bytes as JSON text, more than cronbox.max_result_bytes (%s): not stored',
                                                 octet_length((oc -> 'result')::text), v_max_result))
                        ELSE oc END)
          INTO v_outcome_of
        FROM jsonb_array_elements(p_outcomes) AS oc
        WHERE oc ->> 'outbox_id' IS NOT NULL AND oc ->> 'state' IN ('succeeded', 'failed');
    END IF;

    v_walks := cronbox.bucket_walks('cronbox.outbox', p_bucket);
    FOR i IN 1 .. array_length(v_walks, 1) LOOP
        v_set := ARRAY(SELECT unnest(v_walks[i:i]));
        -- The rows still leased to p_owner (a lease that ran out and was taken by another relay
        -- is that relay's to ack), read without a lock (finish_runs takes the jobs' locks before
        -- the rows', as every finisher does): a notification's row is deleted; a run's row stays
        -- the run until its final report: delivered in place (HOT: state, lease), or finished
        -- below with the worker's answer (finish_runs deletes the row and inserts its history row).
        -- Each row's answer is looked up in the batch's answers once (`oc`, NULL without one);
        -- with one plain success for all (v_all_ok) there is nothing to look up: every run succeeded.
        SELECT count(*)::integer,
               array_agg(s.outbox_id ORDER BY s.outbox_id) FILTER (WHERE s.kind <> 'run'),
               array_agg(s.outbox_id ORDER BY s.outbox_id) FILTER (WHERE s.kind = 'run' AND s.st IS NULL),
               array_cat(v_ok, array_agg(s.outbox_id ORDER BY s.outbox_id)
                   FILTER (WHERE s.kind = 'run' AND s.st = 'succeeded')),
               array_cat(v_ok_results, array_agg(nullif(s.oc -> 'result', 'null') ORDER BY s.outbox_id)
                   FILTER (WHERE s.kind = 'run' AND s.st = 'succeeded')),
               array_cat(v_failed, array_agg(s.outbox_id ORDER BY s.outbox_id)
                   FILTER (WHERE s.kind = 'run' AND s.st = 'failed')),
               array_cat(v_errors, array_agg(coalesce(s.oc ->> 'error', 'failed (no error given)') ORDER BY s.outbox_id)
                   FILTER (WHERE s.kind = 'run' AND s.st = 'failed')),
               array_cat(v_retryable, array_agg(CASE WHEN jsonb_typeof(s.oc -> 'retryable') = 'boolean'
                                                     THEN (s.oc ->> 'retryable')::boolean ELSE true END ORDER BY s.outbox_id)
                   FILTER (WHERE s.kind = 'run' AND s.st = 'failed'))
          INTO v_n, v_notes, v_runs, v_ok, v_ok_results, v_failed, v_errors, v_retryable
        FROM (
            SELECT a.outbox_id, a.kind, a.oc, CASE WHEN v_all_ok THEN 'succeeded' ELSE a.oc ->> 'state' END AS st
            FROM (SELECT o.outbox_id, o.kind, CASE WHEN NOT v_all_ok THEN v_outcome_of -> o.outbox_id::text END AS oc
                  FROM cronbox.outbox o
                  WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
                  OFFSET 0) a  -- not flattened: `oc` computed once per row, not once per reference below
        ) s;
        v_acked := v_acked + v_n;
        CONTINUE WHEN v_notes IS NULL AND v_runs IS NULL;
        -- The delivery is done: a notification's row is deleted; a run's row stays, the relay's
        -- lease on the message ends and it is never sent again (delivered_at). A dispatched run
        -- gets the run's lease (its timeout) and leaves the claims' walk (available_at
        -- 'infinity', as claim_runs does: setting the indexed lease makes the update not heap-only
        -- anyway, and nothing reads a delivered row's available_at), so a claim no longer passes
        -- the runs its workers answered 202 and still run; a run a fast worker started before
        -- this ack is running already and keeps the lease start_run gave it (a heap-only update,
        -- left in the walk). Rows found by key.
        WITH notes AS (
            DELETE FROM cronbox.outbox o
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (v_notes)
              AND o.lease_owner = p_owner
        )
        UPDATE cronbox.outbox o SET
            state = CASE WHEN o.state = 'dispatched' THEN 'delivered' ELSE o.state END,
            delivered_at = p_now,
            run_lease_until = CASE WHEN o.state = 'dispatched'
                                   THEN ((p_now AT TIME ZONE 'UTC') + o.timeout) AT TIME ZONE 'UTC'
                                   ELSE o.run_lease_until END,
            available_at = CASE WHEN o.state = 'dispatched' THEN 'infinity' ELSE o.available_at END,
            lease_until = NULL,
            lease_owner = NULL
        WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (v_runs)
          AND o.lease_owner = p_owner;  -- re-checked if a report came first
    END LOOP;

    -- Outcomes with the worker-side semantics, set-based: one call per kind, not per run.
    IF v_ok IS NOT NULL THEN
        -- no result in any answer (the common case): none passed, so finish_runs looks none up
        PERFORM cronbox.finish_runs(v_ok, 'succeeded',
                                    CASE WHEN cardinality(array_remove(v_ok_results, NULL)) > 0 THEN v_ok_results END,
                                    NULL, true, p_now, p_bucket);
    END IF;
    IF v_failed IS NOT NULL THEN
        PERFORM cronbox.finish_runs(
            array_agg(f.run_id ORDER BY f.run_id), 'failed', NULL,
            array_agg(f.error ORDER BY f.run_id), f.retryable, p_now, p_bucket)
        FROM unnest(v_failed, v_errors, v_retryable) AS f(run_id, error, retryable)
        GROUP BY f.retryable;
    END IF;
    RETURN v_acked;
END
$$;

COMMENT ON FUNCTION cronbox.ack_outbox_at(text, bigint[], jsonb, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.ack_outbox(text, bigint[], jsonb, integer) with the time as p_now; tests use it to fix the clock. Relay: for the outbox rows of bucket p_bucket (NULL: every bucket) still leased to p_owner, deletes notifications and marks runs delivered in place (lease = run timeout); optional p_outcomes (JSON array of {outbox_id, state, result, error, retryable}) completes or fails those runs in the same transaction, or one object {state, ...} without outbox_id answers for every run acked. Returns the count acked.';

ALTER FUNCTION cronbox.ack_outbox_at(text, bigint[], jsonb, integer, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.ack_outbox_at(text, bigint[], jsonb, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
