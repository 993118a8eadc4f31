-- cronbox.release_futures(p_future_ids, p_buckets): the one "release held futures" write. Makes the given
-- futures ready again (hold, hold_queue, hold_until cleared; the next dispatch decides afresh)
-- and wakes the pollers (NOTIFY cronbox_future) when any was held. Every path that releases
-- holds (a run finishing: queue slot, overlap buffer, upstream success; resume; dependency or
-- queue limit removed; the hold_until backstop) chooses which futures and calls this. Locks
-- the futures by primary key; idempotent (a future no longer held is left alone). Returns the
-- number released. p_buckets: the futures' buckets, when the caller knows them (the backstop,
-- bucket by bucket): the update then touches those buckets' rows only; NULL: every bucket.
CREATE OR REPLACE FUNCTION cronbox.release_futures(p_future_ids bigint[], p_buckets integer[] DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
BEGIN
    IF p_future_ids IS NULL OR cardinality(p_future_ids) = 0 THEN
        RETURN 0;
    END IF;
    -- By key; the hold is checked on the rows read, in a form that matches no partial index
    -- (`hold IS NOT NULL` is job_future_recheck_idx's predicate: planned while job_future
    -- looked empty, the update walked that whole index: docs/architecture.md, SQL conventions).
    UPDATE cronbox.job_future f SET hold = NULL, hold_queue = NULL, hold_until = NULL
    WHERE f.future_id = ANY (p_future_ids) AND coalesce(f.hold, '') <> ''
      AND (p_buckets IS NULL OR f.bucket = ANY (p_buckets));
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.release_futures(bigint[], integer[]) IS
'Internal: makes held futures ready again (the one release write; callers choose which) and wakes the pollers; p_buckets: those buckets'' futures only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.release_futures(bigint[], integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_futures(bigint[], integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
