"""Least privilege: the cronbox roles, their grants and row-level security, tested by logging
in as each role (tests/roles.py)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from cronbox import db

from .roles import logins  # noqa: F401  (fixture)

ROLES = ("cronbox_admin", "cronbox_user", "cronbox_worker", "cronbox_reader", "cronbox_process")


def _functions(conn) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT proname FROM pg_catalog.pg_proc WHERE pronamespace = 'cronbox'::regnamespace")}


def _job(conn, name: str) -> tuple | None:
    return conn.execute(
        "SELECT job_id, owner, cron, payload, paused, definition_version, "
        "(SELECT count(*) FROM cronbox.job_future f WHERE f.job_id = j.job_id), "
        "(SELECT count(*) FROM cronbox.runs r WHERE r.job_id = j.job_id) "
        "FROM cronbox.job j WHERE name = %s", (name,)).fetchone()


def _dispatch_one(conn, job: str) -> int:
    """Make a run of `job` exist (as the superuser): a due future, dispatched."""
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, now() - interval '1 minute', now() - interval '1 minute' "
                 "FROM cronbox.job WHERE name = %s", (job,))
    conn.execute("SELECT cronbox.dispatch(100)")
    return conn.execute("SELECT max(run_id) FROM cronbox.runs WHERE job = %s", (job,)).fetchone()[0]


# --- catalog guards ---------------------------------------------------------------------

def test_public_has_no_execute_on_any_function_in_the_schema(conn):
    rows = conn.execute("""
        SELECT p.oid::regprocedure::text
        FROM pg_catalog.pg_proc p,
             LATERAL pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
        WHERE p.pronamespace = 'cronbox'::regnamespace AND a.grantee = 0""").fetchall()
    assert rows == []
    assert conn.execute("SELECT has_schema_privilege('public', 'cronbox', 'USAGE')").fetchone()[0] is False


def test_no_security_definer_function_lacks_a_pinned_search_path(conn):
    rows = conn.execute("""
        SELECT p.oid::regprocedure::text, p.proconfig
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace AND p.prosecdef
          AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)""").fetchall()
    assert rows == []
    # ... and none runs as a role that row-level security would not hold for; the report
    # functions run as cronbox_runner, which its own policy lets through (they apply the owner
    # rule themselves: tests/test_runs_owner_rule.py), and so do the batch paths only all-seeing
    # callers may call (dispatch, the count of fires ahead, the relay's claim and ack, the pull
    # claim, the fold), which
    # refuse any other caller; no other function does
    owners = conn.execute("""
        SELECT DISTINCT r.rolname, r.rolsuper OR r.rolbypassrls
        FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
        WHERE p.pronamespace = 'cronbox'::regnamespace AND p.prosecdef ORDER BY 1""").fetchall()
    assert owners == [("cronbox_owner", False), ("cronbox_runner", False)]
    runner = {r[0] for r in conn.execute("""
        SELECT proname FROM pg_catalog.pg_proc
        WHERE pronamespace = 'cronbox'::regnamespace AND proowner = 'cronbox_runner'::regrole""")}
    assert runner == {"complete_run", "complete_runs", "fail_run", "fail_runs", "start_run", "start_runs", "heartbeat",
                      "complete_run_at", "complete_runs_at", "fail_run_at", "fail_runs_at", "start_run_at",
                      "heartbeat_at", "dispatch", "dispatch_at", "due_ahead", "claim_outbox", "claim_outbox_at",
                      "ack_outbox", "ack_outbox_at", "claim_runs", "claim_runs_at", "fold_job_stats"}


def test_the_runner_is_let_through_by_every_table_under_row_security_and_by_nothing_else(conn):
    """Each table under row security has the runner's USING (true) policy (a table without it
    would start its policies' plans in every report again), and the runner is no login, no
    superuser, not BYPASSRLS, and not the tables' owner (FORCEd row security holds for it)."""
    missing = conn.execute("""
        SELECT c.oid::regclass::text FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'cronbox'::regnamespace AND c.relkind IN ('r', 'p') AND c.relrowsecurity
          AND NOT c.relispartition
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid AND p.polpermissive
                          AND p.polroles = ARRAY['cronbox_runner'::regrole::oid] AND p.polcmd = '*'
                          AND pg_catalog.pg_get_expr(p.polqual, p.polrelid) = 'true'
                          AND pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) = 'true')""").fetchall()
    assert missing == []
    assert conn.execute("""SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_catalog.pg_roles
                           WHERE rolname = 'cronbox_runner'""").fetchone() == (False, False, False)
    assert not conn.execute("""SELECT count(*) FROM pg_catalog.pg_policy p
                               WHERE p.polroles @> ARRAY['cronbox_runner'::regrole::oid]
                                 AND pg_catalog.pg_get_expr(p.polqual, p.polrelid) <> 'true'""").fetchone()[0]
    for role in ROLES:
        assert not conn.execute("SELECT pg_has_role(%s, 'cronbox_runner', 'MEMBER')", (role,)).fetchone()[0], role


