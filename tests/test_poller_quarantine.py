"""One bad job never stops the others: jobs in states no check of today would let in (as an
older version, a superuser or a bug might leave them), inserted straight into the tables next
to healthy canaries, with a real poller process. The canaries keep firing on time; each bad
job ends quarantined (paused with the error as the reason, in the change log, announced as a
notification) and the poller stays up and healthy.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, wait_until

NEXT_SECOND = "date_trunc('second', now()) + interval '1 second'"
# name -> the INSERT's column values as SQL (every column the poller reads; the rest default)
POISON = {
    # `every` so long that the next fire lies in year ~275,000: PostgreSQL holds it, Python cannot
    "huge_every": {"kind": "'every'", "every": "interval '100000000 days'",
                   "anchor": "now() + interval '100000000 days'", "frontier": "now()", "next_fire": "now()"},
    # a one-off before Christ
    "bc_at": {"kind": "'at'", "at": "'4713-01-01 BC'", "next_fire": "'4713-01-01 BC'"},
    # an infinite one-off
    "infinite_at": {"kind": "'at'", "at": "'infinity'", "next_fire": "now()"},
    # an expression the poller's parser refuses
    "bad_cron": {"kind": "'cron'", "cron": "'nonsense'", "cron_normalized": "'x y z'",
                 "frontier": "now()", "next_fire": "now()"},
    # a time zone that does not exist (any more)
    "gone_zone": {"kind": "'cron'", "cron": "'* * * * * *'", "cron_normalized": "'* * * * * * *'",
                  "timezone": "'Mars/Olympus_Mons'", "frontier": "now()", "next_fire": "now()"},
    # saturates fine, but dispatch overflows on its dependency's wait timeout (due_at + wait_timeout)
    "huge_wait": {"kind": "'every'", "every": "interval '1 second'",
                  "anchor": NEXT_SECOND, "frontier": "now()", "next_fire": "now()"},
    # saturates fine, but its jitter overflows the due time when the futures are stored
    "huge_jitter": {"kind": "'every'", "every": "interval '1 second'", "jitter": "interval '100000000 years'",
                    "anchor": NEXT_SECOND, "frontier": "now()", "next_fire": "now()"},
}


def insert_job(conn: psycopg.Connection, name: str, spec: dict[str, str]) -> None:
    cols = {"name": f"'{name}'", **spec}
    conn.execute(f"INSERT INTO cronbox.job ({', '.join(cols)}) VALUES ({', '.join(cols.values())})")


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def test_poisoned_jobs_are_quarantined_while_canaries_keep_firing_on_time(fresh_dsn: str, tmp_path: Path):
    with db.connect(fresh_dsn) as conn:
        for i in range(3):
            # no relay runs here: the canaries' runs stay dispatched, so they must not wait on them
            conn.execute("SELECT cronbox.schedule(%s, every => '1 second', overlap => 'allow')", (f"canary{i}",))
        for name, spec in POISON.items():
            insert_job(conn, name, spec)
        conn.execute("INSERT INTO cronbox.job_dependency (job_id, upstream_id, wait_timeout) "
                     "SELECT d.job_id, u.job_id, interval '100000000 years' FROM cronbox.job d, cronbox.job u "
                     "WHERE d.name = 'huge_wait' AND u.name = 'canary1'")
        # a manual fire due at infinity: the poller's "how long until the next one" arithmetic
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, origin) "
                     "SELECT job_id, 'infinity', 'infinity', 'manual' FROM cronbox.job WHERE name = 'canary0'")
    port = free_port()
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_METRICS_PORT=str(port)) as poller, db.connect(fresh_dsn) as conn:
        def quarantined() -> set[str]:
            return {r[0] for r in conn.execute(
                "SELECT name FROM cronbox.job WHERE paused AND paused_reason LIKE 'quarantined: %'")}

        try:
            wait_until(lambda: quarantined() == set(POISON), 60, "every poisoned job quarantined")
            # canaries keep firing: 5 more fires each after the quarantines, each dispatched on time
            start = conn.execute("SELECT now()").fetchone()[0]
            wait_until(lambda: (conn.execute(
                "SELECT count(*) = 3 AND min(n) >= 5 FROM (SELECT count(*) AS n FROM cronbox.run "
                "WHERE job_name LIKE 'canary%%' AND state = 'dispatched' AND fire_at > %s GROUP BY job_name) c",
                (start,)).fetchone()[0]), 30, "canaries firing")
        except AssertionError:
            raise AssertionError(poller.output[-5000:]) from None
        lag = conn.execute(
            "SELECT max(extract(epoch FROM dispatched_at - fire_at)) FROM cronbox.run "
            "WHERE job_name LIKE 'canary%%' AND state = 'dispatched' AND fire_at > %s", (start,)).fetchone()[0]
        assert lag < 2.0, f"canaries dispatched late: {lag} s"
        assert poller.popen.poll() is None, poller.output[-3000:]
        status, body = healthz(port)
        assert status == 200, body

        reasons = dict(conn.execute(
            "SELECT name, paused_reason FROM cronbox.job WHERE name = ANY(%s)", (list(POISON),)).fetchall())
        assert "outside what the poller can compute" in reasons["huge_every"], reasons
        assert "outside what the poller can compute" in reasons["bc_at"], reasons
        assert "unknown time zone" in reasons["gone_zone"], reasons
        assert reasons["huge_wait"].startswith("quarantined: dispatch failed: timestamp out of range"), reasons
        assert reasons["huge_jitter"].startswith("quarantined: storing its fires failed"), reasons
        assert all(len(r) <= 600 and "CONTEXT" not in r for r in reasons.values()), reasons
        # each is in the change log and announced once as a notification
        logged = {r[0] for r in conn.execute(
            "SELECT job FROM cronbox.schedule_changes WHERE action = 'paused' AND reason LIKE 'quarantined: %'")}
        assert logged == set(POISON)
        notes = [r[0] for r in conn.execute(
            "SELECT message->>'job' FROM cronbox.outbox WHERE kind = 'notification' "
            "AND message->>'event' = 'job_quarantined'")]
        assert sorted(notes) == sorted(POISON)
        # nothing of a quarantined job is left ready to dispatch
        assert conn.execute(
            "SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
            "WHERE j.name = ANY(%s) AND f.hold IS NULL", (list(POISON),)).fetchone()[0] == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'cronbox_jobs_quarantined_total{stage="dispatch"} 1.0' in text, text[-2000:]
        assert f'cronbox_jobs_quarantined_total{{stage="saturation"}} {len(POISON) - 1}.0' in text
        assert poller.output.count("job quarantined") == len(POISON), poller.output[-3000:]
        assert poller.terminate() == 0


def test_resume_takes_a_quarantined_job_back_once_fixed(fresh_dsn: str, tmp_path: Path):
    with db.connect(fresh_dsn) as conn:
        insert_job(conn, "zone", POISON["gone_zone"])
    with Proc("poller", fresh_dsn, tmp_path) as poller, db.connect(fresh_dsn) as conn:
        wait_until(lambda: conn.execute("SELECT paused FROM cronbox.job WHERE name = 'zone'").fetchone()[0],
                   30, "quarantine")
        conn.execute("UPDATE cronbox.job SET timezone = 'UTC' WHERE name = 'zone'")  # the operator's fix
        assert conn.execute("SELECT cronbox.resume('zone')").fetchone()[0] is True
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM cronbox.run WHERE job_name = 'zone' AND state <> 'missed'").fetchone()[0] >= 2,
            30, "the fixed job firing again")
        assert poller.terminate() == 0


@pytest.mark.parametrize("sqlstate, fault", [
    ("22008", True), ("22003", True), ("23505", True), ("P0001", True), ("54000", True),
    ("40001", False), ("40P01", False), ("57014", False), ("55P03", False), ("53300", False)])
def test_only_errors_from_a_rows_data_count_as_a_jobs_fault(sqlstate: str, fault: bool):
    from psycopg import errors

    from poller.isolate import job_fault
    exc = errors.lookup(sqlstate)("boom")
    assert job_fault(exc) is fault
    assert job_fault(psycopg.OperationalError("server closed the connection")) is False
    assert job_fault(psycopg.DataError("timestamp too large (after year 10K)")) is True
