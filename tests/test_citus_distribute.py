"""`cronbox migrate --citus --distribute` (docs/citus.md, "Distributing the hot tables"): the
Citus layer's migration 0356 distributes the hot tables by the bucket of the job, colocated
with cronbox.bucket_shard, the small shared tables as reference tables, after moving the jobs
made before the buckets into their name's bucket; every later migrate keeps the hot functions
planned with their bucket bound. Marker `citus`: each test makes its own database on the
session's Citus cluster."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import psycopg
import pytest

from cronbox import db
from cronbox.citus import migrate_citus
from cronbox.migrate import migrate

from .conftest import CitusServer, Server, cli_migrate
from .procs import Proc, wait_until
from .roles import logins  # noqa: F401  (fixture)
from .test_citus import distributed_dsn, jobs_by_node, outbox_states  # noqa: F401  (a fixture among them)

pytestmark = pytest.mark.citus

HOT = ("job", "job_future", "job_stat", "job_fire", "backfill", "outbox", "job_stat_change", "run", "run_late_report")
SHARED = ("job_dependency", "queue_limit", "job_after_edge", "pool", "time_zone", "queue_grant", "bucket")
# the rows of each hot table that carry their job's bucket, by the job's key
JOB_ROWS = ("job_fire", "job_stat", "job_future", "outbox", "run")
# SECURITY DEFINER functions a role limited to its own schedules may call that read no distributed
# table, so need not carry the caller: reference tables only (their statements run on the
# coordinator's copy, where the caller is the session's), Citus's metadata, arithmetic
READ_NO_DISTRIBUTED_TABLE = ("cronbox.bucket_of(text)", "cronbox.queue_grant_rows()", "cronbox.bucket_placement()",
                             "cronbox.run_bucket(bigint)")


@pytest.fixture
def citus_bare(pg: Server) -> str:
    """A database on the session's Citus cluster with the extension and nothing of cronbox."""
    if not isinstance(pg, CitusServer):
        pytest.skip("needs the Citus session (pytest -m citus, or CRONBOX_TEST_CITUS=1)")
    name = f"cronbox_dist{os.getpid()}"
    dsn = pg.create_citus_db(name)
    yield dsn
    pg.drop_db(name)


def layout(conn: psycopg.Connection) -> dict[str, tuple[str, bool]]:
    """cronbox's Citus tables: name -> (method: 'h' distributed, 'n' reference; colocated with
    cronbox.bucket_shard)."""
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT c.relname, p.partmethod, p.colocationid = (SELECT colocationid FROM pg_catalog.pg_dist_partition"
        " WHERE logicalrelid = 'cronbox.bucket_shard'::regclass)"
        " FROM pg_catalog.pg_dist_partition p JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = 'cronbox'::regnamespace AND NOT c.relispartition")}


def custom_plans(conn: psycopg.Connection) -> dict[str, bool]:
    """Whether each of a few hot functions is planned with its arguments bound."""
    return {r[0]: r[1] for r in conn.execute(
        "SELECT p.proname, coalesce('plan_cache_mode=force_custom_plan' = ANY (p.proconfig), false)"
        " FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'cronbox'::regnamespace"
        " AND p.proname IN ('dispatch_at', 'claim_outbox_at', 'finish_runs', 'schedule_at')")}


