"""Tenants: queues granted to owner and worker roles, per-owner quotas, bulk pause/resume
(docs/operations.md, "Tenants"), tested by logging in as each role (tests/roles.py) and, for
the worker limits, role by role over every worker function, as the row-security matrix does."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cronbox import db

from .roles import PASSWORD, logins  # noqa: F401  (fixture)

# extra login roles of this module: two limited workers and one with no grant
WORKERS = ("wa", "wb", "wfree")


@pytest.fixture(scope="module")
def workers(pg, logins) -> Iterator[dict[str, str]]:  # noqa: F811
    names = {w: f"{logins.prefix}_{w}" for w in WORKERS}
    with db.connect(pg.admin_dsn) as su:
        for name in names.values():
            su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
            su.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE cronbox_worker").format(
                sql.Identifier(name), sql.Literal(PASSWORD)))
    try:
        yield names
    finally:
        with db.connect(pg.admin_dsn) as su:
            for name in names.values():
                su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def _run_of(su, job: str) -> int:
    su.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, origin, bucket) "
               "SELECT job_id, clock_timestamp(), now() - interval '1 minute', 'manual', bucket "
               "FROM cronbox.job WHERE name = %s", (job,))  # in the job's bucket, as every row of a job
    su.execute("SELECT cronbox.dispatch(100)")
    return su.execute("SELECT max(run_id) FROM cronbox.runs WHERE job = %s", (job,)).fetchone()[0]


# --- owner grants ------------------------------------------------------------------------
def test_a_granted_queue_takes_schedules_and_triggers_of_its_grantees_only(fresh_dsn, logins):  # noqa: F811
    alice, bob = logins.name("alice"), logins.name("bob")
    with logins.connect(fresh_dsn, "bob") as c:  # before any grant: open, as in a single-tenant setup
        c.execute("SELECT cronbox.schedule('bob_early', every => '1 hour', queue => 'qa')")
    with logins.connect(fresh_dsn, "admin") as c:
        assert c.execute("SELECT cronbox.grant_queue('qa', %s)", (alice,)).fetchone()[0] is True
        assert c.execute("SELECT cronbox.grant_queue('qa', %s)", (alice,)).fetchone()[0] is False
        assert c.execute("SELECT queue, role, kind FROM cronbox.queue_grants").fetchall() == [("qa", alice, "owner")]
    with logins.connect(fresh_dsn, "alice") as c:
        c.execute("SELECT cronbox.schedule('alice_job', every => '1 hour', queue => 'qa')")
        assert c.execute("SELECT cronbox.trigger('alice_job')").fetchone()[0] > 0
    with logins.connect(fresh_dsn, "bob") as c:
        for stmt in ("SELECT cronbox.schedule('bob_job', every => '1 hour', queue => 'qa')",
                     "SELECT cronbox.schedule('bob_early', every => '2 hours', queue => 'qa')",
                     "SELECT cronbox.trigger('bob_early')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
                c.execute(stmt)
            assert err.value.diag.message_primary.startswith("queue: queue 'qa' is not granted to role")
        c.execute("SELECT cronbox.schedule('bob_job', every => '1 hour', queue => 'qb')")  # open queue
    with logins.connect(fresh_dsn, "admin") as c:  # an administrator is not limited
        c.execute("SELECT cronbox.schedule('admin_job', every => '1 hour', queue => 'qa')")
        assert c.execute("SELECT cronbox.revoke_queue('qa', %s)", (alice,)).fetchone()[0] is True
    with logins.connect(fresh_dsn, "bob") as c:  # the last grant gone: open again
        c.execute("SELECT cronbox.trigger('bob_early')")
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT name, every FROM cronbox.job WHERE name LIKE 'bob%%' ORDER BY 1").fetchall() == [
            ("bob_early", __import__("datetime").timedelta(hours=1)), ("bob_job", __import__("datetime").timedelta(hours=1))]
        assert su.execute("SELECT count(*) FROM cronbox.job_change WHERE job_name = 'bob_early' "
                          "AND action = 'triggered'").fetchone()[0] == 1


@pytest.mark.parametrize("args, state", [
    (("qa", None, "owner"), "22004"), (("qa", "cronbox_admin", "owner"), "22023"),
    (("qa", "no_such_role_x", "owner"), "P0002"), (("bad queue", "postgres_x", "owner"), "22023"),
    (("qa", "postgres", "boss"), "22023"), ((None, "postgres", "owner"), "22004"), (("cronbox.notifications", "postgres", "owner"), "22023"),
])
def test_grant_queue_refuses_bad_arguments_before_writing(conn, args, state):
    conn.execute("SAVEPOINT s")
    with pytest.raises(psycopg.Error) as err:
        conn.execute("SELECT cronbox.grant_queue(%s, %s, %s)", args)
    assert err.value.sqlstate == state
    conn.execute("ROLLBACK TO SAVEPOINT s")
    assert conn.execute("SELECT count(*) FROM cronbox.queue_grant").fetchone()[0] == 0


# --- worker grants, role by role ------------------------------------------------------------
WORKER_CALLS = {
    "start_run": "SELECT cronbox.start_run({run}, 'w')",
    "heartbeat": "SELECT cronbox.heartbeat({run}, 'w')",
    "complete_run": "SELECT cronbox.complete_run({run})",
    "fail_run": "SELECT cronbox.fail_run({run}, 'boom', false)",
    "complete_runs": "SELECT * FROM cronbox.complete_runs(ARRAY[{run}]::bigint[])",
    "fail_runs": "SELECT * FROM cronbox.fail_runs(ARRAY[{run}]::bigint[], ARRAY['boom'])",
}
# who may work which queue: wa has qa, wb has qb, wfree has no grant (open queue qc only),
# the process and the admin-less plain worker role of tests/roles.py likewise
MAY = {"wa": {"qa"}, "wb": {"qb"}, "wfree": {"qc"}, "worker": {"qc"}, "process": {"qa", "qb", "qc"}}


def _connect(fresh_dsn, logins, workers, who):  # noqa: F811
    if who in workers:
        info = psycopg.conninfo.conninfo_to_dict(fresh_dsn)
        info.update(user=workers[who], password=PASSWORD)
        return db.connect(psycopg.conninfo.make_conninfo(**info))
    return logins.connect(fresh_dsn, who)


@pytest.mark.parametrize("who", sorted(MAY))
def test_a_worker_limited_to_queues_works_and_lists_only_those(fresh_dsn, logins, workers, who):  # noqa: F811
    with db.connect(fresh_dsn) as su:
        for q in ("qa", "qb", "qc"):
            su.execute("SELECT cronbox.schedule(%s, every => '1 hour', queue => %s, overlap => 'allow')",
                       (f"job_{q}", q))
        su.execute("SELECT cronbox.grant_queue('qa', %s, kind => 'worker')", (workers["wa"],))
        su.execute("SELECT cronbox.grant_queue('qb', %s, kind => 'worker')", (workers["wb"],))
        runs = {(fn, q): _run_of(su, f"job_{q}") for fn in [*WORKER_CALLS, "start_runs", "start_runs_batch", "claim_runs"]
                for q in ("qa", "qb", "qc")}
    with _connect(fresh_dsn, logins, workers, who) as c:
        for q in ("qa", "qb", "qc"):
            allowed = q in MAY[who]
            for fn, stmt in WORKER_CALLS.items():
                run = runs[(fn, q)]
                try:
                    c.execute(stmt.format(run=run))
                    assert allowed, (who, fn, q)
                except psycopg.errors.NoDataFound as err:
                    assert not allowed, (who, fn, q, str(err))
                    assert "no run" in err.diag.message_primary
            # a batch's refusal is its row's: the same rule, run by run
            code, error = c.execute("SELECT code, error FROM cronbox.start_runs(ARRAY[%s]::bigint[], 'w')",
                                    (runs[("start_runs", q)],)).fetchone()
            assert (code is None) == allowed and (allowed or "no run" in error), (who, q, code, error)
            try:
                got = c.execute("SELECT run_id FROM cronbox.claim_runs(%s, 'w', 10)", (q,)).fetchall()
                assert allowed and got, (who, q)
            except psycopg.errors.InsufficientPrivilege as err:
                assert not allowed, (who, q)
                assert err.diag.message_primary.startswith(f"queue: queue '{q}' is not granted")
        # one batch over the three queues: each row answered by its own run's queue
        batch = [runs[("start_runs_batch", q)] for q in ("qa", "qb", "qc")]
        rows = c.execute("SELECT run_id, code, error FROM cronbox.start_runs(%s, 'w')", (batch,)).fetchall()
        assert [(r[0], r[1]) for r in rows] == [(run, None if q in MAY[who] else "P0002")
                                               for run, q in zip(batch, ("qa", "qb", "qc"))], (who, rows)
        listed = {r[0] for r in c.execute("SELECT cronbox.search_schedules('job_')")}
        assert listed == {f"job_{q}" for q in MAY[who]}
        queues = {r[0] for r in c.execute("SELECT queue FROM cronbox.unfinished_runs()")}
        assert queues <= MAY[who]
    with db.connect(fresh_dsn) as su:  # nothing of a forbidden queue changed
        for (fn, q), run in runs.items():
            state = su.execute("SELECT state FROM cronbox.runs WHERE run_id = %s", (run,)).fetchone()[0]
            if q not in MAY[who]:
                assert state == "dispatched", (who, fn, q, state)


def test_queue_grants_are_read_by_administrators_and_readers_and_by_no_one_else(fresh_dsn, logins):  # noqa: F811
    """On Citus too, where the grants are a reference table read through its shard."""
    alice, worker = logins.name("alice"), logins.name("worker")
    with logins.connect(fresh_dsn, "admin") as c:
        c.execute("SELECT cronbox.grant_queue('qa', %s)", (alice,))
        c.execute("SELECT cronbox.grant_queue('qw', %s, kind => 'worker')", (worker,))
    expected = [("qa", alice, "owner", True), ("qw", worker, "worker", True)]
    for who in ("admin", "reader"):
        with logins.connect(fresh_dsn, who) as c:
            assert c.execute("SELECT queue, role, kind, role_exists FROM cronbox.queue_grants"
                             " ORDER BY queue").fetchall() == expected, who
    with logins.connect(fresh_dsn, "alice") as c:  # an owner role: not even its own grants
        assert c.execute("SELECT count(*) FROM cronbox.queue_grants").fetchone()[0] == 0
    with logins.connect(fresh_dsn, "worker") as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
        c.execute("SELECT count(*) FROM cronbox.queue_grants")
    with logins.connect(fresh_dsn, "admin") as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
        c.execute("SELECT count(*) FROM cronbox.queue_grant")  # the table itself stays the owner's


# --- quotas --------------------------------------------------------------------------------
def test_quota_refuses_schedules_past_count_priority_and_rate(fresh_dsn, logins):  # noqa: F811
    alice = logins.name("alice")
    with logins.connect(fresh_dsn, "alice") as c:
        c.execute("SELECT cronbox.schedule('a0', cron => '0 * * * *')")
    with logins.connect(fresh_dsn, "admin") as c:
        assert c.execute("SELECT cronbox.set_quota(%s, max_schedules => 3, max_fires_per_second => 1, "
                         "top_priority => 10)", (alice,)).fetchone()[0] == 1
    with logins.connect(fresh_dsn, "alice") as c:
        def refused(stmt: str, field: str) -> None:
            with pytest.raises(psycopg.errors.ConfigurationLimitExceeded) as err:
                c.execute(stmt)
            assert err.value.diag.message_primary.startswith(field + ":"), err.value.diag.message_primary
        refused("SELECT cronbox.schedule('a1', every => '1 hour', priority => 5)", "priority")
        c.execute("SELECT cronbox.schedule('a1', every => '3 seconds', priority => 10)")
        refused("SELECT cronbox.schedule('a2', every => '1 second', priority => 10)", "every")
        refused("SELECT cronbox.schedule('a2', cron => '* * * * * *', priority => 10)", "cron")
        c.execute("SELECT cronbox.schedule('a2', every => '2 seconds', priority => 10)")       # 1/3 + 1/2 + hourly
        c.execute("SELECT cronbox.schedule('a2', every => '3 seconds', priority => 10)")       # an update: its old rate goes
        refused("SELECT cronbox.schedule('a3', at => now() + interval '1 hour', priority => 10)", "name")  # 4th schedule
        c.execute("SELECT cronbox.unschedule('a0')")
        c.execute("SELECT cronbox.schedule('a3', at => now() + interval '1 hour', priority => 10)")
        row = c.execute("SELECT count(*) FROM cronbox.schedules").fetchone()
        assert row[0] == 3
    with logins.connect(fresh_dsn, "admin") as c:
        q = c.execute("SELECT schedules, max_schedules, fires_per_second, top_priority FROM cronbox.quotas").fetchone()
        assert q[0] == 3 and q[1] == 3 and float(q[2]) == pytest.approx(2 / 3, abs=1e-3) and q[3] == 10
        assert c.execute("SELECT cronbox.set_quota(%s)", (alice,)).fetchone()[0] == 3  # all NULL: removed
        assert c.execute("SELECT count(*) FROM cronbox.quotas").fetchone()[0] == 0


def test_manual_fires_past_the_rate_wait_their_turn(conn):
    conn.execute("SELECT cronbox.schedule('m', every => '1 hour', overlap => 'allow')")
    owner = conn.execute("SELECT owner FROM cronbox.job WHERE name = 'm'").fetchone()[0]
    conn.execute("INSERT INTO cronbox.owner_quota (owner, max_fires_per_second, updated_by, updated_at) "
                 "VALUES (%s, 2, 'test', now())", (owner,))
    for _ in range(6):
        conn.execute("SELECT cronbox.trigger('m')")
    dues = [r[0] for r in conn.execute(
        "SELECT round(extract(epoch FROM due_at - now())::numeric, 3) FROM cronbox.job_future "
        "WHERE origin = 'manual' ORDER BY due_at")]
    # a second's worth (2) went at once (dispatched: no future left), the rest spaced 0.5 s apart
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'm'").fetchone()[0] == 2
    assert [float(d) for d in dues] == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize("args, state", [
    ((None, 1, None, None), "22004"), (("no_such_role_x", 1, None, None), "P0002"),
    (("cronbox_user", 1, None, None), "22023"), (("postgres", -1, None, None), "22023"),
    (("postgres", None, 0, None), "22023"), (("postgres", None, "NaN", None), "22023"),
    (("postgres", None, 100001, None), "22023"), (("postgres", None, None, 40000), "22023"),
])
def test_set_quota_refuses_bad_arguments_before_writing(conn, args, state):
    conn.execute("SAVEPOINT s")
    with pytest.raises(psycopg.Error) as err:
        conn.execute("SELECT cronbox.set_quota(%s, %s, %s::numeric, %s)", args)
    assert err.value.sqlstate == state
    conn.execute("ROLLBACK TO SAVEPOINT s")
    assert conn.execute("SELECT count(*) FROM cronbox.owner_quota").fetchone()[0] == 0


# --- bulk pause and resume -------------------------------------------------------------------
def test_bulk_pause_and_resume_by_queue_owner_and_pattern(fresh_dsn, logins):  # noqa: F811
    with logins.connect(fresh_dsn, "alice") as c:
        for i in range(30):
            c.execute("SELECT cronbox.schedule(%s, every => '1 minute', queue => %s)",
                      (f"bill-{i:02}", "billing" if i % 2 else "mail"))
    with logins.connect(fresh_dsn, "bob") as c:
        c.execute("SELECT cronbox.schedule('bill-bob', every => '1 minute', queue => 'billing')")
        c.execute("SELECT cronbox.schedule('other', every => '1 minute', queue => 'billing')")
        # a user pauses only its own, whatever the filter says
        assert c.execute("SELECT cronbox.pause_schedules(queue => 'billing')").fetchone()[0] == 2
        assert c.execute("SELECT cronbox.resume_schedules(name_like => 'bill-%%')").fetchone()[0] == 1
    with db.connect(fresh_dsn) as su:
        su.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, now() + interval "
                   "'1 minute', now() + interval '1 minute' FROM cronbox.job WHERE NOT paused")
    with logins.connect(fresh_dsn, "admin") as c:
        n = c.execute("SELECT cronbox.pause_schedules(queue => 'billing', owner => %s, reason => 'incident')",
                      (logins.name("alice"),)).fetchone()[0]
        assert n == 15
        assert c.execute("SELECT cronbox.pause_schedules(name_like => 'bill-0%%')").fetchone()[0] == 5  # 00..09 not yet paused: 5 mail
        assert c.execute("SELECT count(*) FROM cronbox.schedules WHERE paused").fetchone()[0] == 21
        assert c.execute("SELECT count(*) FROM cronbox.schedule_changes WHERE action = 'paused' "
                         "AND reason = 'incident'").fetchone()[0] == 15
        with pytest.raises(psycopg.errors.NullValueNotAllowed):
            c.execute("SELECT cronbox.pause_schedules()")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            c.execute("SELECT cronbox.pause_schedules(name_like => 'x\\')")
    with db.connect(fresh_dsn) as su:
        # paused jobs lost their pending scheduled fires; the others kept theirs
        assert su.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                          "WHERE j.paused").fetchone()[0] == 0
        assert su.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                          "WHERE NOT j.paused").fetchone()[0] >= 11
    with logins.connect(fresh_dsn, "admin") as c:
        assert c.execute("SELECT cronbox.resume_schedules(owner => %s)", (logins.name("alice"),)).fetchone()[0] == 20
        assert c.execute("SELECT count(*) FROM cronbox.schedules WHERE paused").fetchone()[0] == 1  # bob's 'other'
        assert c.execute("SELECT count(*) FROM cronbox.schedule_changes WHERE action = 'resumed'").fetchone()[0] == 21


def test_backfill_keeps_to_the_queue_grant_and_the_top_priority(fresh_dsn, logins):  # noqa: F811
    alice = logins.name("alice")
    with logins.connect(fresh_dsn, "bob") as c:
        c.execute("SELECT cronbox.schedule('bob_b', every => '1 hour', queue => 'qa')")
    with logins.connect(fresh_dsn, "alice") as c:
        c.execute("SELECT cronbox.schedule('alice_b', every => '1 hour', queue => 'qa', priority => 10, "
                  "starts_at => date_trunc('hour', now()) - interval '1 day', catchup => 'skip')")
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.grant_queue('qa', %s)", (alice,))
        su.execute("SELECT cronbox.set_quota(%s, top_priority => 10)", (alice,))
    backfill = "SELECT cronbox.backfill(%s, now() - interval '3 hours', now(), priority => %s)"
    with logins.connect(fresh_dsn, "bob") as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(backfill, ("bob_b", 0))
    with logins.connect(fresh_dsn, "alice") as c:
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded):
            c.execute(backfill, ("alice_b", 9))
        c.execute(backfill, ("alice_b", 10))
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT count(*) FROM cronbox.backfill").fetchone()[0] == 1


def test_rerun_keeps_to_the_queue_grant_and_waits_past_the_rate(fresh_dsn, logins):  # noqa: F811
    alice = logins.name("alice")
    with logins.connect(fresh_dsn, "bob") as c:
        c.execute("SELECT cronbox.schedule('bob_r', every => '1 hour', queue => 'qa', overlap => 'allow')")
    with logins.connect(fresh_dsn, "alice") as c:
        c.execute("SELECT cronbox.schedule('alice_r', every => '1 hour', queue => 'qa', overlap => 'allow')")
    with db.connect(fresh_dsn) as su:
        bob_run, alice_run = _run_of(su, "bob_r"), _run_of(su, "alice_r")
        su.execute("SELECT cronbox.complete_run(%s)", (bob_run,))
        su.execute("SELECT cronbox.complete_run(%s)", (alice_run,))
        su.execute("SELECT cronbox.grant_queue('qa', %s)", (alice,))
        su.execute("SELECT cronbox.set_quota(%s, max_fires_per_second => 1)", (alice,))
    with logins.connect(fresh_dsn, "bob") as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT cronbox.rerun(%s)", (bob_run,))
    with logins.connect(fresh_dsn, "alice") as c:
        assert c.execute("SELECT cronbox.trigger('alice_r')").fetchone()[0] > 0  # the second's worth
        assert c.execute("SELECT cronbox.rerun(%s)", (alice_run,)).fetchone()[0] is None  # waits its turn
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT due_at > now() FROM cronbox.job_future WHERE origin = 'rerun'").fetchone()[0] is True
