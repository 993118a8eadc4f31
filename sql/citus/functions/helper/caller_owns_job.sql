-- cronbox.caller_owns_job(bucket, job_id) (Citus only, distributed tables): true when the
-- caller (cronbox.caller(): on a worker node the one the coordinator carried) owns the job. The
-- owner rule of the policies on a job's other rows (futures, statistics, fires, backfills,
-- outbox, history) for a caller limited to its own schedules, where one primary's policies
-- hold a subquery that Citus refuses. Called on the worker node holding the row's shard, inside
-- the shard's statement: the job is read by its key in the same bucket, a colocated shard on
-- the same node (local execution, one task), which Citus allows inside a shard's statement only
-- with citus.allow_nested_distributed_execution (the rows read cannot move apart: colocated
-- shards move together). Planned with the bucket bound. No locks.
CREATE OR REPLACE FUNCTION cronbox.caller_owns_job(p_bucket integer, p_job_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET citus.allow_nested_distributed_execution = on
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM cronbox.job j
                   WHERE j.bucket = p_bucket AND j.job_id = p_job_id AND j.owner = cronbox.caller());
END
$$;

COMMENT ON FUNCTION cronbox.caller_owns_job(integer, bigint) IS
'Citus: true when the caller owns the job (by its bucket and id). The owner rule of the row-security policies on a job''s other rows on the distributed tables.';

ALTER FUNCTION cronbox.caller_owns_job(integer, bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_owns_job(integer, bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.caller_owns_job(integer, bigint) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