def test_the_write_functions_are_security_definer(conn):
    definer = {r[0] for r in conn.execute(
        "SELECT proname FROM pg_catalog.pg_proc WHERE pronamespace = 'cronbox'::regnamespace AND prosecdef")}
    assert {"schedule", "dispatch", "claim_outbox", "ack_outbox", "complete_run", "fail_run",
            "start_run", "store_fires", "claim_saturation", "ensure_run_partitions"} <= definer
    assert not definer & {"caller", "caller_reads_all", "normalize_cron", "record_change"}


def test_tables_are_writable_only_by_their_owner(conn):
    rows = conn.execute("""
        SELECT c.oid::regclass::text, r.rolname, p.priv
        FROM pg_catalog.pg_class c
        CROSS JOIN unnest(%s::text[]) AS r(rolname)
        CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p(priv)
        WHERE c.relnamespace = 'cronbox'::regnamespace AND c.relkind IN ('r', 'p', 'S')
          AND pg_catalog.has_table_privilege(r.rolname, c.oid, p.priv)""", ([*ROLES, "public"],)).fetchall()
    assert rows == []
    owners = conn.execute("""
        SELECT DISTINCT pg_catalog.pg_get_userbyid(relowner) FROM pg_catalog.pg_class
        WHERE relnamespace = 'cronbox'::regnamespace""").fetchall()
    assert owners == [("cronbox_owner",)]


def test_views_are_granted_to_admin_and_reader(conn):
    for view in ("schedules", "runs", "schedule_changes"):
        for role in ("cronbox_admin", "cronbox_reader", "cronbox_user"):
            assert conn.execute("SELECT has_table_privilege(%s, %s, 'SELECT')",
                                (role, f"cronbox.{view}")).fetchone()[0], (role, view)
        assert not conn.execute("SELECT has_table_privilege('cronbox_worker', %s, 'SELECT')",
                                (f"cronbox.{view}",)).fetchone()[0]


@pytest.mark.parametrize("sql", [
    "EXPLAIN SELECT f.future_id FROM cronbox.job_future f WHERE f.due_at <= now() "
    "ORDER BY f.due_at, f.priority LIMIT 10 FOR UPDATE SKIP LOCKED",
    "EXPLAIN SELECT o.outbox_id FROM cronbox.outbox o WHERE o.available_at <= now() "
    "ORDER BY o.available_at LIMIT 10 FOR UPDATE SKIP LOCKED",
    "EXPLAIN SELECT j.job_id FROM cronbox.job_fire j WHERE j.next_fire IS NOT NULL AND NOT j.paused "
    "AND j.next_fire <= now() + interval '2 minutes' ORDER BY j.next_fire LIMIT 10 FOR UPDATE SKIP LOCKED",
])
def test_hot_claims_keep_their_index_conditions_under_row_security(conn, sql):
    """The policies run as cronbox_owner inside every function (FORCE): the claim predicates
    must stay index conditions, not filters applied after the security qual."""
    conn.execute("SET LOCAL enable_seqscan = off")
    conn.execute("SET LOCAL ROLE cronbox_owner")
    plan = "\n".join(r[0] for r in conn.execute(sql))
    assert "Index Cond" in plan and "InitPlan" in plan, plan


# --- logging in as each role -------------------------------------------------------------

