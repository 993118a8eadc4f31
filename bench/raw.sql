-- The raw SQL limit of the throughput bench: the same row work as the cronbox pipeline, with
-- no Python in the path and no bookkeeping beyond the rows themselves, on the same tables:
--   dispatch: move due job_future rows -> run (dispatched) + outbox   (one statement per batch)
--   deliver:  claim outbox rows, delete them, mark their runs delivered (one statement per batch)
--   complete: mark delivered runs succeeded                             (one statement per batch)
-- Each stage is a procedure that commits once per batch (durable commits, like the product)
-- and loops until its upstream is drained; run the three at once from three sessions.
-- The *_once statements are the same work as pgbench scripts (bench/pgbench/*.sql).
--
-- Every statement picks its batch as an array of primary keys (`= ANY (ARRAY(... SKIP LOCKED))`)
-- so that any plan of it touches the batch's rows only. A join to a picked CTE let PL/pgSQL's
-- cached generic plan, made while the outbox was nearly empty, become a nested loop scanning
-- the whole outbox once per picked row: a 137,000-row outbox then took ~25 s per batch, the
-- "raw stall" of bench.throughput (the callers also run these with plan_cache_mode =
-- force_custom_plan).
CREATE SCHEMA IF NOT EXISTS bench_raw;

CREATE OR REPLACE PROCEDURE bench_raw.dispatch_loop(p_batch integer)
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    LOOP
        WITH gone AS (
            DELETE FROM cronbox.job_future f
            WHERE f.future_id = ANY (ARRAY(
                SELECT r.future_id FROM cronbox.job_future r
                WHERE r.hold IS NULL AND r.due_at <= now()       -- job_future_ready_idx
                ORDER BY r.priority, r.due_at
                LIMIT p_batch
                FOR UPDATE SKIP LOCKED))
            RETURNING f.job_id, f.fire_at, f.due_at, f.attempt
        ),
        fire AS (
            SELECT cronbox.new_run_id() AS run_id, g.job_id, g.fire_at, g.due_at, g.attempt,
                   j.name, j.queue, j.payload, j.timeout
            FROM gone g JOIN cronbox.job j ON j.job_id = g.job_id
        ),
        new_run AS (
            INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt, dispatched_at)
            SELECT run_id, job_id, name, queue, fire_at, due_at, 'dispatched', attempt, now() FROM fire
        )
        INSERT INTO cronbox.outbox (run_id, queue, message, timeout)
        SELECT run_id, queue,
               jsonb_build_object('run_id', run_id, 'job', name, 'queue', queue, 'payload', payload,
                                  'fire_at', fire_at, 'attempt', attempt),
               timeout
        FROM fire;
        GET DIAGNOSTICS n = ROW_COUNT;
        COMMIT;
        EXIT WHEN n = 0;
    END LOOP;
END
$$;

CREATE OR REPLACE PROCEDURE bench_raw.deliver_loop(p_batch integer)
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    upstream_done boolean;
BEGIN
    LOOP
        -- Checked before the claim: if the futures were gone then, every outbox row the
        -- dispatcher wrote is visible to the claim's (later) snapshot.
        upstream_done := NOT EXISTS (SELECT 1 FROM cronbox.job_future);
        WITH gone AS (
            DELETE FROM cronbox.outbox o
            WHERE o.outbox_id = ANY (ARRAY(
                SELECT c.outbox_id FROM cronbox.outbox c
                WHERE c.available_at <= now()                    -- outbox_claim_idx
                ORDER BY c.available_at
                LIMIT p_batch
                FOR UPDATE SKIP LOCKED))
            RETURNING o.run_id, o.timeout
        )
        UPDATE cronbox.run r SET state = 'delivered', delivered_at = now(), lease_until = now() + g.timeout
        FROM gone g WHERE r.run_id = g.run_id;
        GET DIAGNOSTICS n = ROW_COUNT;
        COMMIT;
        EXIT WHEN n = 0 AND upstream_done;
        IF n = 0 THEN
            PERFORM pg_sleep(0.001);
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE PROCEDURE bench_raw.complete_loop(p_batch integer)
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    upstream_done boolean;
BEGIN
    LOOP
        upstream_done := NOT EXISTS (SELECT 1 FROM cronbox.job_future)
                     AND NOT EXISTS (SELECT 1 FROM cronbox.outbox);
        UPDATE cronbox.run r SET state = 'succeeded', finished_at = now(), lease_until = NULL,
                                 started_at = coalesce(r.started_at, now())
        WHERE r.run_id = ANY (ARRAY(
            SELECT d.run_id FROM cronbox.run d
            WHERE d.state = 'delivered'                          -- run_lease_idx
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS n = ROW_COUNT;
        COMMIT;
        EXIT WHEN n = 0 AND upstream_done;
        IF n = 0 THEN
            PERFORM pg_sleep(0.001);
        END IF;
    END LOOP;
END
$$;
