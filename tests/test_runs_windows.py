"""The windows a run in flight opens (docs/architecture.md, "One row in flight", failure windows):
a run is its outbox row until its final report, whose statement deletes the row and inserts the
history row. Each window is played with real connections holding real transactions open: a
report racing a lease rescue (either first; a heartbeat renewing the lease under the rescue),
the relay's ack racing the worker's report, a worker or reporter killed between claim and
report, and the end of a run killed before it commits (never half-written)."""

from __future__ import annotations

import threading
from datetime import timedelta
from collections.abc import Callable
from typing import Any

import psycopg

from cronbox import db

from .procs import wait_until


def _run(conn: psycopg.Connection, name: str, timeout: str = "1 minute") -> int:
    """One run of a new job `name`, dispatched now; returns its run id."""
    conn.execute("SELECT cronbox.schedule(%s, every => '1 hour', overlap => 'allow', timeout => %s::interval, "
                 "max_attempts => 2, retry_delay => '1 hour')", (name, timeout))
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) SELECT job_id, bucket, "
                 "now() - interval '1 second', now() - interval '1 second', 'manual' FROM cronbox.job WHERE name = %s",
                 (name,))
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch(10)").fetchone()[0] == 1
    return conn.execute("SELECT run_id FROM cronbox.runs WHERE job = %s AND run_id IS NOT NULL", (name,)).fetchone()[0]


def _where(conn: psycopg.Connection, run_id: int) -> tuple[int, int]:
    """(outbox rows, history rows) of a run: exactly one of the two, always."""
    return conn.execute("SELECT (SELECT count(*) FROM cronbox.outbox WHERE outbox_id = %(r)s AND kind = 'run'), "
                        "(SELECT count(*) FROM cronbox.run WHERE run_id = %(r)s)", {"r": run_id}).fetchone()


def _state(conn: psycopg.Connection, run_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT state, attempt, worker, error, late_report FROM cronbox.runs WHERE run_id = %s",
                       (run_id,))
    return dict(zip([d.name for d in cur.description], cur.fetchone()))


def _backend_waits(conn: psycopg.Connection, pid: int) -> bool:
    return conn.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                        (pid,)).fetchone()[0] is True


def _in_thread(dsn: str, sql: str, params: tuple = ()) -> tuple[threading.Thread, dict[str, Any], Callable[[], int]]:
    """Run sql on a connection of its own in a thread; returns the thread, its result, its pid."""
    out: dict[str, Any] = {}
    ready = threading.Event()

    def go() -> None:
        with db.connect(dsn) as c:
            out["pid"] = c.info.backend_pid
            ready.set()
            try:
                out["row"] = c.execute(sql, params).fetchone()
            except psycopg.Error as exc:  # reported to the test
                out["error"] = exc

    t = threading.Thread(target=go)
    t.start()
    ready.wait(10)
    return t, out, lambda: out["pid"]


def _expire(conn: psycopg.Connection, run_id: int) -> None:
    conn.execute("UPDATE cronbox.outbox SET run_lease_until = now() - interval '1 second' WHERE outbox_id = %s", (run_id,))


