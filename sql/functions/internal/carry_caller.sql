-- cronbox.carry_caller(): carries the caller to Citus's worker nodes for the rest of the
-- transaction. On the distributed tables the row-security policies run on the worker holding
-- the shard, in a session Citus opened as the current user: inside a SECURITY DEFINER function
-- its owner, so cronbox.caller() there would be the owner. A public function that a role
-- limited to its own schedules may call calls this first: SET LOCAL cronbox.caller, propagated
-- by Citus (citus.propagate_set_commands = 'local': a SET LOCAL, in a function or a transaction
-- block, is sent to the transaction's worker connections and to those it opens later), read by
-- cronbox.caller() only in the sessions of cronbox's owner roles (docs/citus.md, "Distributing
-- the hot tables"). Without Citus loaded it returns at once. On a worker node (a call pushed down
-- with a query over a distributed table) it refuses the call (0A000). With the hot tables distributed it
-- also makes the transaction a coordinated one, without contacting any node: no lock, no write
-- but an empty intermediate result file on the coordinator, removed when the transaction ends.
CREATE OR REPLACE FUNCTION cronbox.carry_caller() RETURNS void
LANGUAGE plpgsql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.current_setting('citus.propagate_set_commands', true) IS NULL
       OR pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;  -- plain PostgreSQL (or no Citus here): the policies run here, where cronbox.caller() reads the session
    END IF;
    -- A call sent to a worker node inside a query over a distributed table (SELECT cronbox.pause(name)
    -- FROM cronbox.job: Citus pushes the call down beside the shards) would run there without the
    -- coordinator's tables; refused with the way round.
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'cronbox''s functions run on the Citus coordinator, not on a worker node'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A call inside a query over cronbox''s distributed tables (such as SELECT cronbox.pause(name) FROM cronbox.job) is sent to the worker nodes with the query.',
                  HINT = 'Take the names from a view, which the coordinator reads (SELECT cronbox.pause(name) FROM cronbox.schedules WHERE ...), or use the bulk calls (cronbox.pause_schedules(name_like => ...)).';
    END IF;
    -- both until the transaction (or the savepoint it runs in) ends, here and on the worker
    -- connections (cronbox.caller() ignores the setting here: the session is not an owner role's)
    SET LOCAL citus.propagate_set_commands = 'local';
    EXECUTE pg_catalog.format('SET LOCAL cronbox.caller = %L', cronbox.caller());
    -- A read outside a transaction block is sent to the workers without BEGIN, so without the
    -- SET: with the hot tables distributed, make this a coordinated transaction (every later
    -- statement sent in a block that starts with the SETs). Citus starts one for an
    -- intermediate result (create_intermediate_result: UseCoordinatedTransaction), an empty one
    -- here, which involves no node: a node that is down fails only the calls that reach its
    -- buckets (a lock of a bucket's row made that bucket's node join every call).
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = 'cronbox.job'::regclass) THEN
        PERFORM pg_catalog.create_intermediate_result('cronbox_carry_caller', 'SELECT 1 WHERE false');
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.carry_caller() IS
'Internal: on Citus, carries the caller (cronbox.caller()) to the worker nodes for the rest of the transaction (SET LOCAL cronbox.caller, propagated), where the row-security policies of the distributed tables read it. Does nothing without Citus.';

ALTER FUNCTION cronbox.carry_caller() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.carry_caller() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
