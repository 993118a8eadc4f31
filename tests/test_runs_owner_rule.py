"""The owner rule on the report path: complete_run, complete_runs, fail_run, fail_runs, start_run
and heartbeat run as
cronbox_runner, a role the row-security policies let through (docs/architecture.md, "Row
security on the report path"), and apply the rule themselves. Every cronbox_worker and
cronbox_process member reports on every run, as before; a caller limited to its own schedules
(one that reaches the report functions through another role's SECURITY DEFINER function)
reports only on runs of jobs it owns: another owner's run, in flight or final, is an unknown run
to it (P0002 for one run, verdict not_found in a batch) and is left alone, exactly the answers
the policies gave."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from cronbox import db

from .roles import logins  # noqa: F401  (fixture)

# Wrappers a worker login owns and lends to alice (a cronbox_user): inside them the report
# functions see alice as the caller.
WRAPPERS = {
    "complete_one": ("run bigint", "text", "SELECT cronbox.complete_run(run)"),
    "fail_one": ("run bigint", "text", "SELECT cronbox.fail_run(run, 'boom', false)"),
    "start_one": ("run bigint", "timestamptz", "SELECT cronbox.start_run(run, 'w1')"),
    "beat_one": ("run bigint", "text", "SELECT cronbox.heartbeat(run, 'w1')"),
    "complete_many": ("runs bigint[]", "TABLE (run_id bigint, state text, verdict text)",
                      "SELECT * FROM cronbox.complete_runs(runs)"),
    "fail_many": ("runs bigint[]", "TABLE (run_id bigint, state text, verdict text)",
                  "SELECT * FROM cronbox.fail_runs(runs, array_fill('boom'::text, ARRAY[cardinality(runs)]), false)"),
    "claim_many": ("q text", "SETOF bigint", "SELECT run_id FROM cronbox.claim_runs(q, 'w9', 100)"),
}

# Process functions a process login owns and lends to alice: they run as cronbox_runner too and
# refuse a caller that may not act on every schedule.
PROCESS_WRAPPERS = {
    "dispatch_some": "SELECT dispatched FROM cronbox.dispatch(10)",
    "ahead_some": "SELECT count(*)::integer FROM cronbox.due_ahead('1 minute', 10)",
    "claim_some": "SELECT count(*)::integer FROM cronbox.claim_outbox('alice-relay', 10)",
    "ack_none": "SELECT cronbox.ack_outbox('alice-relay', '{}'::bigint[], NULL)::integer",
    "fold_some": "SELECT cronbox.fold_job_stats(10)",
}


def _runs(su, job: str, n: int) -> list[int]:
    su.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
               "SELECT job_id, bucket, now() - g * interval '1 minute', now() - g * interval '1 minute' "
               "FROM cronbox.job, generate_series(1, %s) g WHERE name = %s", (n, job))
    su.execute("SELECT cronbox.dispatch(100)")
    return [r[0] for r in su.execute("SELECT run_id FROM cronbox.runs WHERE job = %s ORDER BY run_id", (job,))]


def _state(su, run: int) -> str:
    return su.execute("SELECT state FROM cronbox.runs WHERE run_id = %s", (run,)).fetchone()[0]


@pytest.fixture
def lent(fresh_dsn, logins):  # noqa: F811
    """alice's and bob's runs (4 each, in flight) and a finished run of each; the wrappers."""
    for who in ("alice", "bob"):
        with logins.connect(fresh_dsn, who) as c:
            c.execute("SELECT cronbox.schedule(%s, every => '1 day', overlap => 'allow')", (f"{who}_job",))
    with db.connect(fresh_dsn) as su:
        runs = {who: _runs(su, f"{who}_job", 5) for who in ("alice", "bob")}
        for who in ("alice", "bob"):
            su.execute("SELECT cronbox.complete_run(%s)", (runs[who][-1],))
        su.execute("CREATE SCHEMA lend")
        su.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA lend TO {}").format(sql.Identifier(logins.name("worker"))))
        su.execute(sql.SQL("GRANT USAGE ON SCHEMA lend TO {}").format(sql.Identifier(logins.name("alice"))))
    with logins.connect(fresh_dsn, "worker") as w:
        for name, (args, returns, body) in WRAPPERS.items():
            w.execute(f"CREATE FUNCTION lend.{name}({args}) RETURNS {returns} LANGUAGE sql SECURITY DEFINER "
                      f"SET search_path = pg_catalog, pg_temp AS $$ {body} $$")
            w.execute(sql.SQL("GRANT EXECUTE ON FUNCTION lend.{} TO {}").format(
                sql.Identifier(name), sql.Identifier(logins.name("alice"))))
    with db.connect(fresh_dsn) as su:
        su.execute(sql.SQL("GRANT CREATE ON SCHEMA lend TO {}").format(sql.Identifier(logins.name("process"))))
        su.execute(sql.SQL("GRANT USAGE ON SCHEMA lend TO {}").format(sql.Identifier(logins.name("process"))))
    with logins.connect(fresh_dsn, "process") as p:
        for name, body in PROCESS_WRAPPERS.items():
            p.execute(f"CREATE FUNCTION lend.{name}() RETURNS integer LANGUAGE sql SECURITY DEFINER "
                      f"SET search_path = pg_catalog, pg_temp AS $$ {body} $$")
            p.execute(sql.SQL("GRANT EXECUTE ON FUNCTION lend.{} TO {}").format(
                sql.Identifier(name), sql.Identifier(logins.name("alice"))))
    return runs


def test_a_limited_caller_reports_its_own_runs_and_no_other_owners(fresh_dsn, logins, lent):  # noqa: F811
    mine, theirs = lent["alice"], lent["bob"]
    with logins.connect(fresh_dsn, "alice") as alice:
        for fn, run in (("complete_one", theirs[0]), ("fail_one", theirs[1]), ("start_one", theirs[2]),
                        ("beat_one", theirs[3]), ("complete_one", theirs[-1]), ("fail_one", theirs[-1]),
                        ("start_one", theirs[-1]), ("beat_one", theirs[-1])):  # in flight, then final
            with pytest.raises(psycopg.errors.NoDataFound) as err:
                alice.execute(f"SELECT lend.{fn}(%s)", (run,))
            assert err.value.diag.message_primary == f"run_id: no run {run}"
            alice.rollback()
        assert alice.execute("SELECT lend.start_one(%s)", (mine[0],)).fetchone()[0] is not None
        assert alice.execute("SELECT lend.beat_one(%s)", (mine[0],)).fetchone()[0] == "continue"
        assert alice.execute("SELECT lend.complete_one(%s)", (mine[0],)).fetchone()[0] == "succeeded"
        assert alice.execute("SELECT lend.fail_one(%s)", (mine[1],)).fetchone()[0] == "failed"
        # a batch: another owner's runs are not_found, in place; the caller's own are finished
        got = alice.execute("SELECT * FROM lend.complete_many(%s)",
                            ([theirs[2], mine[2], theirs[-1], mine[-1]],)).fetchall()
        assert got == [(theirs[2], None, "not_found"), (mine[2], "succeeded", "finished"),
                       (theirs[-1], None, "not_found"), (mine[-1], "succeeded", "late")]
        got = alice.execute("SELECT * FROM lend.fail_many(%s)", ([mine[3], theirs[3]],)).fetchall()
        assert got == [(mine[3], "failed", "finished"), (theirs[3], None, "not_found")]
        assert alice.execute("SELECT * FROM lend.complete_many(%s)", ([theirs[0], theirs[1]],)).fetchall() == [
            (theirs[0], None, "not_found"), (theirs[1], None, "not_found")]
    with db.connect(fresh_dsn) as su:
        assert [_state(su, r) for r in theirs] == ["dispatched"] * 4 + ["succeeded"]
        assert [_state(su, r) for r in mine] == ["succeeded", "failed", "succeeded", "failed", "succeeded"]
        assert su.execute("SELECT count(*) FROM cronbox.run_late_report WHERE run_id = ANY (%s)",
                          (theirs,)).fetchone()[0] == 0


def test_a_worker_reports_every_owners_runs_through_the_same_wrappers(fresh_dsn, logins, lent):  # noqa: F811
    with logins.connect(fresh_dsn, "worker") as w:
        assert w.execute("SELECT lend.complete_one(%s)", (lent["bob"][0],)).fetchone()[0] == "succeeded"
        assert w.execute("SELECT * FROM lend.fail_many(%s)", ([lent["alice"][0], lent["bob"][1]],)).fetchall() == [
            (lent["alice"][0], "failed", "finished"), (lent["bob"][1], "failed", "finished")]


def test_a_limited_caller_pulls_only_its_own_runs(fresh_dsn, logins, lent):  # noqa: F811
    """claim_runs runs as cronbox_runner and applies the owner rule to its walk: through a lent
    wrapper alice takes her runs in flight and none of bob's, as the policies let her."""
    mine, theirs = lent["alice"], lent["bob"]
    with logins.connect(fresh_dsn, "alice") as alice:
        got = [r[0] for r in alice.execute("SELECT * FROM lend.claim_many('default')")]
    assert sorted(got) == sorted(mine[:-1])
    with db.connect(fresh_dsn) as su:
        assert [_state(su, r) for r in mine] == ["running"] * 4 + ["succeeded"]
        assert [_state(su, r) for r in theirs] == ["dispatched"] * 4 + ["succeeded"]
    with logins.connect(fresh_dsn, "worker") as w:
        assert sorted(r[0] for r in w.execute("SELECT * FROM lend.claim_many('default')")) == sorted(theirs[:-1])


def test_a_limited_caller_cannot_run_the_process_functions_through_a_lent_wrapper(fresh_dsn, logins, lent):  # noqa: F811
    """Dispatch, the count of fires ahead, the relay's claim and ack and the fold run as cronbox_runner for the processes
    (all-seeing); a caller limited to its own schedules is refused, nothing written."""
    with db.connect(fresh_dsn) as su:
        su.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                   "SELECT job_id, bucket, now() - interval '1 hour', now() - interval '1 hour' FROM cronbox.job")
        before = su.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0]
    with logins.connect(fresh_dsn, "alice") as alice:
        for name in PROCESS_WRAPPERS:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
                alice.execute(f"SELECT lend.{name}()")
            assert "only a caller that may act on every schedule" in err.value.diag.message_primary
            alice.rollback()
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0] == before
        assert su.execute("SELECT count(*) FROM cronbox.outbox WHERE lease_owner = 'alice-relay'").fetchone()[0] == 0
    with logins.connect(fresh_dsn, "process") as p:
        assert p.execute("SELECT lend.dispatch_some()").fetchone()[0] == 2
