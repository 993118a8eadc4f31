-- cronbox.lease_buckets_at(kind, owner, lease, p_now) (Citus only): the body of
-- cronbox.lease_buckets. The caller is alive until p_now + lease; the live processes of its kind
-- share the buckets evenly (ordered by owner, the first B mod n take one more): it renews its
-- own leases up to its share, releases those above it (free at once, for a newcomer) and takes
-- free or expired ones up to it. Row locks: its own member row, then only bucket_lease rows it
-- can lock at once (FOR UPDATE SKIP LOCKED), so two processes never wait for each other nor take
-- the same bucket. Tables are tiny (B rows per kind): no index beyond the keys.
CREATE OR REPLACE FUNCTION cronbox.lease_buckets_at(
    p_kind text, p_owner text, p_lease interval, p_now timestamptz
) RETURNS TABLE (buckets integer[], valid_for interval, members integer, share integer)
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_total   integer;
    v_members integer;
    v_rank    integer;
    v_share   integer;
    v_kept    integer;
BEGIN
    PERFORM cronbox.assert_one_of('kind', p_kind, ARRAY['poller', 'relay']);
    PERFORM cronbox.assert_not_null('owner', p_owner);
    IF length(p_owner) NOT BETWEEN 1 AND 200 OR p_owner ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'owner: must be 1 to 200 characters without control characters, got % characters', length(p_owner)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.checked_interval('lease', p_lease, interval '1 second', interval '1 hour');

    -- the caller is alive for one lease; processes that stopped renewing are forgotten (their
    -- leases end at the same time, so their buckets are free when they leave the count)
    INSERT INTO cronbox.bucket_member AS m (kind, owner, joined_at, alive_until)
    VALUES (p_kind, p_owner, p_now, p_now + p_lease)
    ON CONFLICT ON CONSTRAINT bucket_member_key DO UPDATE SET alive_until = excluded.alive_until;
    DELETE FROM cronbox.bucket_member m WHERE m.kind = p_kind AND m.alive_until < p_now;

    -- the share: B / n, one more for the first B mod n by owner (the shares add up to B)
    SELECT count(*) INTO v_total FROM cronbox.bucket_lease l WHERE l.kind = p_kind;
    SELECT count(*), count(*) FILTER (WHERE m.owner < p_owner) INTO v_members, v_rank
    FROM cronbox.bucket_member m WHERE m.kind = p_kind;
    v_share := v_total / v_members + CASE WHEN v_rank < v_total % v_members THEN 1 ELSE 0 END;

    -- own buckets: the first `share` renewed, the rest released (owner NULL, free now)
    WITH mine AS (
        SELECT l.bucket FROM cronbox.bucket_lease l
        WHERE l.kind = p_kind AND l.owner = p_owner
        ORDER BY l.bucket FOR UPDATE SKIP LOCKED
    ), ranked AS (
        SELECT mine.bucket, row_number() OVER (ORDER BY mine.bucket) <= v_share AS keep FROM mine
    ), changed AS (
        UPDATE cronbox.bucket_lease l
        SET owner = CASE WHEN r.keep THEN p_owner END,
            lease_until = CASE WHEN r.keep THEN p_now + p_lease ELSE p_now END
        FROM ranked r
        WHERE l.kind = p_kind AND l.bucket = r.bucket
        RETURNING r.keep
    )
    SELECT count(*) FILTER (WHERE c.keep) INTO v_kept FROM changed c;

    -- below the share: take free or expired buckets, longest free first
    IF v_kept < v_share THEN
        WITH free AS (
            SELECT l.bucket FROM cronbox.bucket_lease l
            WHERE l.kind = p_kind AND l.lease_until <= p_now
            ORDER BY l.lease_until, l.bucket
            LIMIT v_share - v_kept
            FOR UPDATE SKIP LOCKED
        )
        UPDATE cronbox.bucket_lease l SET owner = p_owner, lease_until = p_now + p_lease
        FROM free WHERE l.kind = p_kind AND l.bucket = free.bucket;
    END IF;

    RETURN QUERY
    SELECT coalesce(array_agg(l.bucket ORDER BY l.bucket), ARRAY[]::integer[]),
           coalesce(min(l.lease_until) - p_now, p_lease), v_members, v_share
    FROM cronbox.bucket_lease l
    WHERE l.kind = p_kind AND l.owner = p_owner AND l.lease_until > p_now;
END
$$;

COMMENT ON FUNCTION cronbox.lease_buckets_at(text, text, interval, timestamptz) IS
'Internal (Citus): the body of cronbox.lease_buckets at a given time (tests fix the clock).';

ALTER FUNCTION cronbox.lease_buckets_at(text, text, interval, timestamptz) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lease_buckets_at(text, text, interval, timestamptz) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
