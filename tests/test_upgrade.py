"""Upgrades from a released schema: a database populated by an earlier release (its dump in
tests/releases/, made by tests/release_db.py) is migrated by today's code with its runs in
flight, and nothing is lost, moved or run twice: every run keeps its id, job, attempt, state,
lease and worker; waiting messages are still delivered once; workers' reports by run id land
where the runs now live; finished runs, late reports and dead letters stay as they were."""

from __future__ import annotations

import gzip
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cronbox.migrate import migrate
from cronbox.pgcluster import find_bindir

from .conftest import Server, with_db
from .release_db import RELEASES

DUMPS = sorted(RELEASES.glob("*.sql.gz"))

# What a run is, whatever table holds it: compared before and after the migration.
RUN_COLUMNS = ("run_id", "job", "fire_at", "attempt", "state", "origin", "worker", "lease_until",
               "finished_at", "error", "result")


def test_a_release_dump_is_kept() -> None:
    assert DUMPS, f"no release dump in {RELEASES}: make one with python -m tests.release_db"


@pytest.fixture(params=DUMPS, ids=lambda p: p.name.removesuffix(".sql.gz"))
def released(request: pytest.FixtureRequest, pg: Server, template_dsn: str) -> Iterator[str]:
    """A database restored from a release's dump (the cronbox roles exist: the template's
    migration created them in this cluster), not yet migrated."""
    name = f"cronbox_release_{os.getpid()}"
    pg.drop_db(name)
    dsn = pg.create_db(name)
    proc = subprocess.run(
        [str(find_bindir() / "psql"), "--no-psqlrc", "--quiet", "-v", "ON_ERROR_STOP=1", "--dbname",
         with_db(pg.admin_dsn, name, empty_search_path=False)],
        input=gzip.decompress(request.param.read_bytes()), capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    yield dsn
    pg.drop_db(name)


def _runs(conn: psycopg.Connection) -> dict[int, dict[str, Any]]:
    cur = conn.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM cronbox.runs WHERE run_id IS NOT NULL")
    return {r[0]: dict(zip(RUN_COLUMNS, r)) for r in cur.fetchall()}


def _snapshot(conn: psycopg.Connection) -> dict[str, Any]:
    return {
        "runs": _runs(conn),
        "late": dict(conn.execute("SELECT run_id, late_report FROM cronbox.runs WHERE late_report IS NOT NULL")
                     .fetchall()),
        "dead": conn.execute("SELECT run_id, queue, job, attempts, last_error, message FROM cronbox.dead_letters ORDER BY run_id").fetchall(),
        "waiting": conn.execute("SELECT kind, queue, message FROM cronbox.outbox WHERE kind = 'notification'")
                   .fetchall(),
        "futures": conn.execute("SELECT j.name, f.fire_at, f.attempt, f.origin FROM cronbox.job_future f "
                                "JOIN cronbox.job j USING (job_id) ORDER BY 1, 2, 3").fetchall(),
    }


def _by_job(runs: dict[int, dict[str, Any]], job: str) -> list[dict[str, Any]]:
    return sorted((r for r in runs.values() if r["job"] == job), key=lambda r: r["run_id"])


def test_runs_in_flight_survive_the_upgrade_and_finish_once(released: str) -> None:
    with psycopg.connect(released, autocommit=True) as conn:
        before = _snapshot(conn)
    # The dump holds what the population promised, or the test would prove nothing.
    states = {r["state"] for r in before["runs"].values()}
    assert {"dispatched", "delivered", "running", "succeeded", "failed", "cancelled", "lost"} <= states, states
    assert before["late"] and before["dead"] and before["waiting"]

    migrate(released)

    with psycopg.connect(released, autocommit=True) as conn:
        after = _snapshot(conn)
        assert after == before

        runs = after["runs"]
        waiting = [r["run_id"] for r in _by_job(runs, "upgrade/waiting")]
        leased = [r["run_id"] for r in _by_job(runs, "upgrade/leased")]
        # Waiting messages and, once its relay lease (a day at most) has run out, those of a relay
        # that died with the old release, are delivered once each, with the run ids and
        # idempotency keys of their dispatch before the upgrade.
        claim = ("SELECT run_id, message->>'idempotency_key' FROM cronbox.claim_outbox_at(%s, 100, '1 minute', "
                 "ARRAY['up-waiting', 'up-leased'], p_now => now() + interval '2 days')")
        claimed = conn.execute(claim, ("relay-new",)).fetchall()
        assert sorted(r[0] for r in claimed) == sorted(waiting + leased)
        assert {k for _, k in claimed} == {f"{r}:1" for r in waiting + leased}
        assert conn.execute(claim, ("relay-other",)).fetchall() == []

        # A run a worker started before its relay's ack (releases since the in-flight runs moved
        # out of history keep it): its delivery was never acked, so once the old relay's lease
        # has run out it is sent again, as running, under its own lease (the kit drops the
        # duplicate), and its worker's report ends it once.
        for early in _by_job(runs, "upgrade/started-early"):
            assert (early["state"], early["worker"]) == ("running", "kit-push-2")
            resent = conn.execute(claim.replace("ARRAY['up-waiting', 'up-leased']", "ARRAY['up-started-early']"),
                                  ("relay-new",)).fetchall()
            assert resent == [(early["run_id"], f"{early['run_id']}:1")]
            assert _runs(conn)[early["run_id"]] == early
            assert conn.execute("SELECT cronbox.complete_run(%s, NULL)",
                                (early["run_id"],)).fetchone()[0] == "succeeded"

        # Reports by run id land on runs delivered, started and claimed before the upgrade.
        delivered = _by_job(runs, "upgrade/delivered")
        started = _by_job(runs, "upgrade/started")
        pulled = [r for r in _by_job(runs, "upgrade/pulled") if r["state"] == "running"]
        assert [r["state"] for r in delivered] == ["delivered", "delivered"]
        assert [(r["state"], r["worker"]) for r in started] == [("running", "kit-push-1")]
        assert len(pulled) == 2 and {r["worker"] for r in pulled} == {"kit-pull-1"}
        assert conn.execute("SELECT cronbox.complete_run(%s, '{\"after\": \"upgrade\"}'::jsonb)",
                            (started[0]["run_id"],)).fetchone()[0] == "succeeded"
        assert conn.execute("SELECT cronbox.heartbeat(%s)", (pulled[0]["run_id"],)).fetchone()[0] == "continue"
        assert conn.execute("SELECT cronbox.fail_run(%s, 'after upgrade', false)",
                            (pulled[1]["run_id"],)).fetchone()[0] == "failed"
        # A report of a run that had ended before the upgrade is a late report, never a second end.
        failed = next(r for r in _by_job(runs, "upgrade/finished") if r["error"] == "bad input")
        assert conn.execute("SELECT cronbox.complete_run(%s, NULL)", (failed["run_id"],)).fetchone()[0] == "failed"
        assert _runs(conn)[failed["run_id"]] == failed

        # The leases of runs delivered before the upgrade still run out into `lost`, once.
        lost = conn.execute("SELECT cronbox.reap_lost_at(1000, p_now => now() + interval '8 days')").fetchone()[0]
        assert lost == len(delivered) + 1  # the two delivered runs and the pulled one still running
        end = _runs(conn)
        assert [end[r["run_id"]]["state"] for r in delivered] == ["lost", "lost"]
        assert end[started[0]["run_id"]]["state"] == "succeeded"
        assert end[pulled[1]["run_id"]]["state"] == "failed"
        # History's trouble column, no longer generated (migration 0441): the values of the rows
        # from before the upgrade kept, those of the rows written since written by the inserts.
        assert conn.execute("SELECT count(*) FILTER (WHERE trouble IS DISTINCT FROM cronbox.run_trouble(state)), "
                            "count(trouble) FROM cronbox.run").fetchone()[0] == 0
        assert conn.execute("SELECT count(trouble) FROM cronbox.run WHERE run_id = ANY (%s)",
                            ([r["run_id"] for r in delivered],)).fetchone()[0] == len(delivered)
        # Nothing ran twice: each run id is one run, and no fire of the same job and attempt has two.
        fires = [(r["job"], r["fire_at"], r["attempt"]) for r in end.values()]
        assert len(fires) == len(set(fires))
        assert set(before["runs"]) <= set(end)
