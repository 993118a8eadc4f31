-- cronbox.lease_buckets_at(kind, owner, lease, p_now) (Citus only): the body of
-- cronbox.lease_buckets. The caller is a live member until p_now + lease, and its buckets are
-- its own for as long (a renewal writes its member row only). Members past their time are
-- forgotten and their buckets are free. The live members of a kind share the buckets evenly
-- (ordered by owner, the first B mod n take one more): the caller releases its buckets above its
-- share (free at once, for a newcomer) and takes free ones up to it. Row locks: its own member
-- row, its own bucket rows, and free rows it can lock at once (FOR UPDATE SKIP LOCKED): two
-- processes never wait for each other nor take the same bucket. Its rows by
-- bucket_lease_owner_idx; free ones by walking the kind's B rows, only when below its share.
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
    v_held    integer[];
BEGIN
    PERFORM cronbox.assert_one_of('kind', p_kind, ARRAY['poller', 'relay']);
    PERFORM cronbox.assert_not_null('owner', p_owner);
    IF length(p_owner) NOT BETWEEN 1 AND 200 OR p_owner ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'owner: must be 1 to 200 characters without control characters, got % characters', length(p_owner)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.checked_interval('lease', p_lease, interval '1 second', interval '1 hour');

    -- the caller (and its buckets) alive for one more lease; members past their time forgotten
    INSERT INTO cronbox.bucket_member AS m (kind, owner, joined_at, alive_until)
    VALUES (p_kind, p_owner, p_now, p_now + p_lease)
    ON CONFLICT ON CONSTRAINT bucket_member_key DO UPDATE SET alive_until = excluded.alive_until;
    DELETE FROM cronbox.bucket_member m WHERE m.kind = p_kind AND m.alive_until < p_now;

    -- the share: B / n, one more for the first B mod n by owner (the shares add up to B)
    SELECT count(*) INTO v_total FROM cronbox.bucket b;
    SELECT count(*), count(*) FILTER (WHERE m.owner < p_owner) INTO v_members, v_rank
    FROM cronbox.bucket_member m WHERE m.kind = p_kind;
    v_share := v_total / v_members + CASE WHEN v_rank < v_total % v_members THEN 1 ELSE 0 END;

    SELECT coalesce(array_agg(l.bucket ORDER BY l.bucket), ARRAY[]::integer[]) INTO v_held
    FROM cronbox.bucket_lease l WHERE l.kind = p_kind AND l.owner = p_owner;

    IF cardinality(v_held) > v_share THEN
        -- above the share (a process joined): the last ones released, free at once
        UPDATE cronbox.bucket_lease l SET owner = NULL, held_since = NULL
        WHERE l.kind = p_kind AND l.owner = p_owner AND l.bucket = ANY (v_held[v_share + 1:]);
        v_held := v_held[1:v_share];
    ELSIF cardinality(v_held) < v_share THEN
        -- below it: free buckets taken (released, never held, or held by a member forgotten above)
        WITH free AS (
            SELECT l.bucket FROM cronbox.bucket_lease l
            WHERE l.kind = p_kind
              AND (l.owner IS NULL OR NOT EXISTS (
                    SELECT 1 FROM cronbox.bucket_member m WHERE m.kind = p_kind AND m.owner = l.owner))
            ORDER BY l.held_since NULLS FIRST, l.bucket
            LIMIT v_share - cardinality(v_held)
            FOR UPDATE OF l SKIP LOCKED
        ), taken AS (
            UPDATE cronbox.bucket_lease l SET owner = p_owner, held_since = p_now
            FROM free WHERE l.kind = p_kind AND l.bucket = free.bucket
            RETURNING l.bucket
        )
        SELECT array_agg(b ORDER BY b) INTO v_held
        FROM (SELECT unnest(v_held) UNION ALL SELECT taken.bucket FROM taken) x(b);
    END IF;

    RETURN QUERY SELECT coalesce(v_held, ARRAY[]::integer[]), p_lease, v_members, v_share;
END
$$;

COMMENT ON FUNCTION cronbox.lease_buckets_at(text, text, interval, timestamptz) IS
'Internal (Citus): the body of cronbox.lease_buckets at a given time (tests fix the clock).';

ALTER FUNCTION cronbox.lease_buckets_at(text, text, interval, timestamptz) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lease_buckets_at(text, text, interval, timestamptz) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