def test_citus_distribute_moves_jobs_made_before_the_buckets_and_distributes_every_hot_table_colocated(citus_bare):
    """A database migrated on plain terms first (its jobs in bucket 0, a run in flight), then
    `cronbox migrate --citus --distribute`: every job in its name's bucket with every row of it,
    every hot table distributed by bucket in the buckets' colocation group (the history's
    partitions with it), keys and foreign keys with the bucket first, the shared tables
    reference tables, no policy with a subquery on any of them; the run in flight then
    completes, and a new job's fires are dispatched and completed, on the distributed tables.
    Again: nothing applied, nothing changed."""
    migrate(citus_bare)
    with db.connect(citus_bare) as conn:
        for name in ("etl/extract", "etl/load", "report", "cleanup"):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (name,))
        conn.execute("SELECT cronbox.trigger('report')")
        assert conn.execute("SELECT count(*) FROM cronbox.job WHERE bucket <> 0").fetchone()[0] == 0
    done = migrate_citus(citus_bare, 8, distribute=True)
    assert done.distributed and "0356_distribute_hot_tables" in done.citus_applied, done
    with db.connect(citus_bare) as conn:
        jobs = dict(conn.execute("SELECT name, bucket FROM cronbox.job").fetchall())
        for name, bucket in jobs.items():
            assert conn.execute("SELECT cronbox.bucket_of(%s)", (name,)).fetchone()[0] == bucket, (name, jobs)
        assert set(jobs.values()) - {0} and jobs["etl/extract"] == jobs["etl/load"], jobs  # some moved
        of_job = dict(conn.execute("SELECT job_id, bucket FROM cronbox.job").fetchall())
        for table in JOB_ROWS:  # read on their own: a join on job_id alone would cross buckets
            rows = conn.execute(f"SELECT job_id, bucket FROM cronbox.{table}").fetchall()
            assert all(of_job[j] == b for j, b in rows), (table, rows, of_job)
            assert rows or table in ("job_future", "run"), table  # no poller ran: no futures, no history yet
        tables = layout(conn)
        for table in HOT:
            assert tables.get(table) == ("h", True), (table, tables)
        for table in SHARED:
            assert tables.get(table, ("?",))[0] == "n", (table, tables)
        partitions = conn.execute("SELECT count(*) FILTER (WHERE p.logicalrelid IS NULL) FROM pg_catalog.pg_inherits i"
                                  " LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = i.inhrelid"
                                  " WHERE i.inhparent = 'cronbox.run'::regclass").fetchone()[0]
        assert partitions == 0
        keys = dict(conn.execute(
            "SELECT conname, pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint"
            " WHERE connamespace = 'cronbox'::regnamespace AND contype IN ('p', 'u', 'f') AND conparentid = 0"
            " AND conrelid = ANY (%s::regclass[])", ([f"cronbox.{t}" for t in HOT],)).fetchall())
        assert keys and all("(bucket, " in d for d in keys.values()), keys
        assert keys["job_fire_job_fkey"].endswith("REFERENCES cronbox.job(bucket, job_id) ON DELETE CASCADE"), keys
        with_subquery = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_policies WHERE schemaname = 'cronbox' AND tablename = ANY (%s)"
            " AND (qual ~ 'SELECT' OR with_check ~ 'SELECT')", (list(HOT + SHARED),)).fetchone()[0]
        assert with_subquery == 0
        assert all(custom_plans(conn).values()), custom_plans(conn)
        # the run made before, in flight, completes where its rows now are
        (run_id,) = conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchone()
        assert conn.execute("SELECT state FROM cronbox.complete_runs(%s)", ([run_id],)).fetchone()[0] == "succeeded"
        conn.execute("SELECT cronbox.trigger('etl/load')")
        conn.execute("SELECT cronbox.dispatch(100, p_bucket => %s)", (jobs["etl/load"],))
        runs = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run'")]
        assert len(runs) == 1
        assert conn.execute("SELECT state FROM cronbox.complete_runs(%s)", (runs,)).fetchone()[0] == "succeeded"
        states = conn.execute("SELECT job, state FROM cronbox.runs ORDER BY job").fetchall()
        assert states == [("etl/load", "succeeded"), ("report", "succeeded")], states
        before = layout(conn)
    again = migrate_citus(citus_bare)
    assert again.distributed and again.citus_applied == [] and not again.made_reference, again
    with db.connect(citus_bare) as conn:
        assert layout(conn) == before


def test_citus_without_distribute_the_hot_tables_stay_the_coordinator_s_own_until_asked(citus_bare):
    """`cronbox migrate --citus` (the real command) leaves every hot table local and does not
    record the distributing migration; a later plain `cronbox migrate` does not apply it either;
    `--citus --distribute` then does, and `--distribute` without `--citus` is refused with one
    line, exit status 1."""
    refused = cli_migrate(citus_bare, "--distribute")
    assert refused.returncode == 1 and "--distribute: only with --citus" in refused.stderr, refused.stderr
    for args in (("--citus", "--buckets", "4"), ()):
        out = cli_migrate(citus_bare, *args)
        assert out.returncode == 0, out.stderr
        assert "distributed" not in out.stdout, out.stdout
    with db.connect(citus_bare) as conn:
        assert not set(HOT) & set(layout(conn))
        assert conn.execute("SELECT count(*) FROM cronbox.citus_version WHERE version = 356").fetchone()[0] == 0
        assert not any(custom_plans(conn).values())
    out = cli_migrate(citus_bare, "--citus", "--distribute")
    assert out.returncode == 0 and "hot tables distributed by bucket" in out.stdout, (out.stdout, out.stderr)
    with db.connect(citus_bare) as conn:
        assert set(HOT) <= set(layout(conn))


def test_citus_a_migrate_that_applies_the_function_files_again_plans_the_hot_functions_with_their_bucket_again(citus_bare):
    """A function file applied again (CREATE OR REPLACE with its own SET list) drops the
    functions' plan_cache_mode: the core migrate alone leaves them with their generic plans
    (the failure this guards against: `could not create distributed plan`), and every migrate
    of a distributed database, plain `cronbox migrate` included, sets it again."""
    migrate_citus(citus_bare, 4, distribute=True)
    with db.connect(citus_bare) as conn:
        assert all(custom_plans(conn).values())
        conn.execute("DELETE FROM cronbox.schema_code")
    assert migrate(citus_bare).code_reapplied
    with db.connect(citus_bare) as conn:
        assert not any(custom_plans(conn).values()), custom_plans(conn)
        conn.execute("DELETE FROM cronbox.schema_code")
    out = cli_migrate(citus_bare)
    assert out.returncode == 0 and "hot tables distributed by bucket" in out.stdout, (out.stdout, out.stderr)
    with db.connect(citus_bare) as conn:
        assert all(custom_plans(conn).values()), custom_plans(conn)
        conn.execute("SELECT cronbox.schedule('after/reapply', every => '1 minute')")
        conn.execute("SELECT cronbox.trigger('after/reapply')")
        made = conn.execute("SELECT (SELECT count(*) FROM cronbox.job_future)"
                            " + (SELECT count(*) FROM cronbox.outbox WHERE kind = 'run')").fetchone()[0]
        assert made == 1  # the manual fire, as a future or already a run