def test_a_reader_reads_every_view_and_cannot_write_anything(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.schedule('r_job', cron => '0 * * * *')")
        run_id = _dispatch_one(su, "r_job")
    with logins.connect(fresh_dsn, "reader") as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM cronbox.schedules")] == ["r_job"]
        assert conn.execute("SELECT count(*) FROM cronbox.runs").fetchone()[0] == 1
        for stmt in (
            "SELECT cronbox.schedule('r2', cron => '0 * * * *')",
            f"SELECT cronbox.complete_run({run_id})",
            "SELECT cronbox.dispatch(10)",
            "INSERT INTO cronbox.job (name, kind) VALUES ('x', 'cron')",
            "UPDATE cronbox.job SET paused = true",
            "DELETE FROM cronbox.outbox",
            "SELECT count(*) FROM cronbox.run",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)
        # A view that is not auto-updatable is refused before privileges are even checked.
        with pytest.raises((psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectNotInPrerequisiteState)):
            conn.execute("UPDATE cronbox.schedules SET paused = true")
    with db.connect(fresh_dsn) as su:
        assert _job(su, "r_job")[4] is False and _job(su, "r2") is None


def test_a_worker_runs_worker_functions_only_and_reads_no_payloads(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        su.execute("""SELECT cronbox.schedule('w_job', cron => '0 * * * *', queue => 'billing',
                                              payload => '{"card": "4111-secret"}')""")
        run_id = _dispatch_one(su, "w_job")
    with logins.connect(fresh_dsn, "worker") as conn:
        for stmt in (
            "SELECT cronbox.schedule('w2', cron => '0 * * * *')",
            "SELECT * FROM cronbox.runs",
            "SELECT * FROM cronbox.schedules",
            "SELECT payload FROM cronbox.run",
            "SELECT message FROM cronbox.outbox",
            "SELECT * FROM cronbox.claim_outbox('me', 10)",
            "SELECT cronbox.dispatch(10)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)
        conn.execute("SELECT cronbox.start_run(%s, 'w1')", (run_id,))
        assert conn.execute("SELECT cronbox.complete_run(%s, '{\"ok\": 1}')", (run_id,)).fetchone()[0] == "succeeded"
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT state, worker FROM cronbox.runs WHERE run_id = %s", (run_id,)).fetchone() == (
            "succeeded", "w1")


def test_a_worker_claiming_one_queue_gets_no_payload_of_another(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.schedule('mine', cron => '0 * * * *', queue => 'a', payload => '{\"k\": \"A\"}')")
        su.execute("SELECT cronbox.schedule('theirs', cron => '0 * * * *', queue => 'b', payload => '{\"k\": \"B-secret\"}')")
        _dispatch_one(su, "mine")
        _dispatch_one(su, "theirs")
    with logins.connect(fresh_dsn, "worker") as conn:
        rows = conn.execute("SELECT * FROM cronbox.claim_runs(queue => 'a', worker => 'w', n => 10)").fetchall()
    assert rows and "B-secret" not in repr(rows)


def test_each_user_sees_and_changes_only_its_own_schedules(fresh_dsn, logins):
    with logins.connect(fresh_dsn, "alice") as alice:
        alice.execute("SELECT cronbox.schedule('a_job', cron => '0 * * * *', payload => '{\"who\": \"alice\"}')")
    with db.connect(fresh_dsn) as su:
        run_id = _dispatch_one(su, "a_job")
        before = _job(su, "a_job")
    assert before[1] == logins.name("alice")  # owner = the caller, not the function owner

    with logins.connect(fresh_dsn, "bob") as bob:
        bob.execute("SELECT cronbox.schedule('b_job', every => '1 hour')")
        assert [r[0] for r in bob.execute("SELECT name FROM cronbox.schedules")] == ["b_job"]
        assert bob.execute("SELECT count(*) FROM cronbox.runs").fetchone()[0] == 0
        assert bob.execute("SELECT count(*) FROM cronbox.schedule_changes WHERE job = 'a_job'").fetchone()[0] == 0
        # Overwriting alice's schedule by name: her row is invisible, the name is taken.
        with pytest.raises(psycopg.errors.UniqueViolation):
            bob.execute("SELECT cronbox.schedule('a_job', cron => '* * * * *', payload => '{\"who\": \"bob\"}')")
        attempts = {
            "unschedule": "SELECT cronbox.unschedule('a_job')",
            "pause": "SELECT cronbox.pause('a_job')",
            "resume": "SELECT cronbox.resume('a_job')",
            "trigger": "SELECT cronbox.trigger('a_job')",
            "cancel": f"SELECT cronbox.cancel({run_id})",
        }
        for fn, stmt in attempts.items():
            try:
                out = bob.execute(stmt).fetchone()
            except psycopg.Error:
                continue  # refused: fine
            assert out[0] in (None, False, 0), (fn, out)
        # bob is not a worker: he cannot report on alice's run either
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(f"SELECT cronbox.complete_run({run_id})")

    with db.connect(fresh_dsn) as su:
        assert _job(su, "a_job") == before
        assert su.execute("SELECT cancel_requested FROM cronbox.runs WHERE run_id = %s", (run_id,)).fetchone()[0] is False
        assert _job(su, "b_job")[1] == logins.name("bob")


def test_an_admin_sees_and_changes_every_schedule_and_keeps_the_owner(fresh_dsn, logins):
    for who in ("alice", "bob"):
        with logins.connect(fresh_dsn, who) as c:
            c.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (f"{who}_job",))
    with logins.connect(fresh_dsn, "admin") as admin:
        assert [r[0] for r in admin.execute("SELECT name FROM cronbox.schedules ORDER BY name")] == [
            "alice_job", "bob_job"]
        admin.execute("SELECT cronbox.schedule('alice_job', every => '2 hours')")
        admin.execute("SELECT cronbox.schedule('admin_job', every => '2 hours')")
        by = admin.execute("SELECT changed_by FROM cronbox.schedule_changes WHERE job = 'alice_job' "
                           "ORDER BY change_id").fetchall()
    assert by == [(logins.name("alice"),), (logins.name("admin"),)]
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT name, owner, every FROM cronbox.job ORDER BY name").fetchall() == [
            ("admin_job", logins.name("admin"), timedelta(hours=2)),
            ("alice_job", logins.name("alice"), timedelta(hours=2)),
            ("bob_job", logins.name("bob"), timedelta(hours=1)),
        ]


def test_set_role_makes_the_team_role_the_owner(fresh_dsn, logins, pg):
    team = f"{logins.prefix}_team"
    with db.connect(pg.admin_dsn) as su:
        su.execute(f'DROP ROLE IF EXISTS "{team}"')
        su.execute(f'CREATE ROLE "{team}" NOLOGIN IN ROLE cronbox_user')
        su.execute(f'GRANT "{team}" TO "{logins.name("alice")}"')
    try:
        with logins.connect(fresh_dsn, "alice") as alice:
            alice.execute(f'SET ROLE "{team}"')
            alice.execute("SELECT cronbox.schedule('team_job', every => '1 hour')")
            assert alice.execute("SELECT owner FROM cronbox.schedules").fetchall() == [(team,)]
            alice.execute("RESET ROLE")
            assert alice.execute("SELECT count(*) FROM cronbox.schedules").fetchone()[0] == 0
    finally:
        with db.connect(pg.admin_dsn) as su:
            su.execute(f'DROP ROLE IF EXISTS "{team}"')


def test_a_login_without_cronbox_roles_can_do_nothing(fresh_dsn, logins):
    with logins.connect(fresh_dsn, "nobody") as conn:
        for stmt in ("SELECT cronbox.schedule('n', every => '1 hour')", "SELECT * FROM cronbox.schedules",
                     "SELECT cronbox.caller()"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)


CRAFTED = [
    "x'); DROP TABLE cronbox.job; --",
    'q"; DELETE FROM cronbox.run; --',
    "$$; DROP SCHEMA cronbox CASCADE; $$",
    "%s %I %L \\ \\x00 ;",
    "Robert'); DROP TABLE students;--",
]


@pytest.mark.parametrize("text", CRAFTED)
def test_names_and_payloads_crafted_as_sql_are_stored_as_data(fresh_dsn, logins, text):
    payload = {"cmd": text, text: [text]}
    with logins.connect(fresh_dsn, "alice") as alice:
        alice.execute("SELECT cronbox.schedule(name => %s, every => '1 hour', payload => %s)",
                      (text, db.Jsonb(payload)))
        got = alice.execute("SELECT name FROM cronbox.schedules").fetchone()
        # Queue names are routing keys (queue=target in CRONBOX_SINKS): a crafted one is refused.
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="^queue: "):
            alice.execute("SELECT cronbox.schedule(name => 'q', every => '1 hour', queue => %s)", (text,))
        # the same, typed as a psql user would, with dollar quoting
        alice.execute("SELECT cronbox.schedule(name => $q$" + text + "-2$q$, every => '1 hour', "
                      "payload => jsonb_build_object('cmd', $q$" + text + "$q$))")
    assert got == (text,)
    with db.connect(fresh_dsn) as su:
        rows = su.execute("SELECT name, payload FROM cronbox.job ORDER BY job_id").fetchall()
        assert rows == [(text, payload), (text + "-2", {"cmd": text})]
        assert su.execute("SELECT to_regclass('cronbox.job') IS NOT NULL AND to_regclass('cronbox.run') "
                          "IS NOT NULL").fetchone()[0]
        assert su.execute("SELECT count(*) FROM cronbox.job_change WHERE job_name = %s",
                          (text,)).fetchone()[0] == 1
