-- cronbox.store_backfill(..., p_bucket): the second half of a backfill pass, set-based over parallel
-- arrays. Inserts the fires the poller computed as futures of origin 'backfill' (due 0.5 ms
-- apart in fire order from the later of now and the last due time given to a backfilled fire of
-- the bucket, so at most 2,000 come due per second in a bucket and regular fires of the same priority already due go first; the request's
-- overlap and priority), except fires of the job that already ran (a run in any state but
-- missed, skipped or cancelled before delivery) or are pending (a scheduled, retry or backfilled future): counted as
-- duplicates. Then records each request's progress and marks finished ones done. The jobs
-- must be locked by claim_backfills in the same transaction. p_bucket: the bucket of the pass's
-- requests (the poller stores a pass bucket by bucket; NULL: every bucket, plain PostgreSQL's one).
-- Thin wrapper: the body is cronbox.store_backfill_at (internal/store_backfill_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.store_backfill(
    p_backfill bigint[],
    p_done_through timestamptz[],
    p_done boolean[],
    p_note text[],
    p_fire_backfill bigint[],
    p_fire_at timestamptz[],
    p_bucket integer DEFAULT NULL
) RETURNS TABLE(futures integer, duplicates integer)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM cronbox.store_backfill_at($1, $2, $3, $4, $5, $6, $7, now())
$$;

COMMENT ON FUNCTION cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer) IS
'Poller: stores a backfill pass computed from cronbox.claim_backfills: fires as futures of origin backfill (due 0.5 ms apart in fire order from the later of now and the last due time given to a backfilled fire of the bucket: at most 2,000 per second per bucket; p_bucket the requests'' bucket, NULL: every bucket), except those that already ran or are pending (counted as duplicates); each request''s progress, done ones marked done. Returns (futures, duplicates).';

ALTER FUNCTION cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], integer) TO cronbox_process;