def _futures(conn: psycopg.Connection) -> dict[str, int]:
    """Each job's pending fires: futures and runs in flight (read bucket by bucket: the job's rows
    of one bucket)."""
    jobs = conn.execute("SELECT name, bucket, job_id FROM cronbox.job").fetchall()
    return {name: conn.execute("SELECT (SELECT count(*) FROM cronbox.job_future WHERE bucket = %(b)s AND job_id = %(j)s)"
                               " + (SELECT count(*) FROM cronbox.outbox WHERE bucket = %(b)s AND job_id = %(j)s"
                               " AND kind = 'run')", {"b": bucket, "j": job_id}).fetchone()[0]
            for name, bucket, job_id in jobs}


def test_citus_on_the_distributed_jobs_an_owner_pauses_its_own_jobs_only(citus_bare, logins):  # noqa: F811
    """Row security by owner on the distributed tables, through the functions (the caller carried
    to the worker nodes, cronbox.carry_caller): an owner limited to its own schedules
    (cronbox_user) schedules, triggers and pauses its jobs, its futures made and deleted on the
    worker nodes as on one primary, and cannot pause, trigger or unschedule another owner's;
    an administrator pauses anyone's."""
    migrate_citus(citus_bare, 4, distribute=True)
    for who in ("alice", "bob"):
        with logins.connect(citus_bare, who) as conn:
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *')", (f"{who}/job",))
            conn.execute("SELECT cronbox.trigger(%s)", (f"{who}/job",))
    with db.connect(citus_bare) as conn:
        assert _futures(conn) == {"alice/job": 1, "bob/job": 1}
        assert dict(conn.execute("SELECT name, owner FROM cronbox.job").fetchall()) == {
            "alice/job": logins.name("alice"), "bob/job": logins.name("bob")}
        for (bucket,) in conn.execute("SELECT DISTINCT bucket FROM cronbox.job").fetchall():
            conn.execute("SELECT cronbox.dispatch(100, p_bucket => %s)", (bucket,))
        in_flight = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
    with logins.connect(citus_bare, "alice") as conn:
        assert [r[0] for r in conn.execute("SELECT job_id FROM cronbox.unfinished_runs()")] == [in_flight["alice/job"]]
        assert conn.execute("SELECT cronbox.pause('alice/job')").fetchone()[0] is True
        for stmt in ("SELECT cronbox.pause('bob/job')", "SELECT cronbox.trigger('bob/job')",
                     "SELECT cronbox.unschedule('bob/job')"):
            try:
                out = conn.execute(stmt).fetchone()
            except psycopg.Error:
                continue  # refused: fine
            assert out[0] in (None, False, 0), (stmt, out)
    with db.connect(citus_bare) as conn:
        assert sorted(conn.execute("SELECT name, paused FROM cronbox.job").fetchall()) == [
            ("alice/job", True), ("bob/job", False)]
        assert _futures(conn) == {"alice/job": 1, "bob/job": 1}  # a manual fire stays through a pause
        alices = conn.execute("SELECT bucket, job_id FROM cronbox.job WHERE name = 'alice/job'").fetchone()
    with logins.connect(citus_bare, "admin") as conn:
        assert conn.execute("SELECT cronbox.pause('bob/job')").fetchone()[0] is True
    with logins.connect(citus_bare, "alice") as conn:
        assert conn.execute("SELECT cronbox.unschedule('alice/job')").fetchone()[0] is True
    with db.connect(citus_bare) as conn:
        assert conn.execute("SELECT name, paused FROM cronbox.job").fetchall() == [("bob/job", True)]
        assert _futures(conn) == {"bob/job": 1}
        left = conn.execute("SELECT (SELECT count(*) FROM cronbox.job_future WHERE bucket = %(b)s AND job_id = %(j)s)"
                            " + (SELECT count(*) FROM cronbox.job_stat WHERE bucket = %(b)s AND job_id = %(j)s)",
                            {"b": alices[0], "j": alices[1]}).fetchone()[0]
        assert left == 0  # her job's rows deleted by her call, on the worker node


