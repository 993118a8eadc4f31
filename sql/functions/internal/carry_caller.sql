-- cronbox.carry_caller(): carries the caller to Citus's worker nodes for the rest of the
-- transaction. On the distributed tables the row-security policies run on the worker holding
-- the shard, in a session Citus opened as the current user: inside a SECURITY DEFINER function
-- its owner, so cronbox.caller() there would be the owner. A public function that a role
-- limited to its own schedules may call calls this first: SET LOCAL cronbox.caller, propagated
-- by Citus (citus.propagate_set_commands = 'local': a SET LOCAL, in a function or a transaction
-- block, is sent to the transaction's worker connections and to those it opens later), read by
-- cronbox.caller() only in the sessions of cronbox's owner roles (docs/citus.md, "Distributing
-- the hot tables"). Without Citus loaded it returns at once. With the hot tables distributed it
-- takes a key-share lock on one bucket's row of cronbox.bucket_shard, which nothing updates.
CREATE OR REPLACE FUNCTION cronbox.carry_caller() RETURNS void
LANGUAGE plpgsql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer;
BEGIN
    IF pg_catalog.current_setting('citus.propagate_set_commands', true) IS NULL
       OR pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;  -- plain PostgreSQL (or no Citus here): the policies run here, where cronbox.caller() reads the session
    END IF;
    -- both reverted on this node when the function returns (its SET clause); the propagated SET
    -- stays on the worker connections until the transaction (or its savepoint) ends
    SET LOCAL citus.propagate_set_commands = 'local';
    EXECUTE pg_catalog.format('SET LOCAL cronbox.caller = %L', cronbox.caller());
    -- A read outside a transaction block is sent to the workers without BEGIN, so without the
    -- SET: with the hot tables distributed, make this a coordinated transaction (every later
    -- statement sent in a block that starts with the SETs) by one row lock of a bucket's row.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = 'cronbox.job'::regclass) THEN
        SELECT b.bucket INTO v_bucket FROM cronbox.bucket b LIMIT 1;
        EXECUTE pg_catalog.format('SELECT 1 FROM cronbox.bucket_shard s WHERE s.bucket = %s FOR KEY SHARE', v_bucket);
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.carry_caller() IS
'Internal: on Citus, carries the caller (cronbox.caller()) to the worker nodes for the rest of the transaction (SET LOCAL cronbox.caller, propagated), where the row-security policies of the distributed tables read it. Does nothing without Citus.';

ALTER FUNCTION cronbox.carry_caller() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.carry_caller() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
