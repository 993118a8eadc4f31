-- cronbox.note_fire_rate(p_job_id, p_owner, p_old_rate, p_rate): after schedule() wrote a job,
-- stores its fire rate (cronbox.check_owner_quota's answer; NULL when its owner has no quota)
-- and moves the owner's sum in cronbox.owner_quota by the difference. The owner's quota row is
-- locked already (check_owner_quota). Nothing to do when both rates are NULL.
CREATE OR REPLACE FUNCTION cronbox.note_fire_rate(
    p_job_id bigint, p_owner name, p_old_rate double precision, p_rate double precision
) RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_old_rate IS NULL AND p_rate IS NULL THEN
        RETURN;
    END IF;
    UPDATE cronbox.job j SET fire_rate = p_rate WHERE j.job_id = p_job_id;
    UPDATE cronbox.owner_quota q SET fire_rate = greatest(q.fire_rate + coalesce(p_rate, 0) - coalesce(p_old_rate, 0), 0)
    WHERE q.owner = p_owner;
END
$$;

COMMENT ON FUNCTION cronbox.note_fire_rate(bigint, name, double precision, double precision) IS
'Internal: stores a job''s fire rate after schedule() and keeps its owner''s sum in cronbox.owner_quota.';

ALTER FUNCTION cronbox.note_fire_rate(bigint, name, double precision, double precision) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.note_fire_rate(bigint, name, double precision, double precision) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