def test_citus_an_owner_cannot_forge_the_carried_caller(citus_bare, logins):  # noqa: F811
    """The caller carried to the worker nodes cannot be forged: a role limited to its own
    schedules that sets cronbox.caller to another owner itself (SET LOCAL propagated by Citus,
    or a session SET) and then calls a function gets its own caller there (the function carries
    it again first), and on the coordinator its setting is ignored (its session is not an owner
    role's)."""
    migrate_citus(citus_bare, 4, distribute=True)
    with logins.connect(citus_bare, "alice") as conn:
        conn.execute("SELECT cronbox.schedule('alice/job', every => '1 hour')")
    with logins.connect(citus_bare, "bob") as conn:
        conn.execute(f"SET cronbox.caller = '{logins.name('alice')}'")
        assert conn.execute("SELECT cronbox.caller()").fetchone()[0] == logins.name("bob")
        with conn.transaction():
            conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            conn.execute(f"SET LOCAL cronbox.caller = '{logins.name('alice')}'")
            try:
                out = conn.execute("SELECT cronbox.pause('alice/job')").fetchone()
                assert out[0] in (None, False), out
            except psycopg.Error:
                pass  # refused: fine
    with db.connect(citus_bare) as conn:
        assert conn.execute("SELECT paused FROM cronbox.job").fetchall() == [(False,)]


def test_every_security_definer_function_an_owner_may_call_carries_the_caller(citus_bare):
    """The caller is carried to the worker nodes by the public functions themselves: every
    SECURITY DEFINER function that a role limited to its own schedules may execute calls
    cronbox.carry_caller() (a function that did not would run the policies on the worker nodes
    as its owner, or as a caller the role set itself). Excepted: the functions that read no
    distributed table (READ_NO_DISTRIBUTED_TABLE)."""
    migrate_citus(citus_bare, 4, distribute=True)
    with db.connect(citus_bare) as conn:
        missing = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = 'cronbox'::regnamespace AND p.prosecdef"
            " AND pg_catalog.has_function_privilege('cronbox_user', p.oid, 'EXECUTE')"
            " AND p.prosrc NOT LIKE '%%cronbox.carry_caller()%%'"
            " AND p.oid <> ALL (%s::regprocedure[])", (list(READ_NO_DISTRIBUTED_TABLE),)).fetchall()
    assert missing == [], missing


