-- cronbox.error_hint(p_state, p_message, p_hint): the hint a public function re-raises an error
-- with: p_hint, unless the error is one whose cause and way out cronbox knows and the error has
-- no hint of its own. Known: Citus's refusal of a statement on shard placements that another
-- role modified earlier in the transaction (25001), met when one transaction mixes calls that
-- run as cronbox's two roles on the distributed tables (docs/citus.md, "One role per
-- transaction"). No table read; the same answer on plain PostgreSQL, where that error never comes.
CREATE OR REPLACE FUNCTION cronbox.error_hint(p_state text, p_message text, p_hint text) RETURNS text
LANGUAGE sql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN coalesce(p_hint, '') = '' AND p_state = '25001'
             AND p_message LIKE '%modified in this transaction by a different user%'
        THEN 'On Citus with the hot tables distributed, one transaction may not mix the administration calls and '
             'views (run as cronbox_owner) with the report and batch calls (start_run, heartbeat, complete_run(s), '
             'fail_run(s), dispatch, claim_outbox, claim_runs: run as cronbox_runner) on the same rows, nor read '
             'cronbox''s tables directly after a call: run each in its own transaction.'
        ELSE p_hint END
$$;

COMMENT ON FUNCTION cronbox.error_hint(text, text, text) IS
'Internal: the hint a public function re-raises an error with: its own, or for a known cause without one (Citus''s 25001, two roles in one transaction) the way out.';

ALTER FUNCTION cronbox.error_hint(text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.error_hint(text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
