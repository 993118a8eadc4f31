-- cronbox.delete_dead_letter(id): discards one dead letter for good (a message nobody will
-- ever want delivered: a notification for a removed endpoint, a run that was re-run by
-- other means). The run it carried keeps its final state. Deletes one row by primary key,
-- no other lock. Returns true; P0002 for an unknown id, 22004 for NULL.
CREATE OR REPLACE FUNCTION cronbox.delete_dead_letter(
    id bigint
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF delete_dead_letter.id IS NULL THEN
        RAISE EXCEPTION 'id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    DELETE FROM cronbox.dead_letter d WHERE d.dead_letter_id = delete_dead_letter.id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'id: no dead letter %', delete_dead_letter.id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.delete_dead_letter(bigint) IS
'Discards one dead letter for good (cronbox.redrive puts one back instead); the run it carried keeps its final state. Returns true; P0002 for an unknown id.';

ALTER FUNCTION cronbox.delete_dead_letter(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.delete_dead_letter(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.delete_dead_letter(bigint) TO cronbox_admin;