def test_citus_the_views_over_the_distributed_tables_are_read_by_the_roles_that_may_read_them(citus_bare, logins):  # noqa: F811
    """The views that read the distributed tables (sql/citus/distributed_views.sql) are read as
    cronbox's owner through cronbox.read_view, where every role but a superuser was refused the
    shards: an administrator and a reader see every owner's schedules and runs, a role limited to
    its own schedules only its own (row security, with the caller carried to the worker nodes),
    and no view it was not granted (cronbox.pools), nor any other relation, through read_view.
    A migrate that applies the view files again wraps them again."""
    migrate_citus(citus_bare, 4, distribute=True)
    for who in ("alice", "bob"):
        with logins.connect(citus_bare, who) as conn:
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *')", (f"{who}/job",))
            conn.execute("SELECT cronbox.trigger(%s)", (f"{who}/job",))
    with db.connect(citus_bare) as conn:
        for (bucket,) in conn.execute("SELECT DISTINCT bucket FROM cronbox.job").fetchall():
            conn.execute("SELECT cronbox.dispatch(100, p_bucket => %s)", (bucket,))
    for attempt in ("first", "after the view files applied again"):
        for who, jobs in (("admin", ["alice/job", "bob/job"]), ("reader", ["alice/job", "bob/job"]),
                          ("alice", ["alice/job"])):
            with logins.connect(citus_bare, who) as conn:
                conn.autocommit = True
                assert [r[0] for r in conn.execute("SELECT name FROM cronbox.schedules ORDER BY name")] == jobs, (who, attempt)
                assert [r[0] for r in conn.execute("SELECT job FROM cronbox.runs WHERE state <> 'waiting'"
                                                   " ORDER BY job")] == jobs, (who, attempt)
                for view in ("backfills", "run_minutes"):
                    conn.execute(f"SELECT count(*) FROM cronbox.{view}")
        with logins.connect(citus_bare, "alice") as conn:
            conn.autocommit = True
            for stmt in ("SELECT * FROM cronbox.pools", "SELECT * FROM cronbox.read_view(NULL::cronbox.pools_rows)",
                         "SELECT * FROM cronbox.read_view(NULL::cronbox.job)"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(stmt)
        with db.connect(citus_bare) as conn:
            conn.execute("DELETE FROM cronbox.schema_code")
        migrate_citus(citus_bare)


def test_citus_the_views_of_calendars_dependencies_definitions_fires_changes_and_queues_are_read_on_the_distributed_tables(
        citus_bare, logins):  # noqa: F811
    """cronbox.calendars, dependencies, schedule_definitions, upcoming_fires, schedule_changes and
    queues on the distributed tables (Citus refused their queries for every role: a local table
    joined with the distributed jobs, jobs joined on job_id alone, a job and its upstream in two
    buckets, a recursive CTE over every bucket), read through cronbox.read_view: an administrator
    and a reader see every owner's rows, a role limited to its own schedules its own, and not the
    dependencies nor the queues (not granted to it, as on one primary). Such a role excludes its own
    calendar's dates from its job (its link's policy let only administrators through before:
    Citus layer migration 0364)."""
    migrate_citus(citus_bare, 4, distribute=True)
    with logins.connect(citus_bare, "admin") as conn:
        conn.execute("SELECT cronbox.set_queue_limit('held', 1)")
    with logins.connect(citus_bare, "alice") as conn:
        conn.execute("SELECT cronbox.create_calendar('alice-days', dates => ARRAY['2030-12-25'::date])")
        conn.execute("SELECT cronbox.schedule('alice/job', cron => '0 0 1 1 *')")
        # her calendar on her job (refused on Citus before: the link's policy let only administrators through)
        conn.execute("SELECT cronbox.schedule('alice/days', cron => '0 0 * * *', starts_at => '2030-12-24', exclude => 'alice-days')")
        assert [r[0].date().isoformat() for r in conn.execute("SELECT * FROM cronbox.next_fires('alice/days', 2)")] == [
            "2030-12-24", "2030-12-26"]
        conn.execute("SELECT cronbox.schedule('alice/held', cron => '0 0 1 1 *', queue => 'held', overlap => 'allow')")
        for _ in range(2):  # the second waits for the queue's one slot
            conn.execute("SELECT cronbox.trigger('alice/held')")
    with logins.connect(citus_bare, "bob") as conn:
        conn.execute("SELECT cronbox.schedule('bob/job', cron => '0 0 1 1 *')")
    with logins.connect(citus_bare, "admin") as conn:
        conn.execute("SELECT cronbox.add_dependency('bob/job', 'alice/job')")
        conn.execute("SELECT cronbox.create_calendar('ops-days', dates => ARRAY['2030-12-25'::date])")
        conn.execute("SELECT cronbox.schedule('ops/job', cron => '0 0 1 1 *', exclude => 'ops-days')")
        conn.execute("SELECT cronbox.schedule('carol/after', after => ARRAY['alice/job', 'bob/job'])")
    every = ["alice/days", "alice/held", "alice/job", "bob/job", "carol/after", "ops/job"]
    for who, jobs in (("admin", every), ("reader", every), ("alice", ["alice/days", "alice/held", "alice/job"]),
                      ("bob", ["bob/job"])):
        with logins.connect(citus_bare, who) as conn:
            conn.autocommit = True
            calendars = conn.execute("SELECT name, used_by FROM cronbox.calendars ORDER BY name").fetchall()
            if who in ("admin", "reader"):
                assert calendars == [("alice-days", ["alice/days"]), ("ops-days", ["ops/job"])], (who, calendars)
                assert conn.execute("SELECT job, upstream, kind FROM cronbox.dependencies ORDER BY 1, 2").fetchall() == [
                    ("bob/job", "alice/job", "gate"), ("carol/after", "alice/job", "after"),
                    ("carol/after", "bob/job", "after")], who
                assert conn.execute("SELECT queue, due, blocked, running, max_running FROM cronbox.queues"
                                    " WHERE queue = 'held'").fetchall() == [("held", 0, 1, 1, 1)], who
            else:  # its own calendars, and its own jobs among their users
                assert calendars == ([("alice-days", ["alice/days"])] if who == "alice" else []), (who, calendars)
                for view in ("dependencies", "queues"):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(f"SELECT * FROM cronbox.{view}")
            assert [r[0] for r in conn.execute("SELECT name FROM cronbox.schedule_definitions ORDER BY name")] == jobs, who
            assert conn.execute("SELECT job, waiting_for FROM cronbox.upcoming_fires").fetchall() == (
                [] if who == "bob" else [("alice/held", "queue held")]), who
            changed = {r[0] for r in conn.execute("SELECT job FROM cronbox.schedule_changes")}
            assert changed <= set(jobs), (who, changed)
            if who in ("admin", "reader"):
                assert changed == set(every), (who, changed)


def test_citus_with_a_worker_node_down_an_owner_still_pauses_resumes_and_reschedules_its_jobs_on_the_other_node(
        citus_bare, pg, logins):  # noqa: F811
    """The caller carried to the worker nodes involves only the nodes a call reaches
    (cronbox.carry_caller makes the transaction a coordinated one without a lock on any node):
    with either worker node stopped, an owner limited to its own schedules pauses, resumes and
    reschedules its job whose bucket is on the other node; a call on a job of the stopped node,
    and a view (it reads every bucket), fail with a connection error (08006), the view's naming
    itself; everything answers again once the node is back."""
    migrate_citus(citus_bare, 4, distribute=True)
    with db.connect(citus_bare) as conn:
        on_node = {port: names[0] for port, names in jobs_by_node(conn, [n.port for n in pg.citus.workers], 1).items()}
    with logins.connect(citus_bare, "alice") as conn:
        for name in on_node.values():
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *')", (name,))
    for index, node in enumerate(pg.citus.workers):
        down = on_node[node.port]
        up = next(name for port, name in on_node.items() if port != node.port)
        pg.citus.stop_worker(index)
        try:
            with logins.connect(citus_bare, "alice") as conn:
                assert conn.execute("SELECT cronbox.pause(%s)", (up,)).fetchone()[0] is True
                assert conn.execute("SELECT cronbox.resume(%s)", (up,)).fetchone()[0] is True
                assert conn.execute("SELECT cronbox.pause(%s)", (up,)).fetchone()[0] is True
                conn.execute("SELECT cronbox.schedule(%s, cron => %s)", (up, f"0 0 {index + 2} 1 *"))
                with pytest.raises(psycopg.OperationalError) as refused:
                    conn.execute("SELECT cronbox.pause(%s)", (down,))
                assert refused.value.sqlstate == "08006", refused.value
                with pytest.raises(psycopg.OperationalError) as refused:
                    conn.execute("SELECT count(*) FROM cronbox.schedules")
                assert refused.value.sqlstate == "08006", refused.value
                assert "cronbox.schedules reads every bucket" in str(refused.value), refused.value
        finally:
            pg.citus.start_worker(index)
    with logins.connect(citus_bare, "alice") as conn:
        assert sorted(conn.execute("SELECT name, paused FROM cronbox.schedules").fetchall()) == sorted(
            (name, True) for name in on_node.values())
    with db.connect(citus_bare) as conn:
        assert sorted(conn.execute("SELECT cron FROM cronbox.job").fetchall()) == [("0 0 2 1 *",), ("0 0 3 1 *",)]


def test_citus_with_a_worker_node_down_an_administrator_pauses_resumes_and_unschedules_the_other_node_s_jobs(
        citus_bare, pg, logins):  # noqa: F811
    """Bulk pause and resume and unschedule on the distributed jobs: with every node up,
    pause_schedules and resume_schedules change the matching jobs of both nodes (refused before:
    their locks over several shards, 0A000). With a worker node stopped, they change the live
    node's matching jobs and a WARNING names the buckets of the stopped node, left as they are
    (before, 08006 and nothing done); unschedule removes a live node's job (before, its delete of
    the after-job edges, a reference table, reached the stopped node: 08006); once the node is
    back, the same pause reaches the rest."""
    migrate_citus(citus_bare, 4, distribute=True)
    ports = [n.port for n in pg.citus.workers]
    with db.connect(citus_bare) as conn:
        names = jobs_by_node(conn, ports, 3)
    up, down = names[ports[0]], names[ports[1]]
    every = sorted(up + down)
    warnings: list[str] = []
    with logins.connect(citus_bare, "admin") as conn:
        conn.autocommit = True
        conn.add_notice_handler(  # (Citus's own warnings about the node's connections left out)
            lambda d: warnings.append(f"{d.severity}: {d.message_primary}") if "_schedules: " in d.message_primary else None)
        for name in every:
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *', queue => 'q')", (name,))
        paused = lambda: sorted(r[0] for r in conn.execute("SELECT name FROM cronbox.schedules WHERE paused"))  # noqa: E731
        assert conn.execute("SELECT cronbox.pause_schedules(queue => 'q')").fetchone() == (6,)
        assert paused() == every
        assert conn.execute("SELECT cronbox.resume_schedules(name_like => 'node-%%')").fetchone() == (6,)
        assert paused() == [] and warnings == []
        pg.citus.stop_worker(1)
        try:
            assert conn.execute("SELECT cronbox.pause_schedules(queue => 'q')").fetchone() == (3,)
            assert len(warnings) == 1 and warnings[0].startswith("WARNING: pause_schedules: the schedules of buckets {"), warnings
            assert f":{ports[1]})" in warnings[0], warnings
            assert conn.execute("SELECT cronbox.resume_schedules(queue => 'q')").fetchone() == (3,)
            assert "resume_schedules: the schedules of buckets" in warnings[1], warnings
            assert conn.execute("SELECT cronbox.pause_schedules(queue => 'q')").fetchone() == (3,)
            assert conn.execute("SELECT cronbox.unschedule(%s)", (up[0],)).fetchone() == (True,)
            with pytest.raises(psycopg.OperationalError) as refused:
                conn.execute("SELECT cronbox.unschedule(%s)", (down[0],))
            assert refused.value.sqlstate == "08006", refused.value
        finally:
            pg.citus.start_worker(1)
        warnings.clear()
        assert conn.execute("SELECT cronbox.pause_schedules(queue => 'q')").fetchone() == (3,)  # the stopped node's
        assert warnings == []
        assert paused() == sorted(up[1:] + down)
    with db.connect(citus_bare) as conn:
        assert sorted(r[0] for r in conn.execute("SELECT name FROM cronbox.job")) == sorted(up[1:] + down)


def test_citus_an_admin_call_pushed_down_to_a_worker_node_with_a_query_over_the_jobs_is_refused_clearly(
        citus_bare):
    """`SELECT cronbox.pause(name) FROM cronbox.job` on the distributed jobs: Citus sends the call
    with the query to the worker nodes, where it failed with a missing function; it is refused
    there with 0A000 saying where cronbox's functions run and the way round, which works: the
    names read from a view on the coordinator."""
    migrate_citus(citus_bare, 4, distribute=True)
    with db.connect(citus_bare) as conn:
        conn.autocommit = True
        for name in ("a/job", "b/job"):
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *')", (name,))
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            conn.execute("SELECT cronbox.pause(name) FROM cronbox.job")
        assert "run on the Citus coordinator, not on a worker node" in str(refused.value), refused.value
        assert "FROM cronbox.schedules" in refused.value.diag.message_hint, refused.value.diag.message_hint
        assert conn.execute("SELECT count(*) FROM cronbox.job WHERE paused").fetchone() == (0,)
        assert conn.execute("SELECT cronbox.pause(name) FROM cronbox.schedules").fetchall() == [(True,), (True,)]


def test_citus_two_roles_in_one_transaction_are_refused_with_a_hint_naming_the_cause_and_the_way_out(citus_bare):
    """On the distributed tables a report call (cronbox_runner) then an administration call or a
    view (cronbox_owner) on the same rows in one transaction is refused by Citus (25001, placements
    modified by a different user); the error now carries a hint naming the two kinds of call and
    the way out, and each call in its own transaction works."""
    migrate_citus(citus_bare, 4, distribute=True)
    with db.connect(citus_bare) as conn:
        conn.autocommit = True
        conn.execute("SELECT cronbox.schedule('a/job', cron => '0 0 1 1 *', overlap => 'allow')")
        bucket = conn.execute("SELECT cronbox.bucket_of('a/job')").fetchone()[0]
        for _ in range(2):
            conn.execute("SELECT cronbox.trigger('a/job')")
        conn.execute("SELECT cronbox.dispatch(100, p_bucket => %s)", (bucket,))
        runs = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.outbox WHERE bucket = %s ORDER BY run_id", (bucket,))]
        assert len(runs) == 2, runs
        for run_id, second in zip(runs, ("SELECT cronbox.pause('a/job')", "SELECT count(*) FROM cronbox.runs")):
            with pytest.raises(psycopg.errors.ActiveSqlTransaction) as refused:
                with conn.transaction():
                    conn.execute("SELECT cronbox.complete_run(%s)", (run_id,))
                    conn.execute(second)
            hint = refused.value.diag.message_hint or ""
            assert "run each in its own transaction" in hint and "cronbox_runner" in hint, (second, refused.value, hint)
            conn.execute("SELECT cronbox.complete_run(%s)", (run_id,))
            conn.execute(second)


def _dead_letter_everything(conn: psycopg.Connection, kind: str) -> int:
    """Claims every outbox row of `kind` (relay 'r1') and fails it for good: dead letters."""
    ids = [r[0] for r in conn.execute(
        "SELECT outbox_id FROM cronbox.claim_outbox('r1', 100, '30 seconds', NULL, NULL, '0', NULL, false)"
        " WHERE kind = %s", (kind,))]
    conn.execute("SELECT cronbox.nack_outbox('r1', %s, %s, %s, NULL, 10, '1 second', '1 minute', NULL)",
                 (ids, ["HTTP 410"] * len(ids), [False] * len(ids)))
    return len(ids)


def test_citus_redrive_puts_dead_runs_and_notifications_of_buckets_on_both_nodes_back(citus_bare, pg, logins):  # noqa: F811
    """cronbox.redrive on the distributed tables (refused there: a correlated subquery beside its
    CTEs, and its runs' jobs locked over several shards): the dead letters of runs of jobs in
    buckets on both worker nodes, and of their failure notifications, go back into the outbox,
    by id and then every one, the runs dispatched again, bucket by bucket."""
    migrate_citus(citus_bare, 4, distribute=True)
    with db.connect(citus_bare) as conn:
        names = sorted(n[0] for n in jobs_by_node(conn, [n.port for n in pg.citus.workers], 1).values())
        for name in names:
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *')", (name,))
            conn.execute("SELECT cronbox.trigger(%s)", (name,))
        assert _dead_letter_everything(conn, "run") == 2
        assert _dead_letter_everything(conn, "notification") == 2  # each run's run_failed
        runs = dict(conn.execute("SELECT job, run_id FROM cronbox.runs").fetchall())
        assert conn.execute("SELECT kind, count(*) FROM cronbox.dead_letters GROUP BY 1 ORDER BY 1").fetchall() == [
            ("notification", 2), ("run", 2)]
        first = conn.execute("SELECT dead_letter_id FROM cronbox.dead_letters WHERE run_id = %s",
                             (runs[names[0]],)).fetchone()[0]
    with logins.connect(citus_bare, "admin") as conn:
        assert conn.execute("SELECT cronbox.redrive(%s)", (first,)).fetchone()[0] == 1
        assert conn.execute("SELECT state FROM cronbox.runs WHERE run_id = %s", (runs[names[0]],)).fetchone() == (
            "dispatched",)
        assert conn.execute("SELECT cronbox.redrive(everything => true)").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM cronbox.dead_letters").fetchone()[0] == 0
        assert sorted(conn.execute("SELECT job, state FROM cronbox.runs").fetchall()) == [
            (name, "dispatched") for name in names]
    with db.connect(citus_bare) as conn:
        back = conn.execute("SELECT kind, bucket FROM cronbox.outbox ORDER BY kind, bucket").fetchall()
        buckets = sorted(conn.execute("SELECT bucket FROM cronbox.job").fetchall())
        assert [b for k, b in back if k == "run"] == [b for (b,) in buckets]
        # each notification back in its job's bucket
        assert [b for k, b in back if k == "notification"] == [b for (b,) in buckets]


def test_citus_a_relay_and_a_poller_start_with_a_worker_node_down_and_take_its_buckets_when_it_returns(
        pg: Server, distributed_dsn: str, tmp_path: Path):
    """On the distributed tables, with one worker node stopped before they start: a relay whose
    routes name each queue (no default route: its start-up check reads every queue, bucket by
    bucket) starts, delivers the live node's waiting runs and, once the node is back, the stopped
    node's, none lost, no dead letter; a poller starts and saturates the live node's new job, and
    the stopped node's once it is back. Before, the relay refused to start (its check read every
    bucket in one statement: 08006)."""
    from .relay_support import ThreadedWorker, enqueue

    ports = [node.port for node in pg.citus.workers]
    with db.connect(dsn := distributed_dsn) as conn:
        names = jobs_by_node(conn, ports, 2)
        (up, up_new), (down, down_new) = names[ports[0]], names[ports[1]]
        runs = {name: enqueue(conn, 5, queue="q", job=name) for name in (up, down)}
        for name in (up_new, down_new):  # not saturated yet: no poller has run
            conn.execute("SELECT cronbox.schedule(%s, every => interval '1 minute', queue => 'q')", (name,))
        bucket = {n: conn.execute("SELECT cronbox.bucket_of(%s)", (n,)).fetchone()[0] for n in (up, down, up_new, down_new)}

    def futures(name: str) -> int:  # read on the job's shard alone
        with db.connect(dsn) as conn:
            return conn.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j ON j.bucket = f.bucket"
                                " AND j.job_id = f.job_id WHERE j.bucket = %s AND j.name = %s",
                                (bucket[name], name)).fetchone()[0]

    with ThreadedWorker() as worker:
        pg.citus.stop_worker(1)
        try:
            with Proc("relay", dsn, tmp_path, CRONBOX_SINKS=f"q={worker.url}") as relay, \
                    Proc("poller", dsn, tmp_path) as poller:
                wait_until(lambda: outbox_states(dsn, bucket[up]) == {"delivered": 5}, timeout=60,
                           what=f"the live node's runs delivered with the other node down:\n{relay.output[-2000:]}")
                assert relay.popen.poll() is None
                assert "not checked yet" in relay.output
                wait_until(lambda: futures(up_new) > 0, timeout=60,
                           what=f"the live node's new job saturated:\n{poller.output[-2000:]}")
                pg.citus.start_worker(1)
                wait_until(lambda: outbox_states(dsn, bucket[down]) == {"delivered": 5}, timeout=60,
                           what="the stopped node's runs delivered once it is back")
                wait_until(lambda: futures(down_new) > 0, timeout=60, what="the stopped node's new job saturated")
                assert relay.terminate() == 0, relay.output
                assert poller.terminate() == 0, poller.output
        finally:
            pg.citus.start_worker(1)
    delivered = {m["run_id"] for r in worker.received for m in r.messages}
    assert delivered == set(runs[up]) | set(runs[down])
    with db.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM cronbox.dead_letters").fetchone() == (0,)