def test_a_report_racing_the_lease_rescue_either_way_ends_the_run_once(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        first = _run(setup, "rescued-first")
        setup.execute("SELECT cronbox.start_run(%s, 'w1')", (first,))
        _expire(setup, first)
    # The rescue holds the run's end uncommitted; the worker's report waits, then is a late report.
    with db.connect(fresh_dsn, autocommit=False) as reaper, db.connect(fresh_dsn) as watch:
        assert reaper.execute("SELECT cronbox.reap_lost(10)").fetchone()[0] == 1
        thread, out, pid = _in_thread(fresh_dsn, "SELECT cronbox.complete_run(%s, '{\"late\": 1}')", (first,))
        wait_until(lambda: _backend_waits(watch, pid()), 10, "the report waiting for the rescue")
        reaper.commit()
        thread.join(10)
        assert out["row"] == ("lost",)
        got = _state(watch, first)
        assert got["state"] == "lost" and got["late_report"]["report"] == "succeeded"
        assert _where(watch, first) == (0, 1)
    # The other way: the report holds its end; the rescue waits, re-checks, and leaves it alone.
    with db.connect(fresh_dsn) as setup:
        third = _run(setup, "reported-first")
        setup.execute("SELECT cronbox.start_run(%s, 'w1')", (third,))
        _expire(setup, third)
    with db.connect(fresh_dsn, autocommit=False) as worker, db.connect(fresh_dsn) as watch:
        assert worker.execute("SELECT cronbox.complete_run(%s)", (third,)).fetchone()[0] == "succeeded"
        thread, out, pid = _in_thread(fresh_dsn, "SELECT cronbox.reap_lost(10)")
        wait_until(lambda: _backend_waits(watch, pid()), 10, "the rescue waiting for the report")
        worker.commit()
        thread.join(10)
        assert out["row"] == (0,)
        assert _state(watch, third)["state"] == "succeeded" and _state(watch, third)["late_report"] is None
        assert _where(watch, third) == (0, 1)
        # no retry was made for it: it was never lost
        assert watch.execute("SELECT count(*) FROM cronbox.job_future WHERE retry_of = %s", (third,)).fetchone()[0] == 0


def test_a_heartbeat_that_renews_the_lease_under_the_rescue_keeps_the_run(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        rid = _run(setup, "alive")
        setup.execute("SELECT cronbox.start_run(%s, 'w1')", (rid,))
        _expire(setup, rid)
    with db.connect(fresh_dsn, autocommit=False) as worker, db.connect(fresh_dsn) as watch:
        assert worker.execute("SELECT cronbox.heartbeat(%s, 'w1')", (rid,)).fetchone()[0] == "continue"
        thread, out, pid = _in_thread(fresh_dsn, "SELECT cronbox.reap_lost(10)")
        wait_until(lambda: _backend_waits(watch, pid()), 10, "the rescue waiting for the heartbeat")
        worker.commit()
        thread.join(10)
        assert out["row"] == (0,)  # the lease was renewed first: not lost
        assert _state(watch, rid)["state"] == "running" and _where(watch, rid) == (1, 0)
        assert watch.execute("SELECT cronbox.complete_run(%s)", (rid,)).fetchone()[0] == "succeeded"
        assert _where(watch, rid) == (0, 1)


def test_the_relays_ack_racing_the_workers_report_ends_the_run_once(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        fast, slow = _run(setup, "fast-worker"), _run(setup, "slow-ack")
        claimed = dict(setup.execute("SELECT run_id, outbox_id FROM cronbox.claim_outbox('r1', 10)").fetchall())
        assert set(claimed) == {fast, slow}
    # A fast worker's report holds the run's end while the relay acks (202): the ack then finds
    # the run gone and changes nothing.
    with db.connect(fresh_dsn, autocommit=False) as worker, db.connect(fresh_dsn) as watch:
        assert worker.execute("SELECT cronbox.complete_run(%s, '{\"n\": 1}')", (fast,)).fetchone()[0] == "succeeded"
        thread, out, pid = _in_thread(fresh_dsn, "SELECT cronbox.ack_outbox('r1', %s)", ([claimed[fast]],))
        wait_until(lambda: _backend_waits(watch, pid()), 10, "the ack waiting for the report")
        worker.commit()
        thread.join(10)
        assert "error" not in out, out
        got = _state(watch, fast)
        assert got["state"] == "succeeded" and got["late_report"] is None and _where(watch, fast) == (0, 1)
    # The ack first (delivered, uncommitted): the report waits, then ends the delivered run.
    with db.connect(fresh_dsn, autocommit=False) as relay, db.connect(fresh_dsn) as watch:
        assert relay.execute("SELECT cronbox.ack_outbox('r1', %s)", ([claimed[slow]],)).fetchone()[0] == 1
        thread, out, pid = _in_thread(fresh_dsn, "SELECT cronbox.complete_run(%s)", (slow,))
        wait_until(lambda: _backend_waits(watch, pid()), 10, "the report waiting for the ack")
        relay.commit()
        thread.join(10)
        assert out["row"] == ("succeeded",)
        got = watch.execute("SELECT state, delivered_at IS NOT NULL FROM cronbox.runs WHERE run_id = %s",
                            (slow,)).fetchone()
        assert got == ("succeeded", True) and _where(watch, slow) == (0, 1)


def test_a_worker_killed_between_claim_and_report_leaves_the_run_to_its_lease_then_a_retry(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        rid = _run(setup, "killed")
        setup.execute("SELECT cronbox.schedule('killed', every => '1 hour', overlap => 'allow', "
                      "timeout => '1 minute', max_attempts => 2, retry_delay => '1 second')")
    # A pull worker claims the run, and its connection dies before any report.
    doomed = db.connect(fresh_dsn)
    claimed = doomed.execute("SELECT run_id FROM cronbox.claim_runs('default', 'w-doomed', 1)").fetchall()
    assert claimed == [(rid,)]
    with db.connect(fresh_dsn) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (doomed.info.backend_pid,))
        # the run is still in flight, running on the dead worker, under its lease
        assert _state(admin, rid)["state"] == "running" and _where(admin, rid) == (1, 0)
        assert admin.execute("SELECT count(*) FROM cronbox.claim_runs('default', 'w2', 1)").fetchone()[0] == 0
        assert admin.execute("SELECT cronbox.reap_lost(10)").fetchone()[0] == 0  # the lease still runs
        _expire(admin, rid)
        assert admin.execute("SELECT cronbox.reap_lost(10)").fetchone()[0] == 1
        assert _state(admin, rid)["state"] == "lost" and _where(admin, rid) == (0, 1)
        # retried as a new attempt; the dead worker's report, if it ever comes, is late
        admin.execute("UPDATE cronbox.job_future SET due_at = now() - interval '1 second' WHERE retry_of = %s", (rid,))
        assert admin.execute("SELECT dispatched FROM cronbox.dispatch(10)").fetchone()[0] == 1
        (retry,) = admin.execute("SELECT run_id FROM cronbox.claim_runs('default', 'w2', 1)").fetchone()
        assert _state(admin, retry)["attempt"] == 2
        assert admin.execute("SELECT cronbox.complete_run(%s)", (rid,)).fetchone()[0] == "lost"
        assert admin.execute("SELECT cronbox.complete_run(%s)", (retry,)).fetchone()[0] == "succeeded"
    doomed.close()


def test_a_report_killed_before_it_commits_leaves_the_run_in_flight_never_half_written(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        rid = _run(setup, "half")
        setup.execute("SELECT cronbox.start_run(%s, 'w1')", (rid,))
    reporter = db.connect(fresh_dsn, autocommit=False)
    # the outbox row deleted and the history row inserted, in one statement, not committed
    assert reporter.execute("SELECT cronbox.complete_run(%s)", (rid,)).fetchone()[0] == "succeeded"
    with db.connect(fresh_dsn) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (reporter.info.backend_pid,))
        wait_until(lambda: _where(admin, rid) == (1, 0), 10, "the run back in flight")
        assert _state(admin, rid)["state"] == "running"
        # and it ends once when the report is made again
        assert admin.execute("SELECT cronbox.complete_run(%s)", (rid,)).fetchone()[0] == "succeeded"
        assert _where(admin, rid) == (0, 1)
    reporter.close()


def test_a_run_started_before_any_ack_is_sent_again_when_its_relay_dies(fresh_dsn):
    """A fast worker starts a run before the relay's ack, and the relay dies before acking: the
    delivery was never acked, so the message is claimed again after the relay's lease, whatever
    the run's state (at least once; the kit drops the duplicate). The relay's lease on the
    message and the run's lease are two columns: neither claim nor ack moves the run's lease."""
    with db.connect(fresh_dsn) as conn:
        rid = _run(conn, "fast-worker")
        claim = "SELECT outbox_id FROM cronbox.claim_outbox_at(%s, 10, '30 seconds', NULL, NULL, '0', p_now => %s)"
        now = conn.execute("SELECT now()").fetchone()[0]
        assert conn.execute(claim, ("r-dead", now)).fetchall() == [(rid,)]
        deadline = conn.execute("SELECT cronbox.start_run(%s, 'w1')", (rid,)).fetchone()[0]
        assert _state(conn, rid)["state"] == "running"
        assert conn.execute(claim, ("r2", now)).fetchall() == []  # the dead relay's lease still runs
        # its lease over: another relay sends it again; the run stays running under its own lease
        later = now + timedelta(seconds=31)
        assert conn.execute(claim, ("r2", later)).fetchall() == [(rid,)]
        assert conn.execute("SELECT cronbox.reap_lost_at(10, p_now => %s)", (later,)).fetchone()[0] == 0
        assert conn.execute("SELECT state, lease_until FROM cronbox.runs WHERE run_id = %s",
                            (rid,)).fetchone() == ("running", deadline)
        # the dead relay's ack changes nothing; the new relay's ack (202) ends the delivery only
        assert conn.execute("SELECT cronbox.ack_outbox('r-dead', %s)", ([rid],)).fetchone()[0] == 0
        assert conn.execute("SELECT cronbox.ack_outbox('r2', %s)", ([rid],)).fetchone()[0] == 1
        assert conn.execute("SELECT state, lease_until, delivered_at IS NOT NULL FROM cronbox.runs WHERE run_id = %s",
                            (rid,)).fetchone() == ("running", deadline, True)
        # delivered: never sent again, however long the run takes; its lease decides
        far = later + timedelta(minutes=10)
        assert conn.execute(claim, ("r3", far)).fetchall() == []
        assert conn.execute("SELECT cronbox.complete_run(%s)", (rid,)).fetchone()[0] == "succeeded"
        assert _where(conn, rid) == (0, 1)