def test_citus_status_reads_every_section_on_the_distributed_tables(pg: Server, distributed_dsn: str, logins):  # noqa: F811
    """`cronbox status` (as a reader) on the distributed tables: schedules of buckets on both
    worker nodes, one paused, a pool with a fire waiting for it, every section answered (it exited
    with an error before: the pools view's lateral join from the pools, a reference table, into
    the distributed futures, refused by Citus)."""
    from .test_ops_status import _status

    ports = [node.port for node in pg.citus.workers]
    with db.connect(distributed_dsn) as conn:
        conn.autocommit = True
        names = sorted(n[0] for n in jobs_by_node(conn, ports, 1).values())
        for name in names:
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (name,))
        conn.execute("SELECT cronbox.pause(%s, 'deploy')", (names[0],))
        conn.execute("SELECT cronbox.set_pool('gpu', 0)")
        conn.execute("SELECT cronbox.schedule('pooled/job', cron => '0 0 1 1 *', needs => '{\"gpu\": 1}')")
        conn.execute("SELECT cronbox.trigger('pooled/job')")
        bucket = conn.execute("SELECT cronbox.bucket_of('pooled/job')").fetchone()[0]
        conn.execute("SELECT cronbox.dispatch(100, p_bucket => %s)", (bucket,))
    doc = orjson.loads(_status(logins.dsn(distributed_dsn, "reader"), "--json"))
    assert [(p["name"], p["waiting"]) for p in doc["pools"]] == [("gpu", 1)], doc["pools"]
    names = sorted([*names, "pooled/job"])
    assert sorted(s["name"] for s in doc["schedules"]) == names
    assert [p["paused_reason"] for p in doc["paused"]] == ["deploy"]
    assert doc.get("unavailable", []) in ([], {}), doc.get("unavailable")
