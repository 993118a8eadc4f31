"""trigger() decides its fire in its own transaction through dispatch's write
(cronbox.dispatch_locked): the poller is no longer a hop, and the decision is the one dispatch
would have taken (overlap, paused job, queue limit, dependency gate)."""

from __future__ import annotations

import threading

import psycopg

from cronbox import db

from .procs import wait_until
from .runs_support import at, complete, dispatch, futures, job, jobrow, runs


def trigger(conn, name: str, now: float) -> int:
    return conn.execute("SELECT cronbox.trigger_at(%s, p_now => %s)", (name, at(now))).fetchone()[0]


def outbox_of(conn, run_id: int) -> list[tuple]:
    return conn.execute("SELECT kind, available_at FROM cronbox.outbox WHERE run_id = %s", (run_id,)).fetchall()


def test_trigger_writes_the_run_and_its_message_in_its_own_transaction(conn):
    job(conn, "tr")
    trigger(conn, "tr", 5)
    [run] = runs(conn, "tr")
    assert (run["origin"], run["state"], run["fire_at"], run["dispatched_at"]) == ("manual", "dispatched", at(5), at(5))
    assert outbox_of(conn, run["run_id"]) == [("run", at(5))]
    assert futures(conn, "tr") == []
    assert jobrow(conn, "tr")["active_runs"] == 1
    assert dispatch(conn, 6)["dispatched"] == 0  # nothing left for the poller


def test_trigger_of_a_job_whose_run_is_unfinished_is_skipped_with_overlap_skip(conn):
    job(conn, "busy")  # overlap 'skip' by default
    trigger(conn, "busy", 1)
    trigger(conn, "busy", 2)
    got = [(r["state"], r["error"]) for r in runs(conn, "busy")]
    assert got[0] == ("dispatched", None)
    assert got[1][0] == "skipped" and got[1][1].startswith("overlap: skipped")
    assert len(conn.execute("SELECT 1 FROM cronbox.outbox o JOIN cronbox.runs r USING (run_id) "
                            "WHERE r.job = 'busy'").fetchall()) == 1


def test_trigger_with_buffer_one_holds_the_fire_until_the_run_ends(conn):
    job(conn, "buf", overlap="buffer_one")
    trigger(conn, "buf", 1)
    trigger(conn, "buf", 2)
    assert [r["state"] for r in runs(conn, "buf")] == ["dispatched"]
    assert [f["hold"] for f in futures(conn, "buf")] == ["overlap"]
    complete(conn, runs(conn, "buf")[0]["run_id"], 3)
    assert dispatch(conn, 4)["dispatched"] == 1  # released by the end of the run, then the poller's
    assert [r["state"] for r in runs(conn, "buf")] == ["succeeded", "dispatched"]


def test_trigger_runs_a_paused_job_at_once_and_it_stays_paused(conn):
    job(conn, "pz")
    conn.execute("SELECT cronbox.pause_at('pz', p_now => %s)", (at(0),))
    trigger(conn, "pz", 1)
    assert [(r["origin"], r["state"]) for r in runs(conn, "pz")] == [("manual", "dispatched")]
    assert jobrow(conn, "pz")["paused"] is True


def test_trigger_on_a_full_queue_waits_for_a_slot(conn):
    job(conn, "lim1", queue="narrow1")
    job(conn, "lim2", queue="narrow1")
    conn.execute("SELECT cronbox.set_queue_limit('narrow1', 1)")
    trigger(conn, "lim1", 1)
    trigger(conn, "lim2", 1)
    assert [r["state"] for r in runs(conn, "lim2")] == []
    assert [(f["hold"], f["hold_queue"]) for f in futures(conn, "lim2")] == [("queue_limit", "narrow1")]
    assert conn.execute("SELECT running FROM cronbox.queue_limit WHERE queue = 'narrow1'").fetchone()[0] == 1
    complete(conn, runs(conn, "lim1")[0]["run_id"], 2)
    assert dispatch(conn, 3)["dispatched"] == 1
    assert [r["state"] for r in runs(conn, "lim2")] == ["dispatched"]


def test_trigger_of_a_gated_job_waits_for_its_upstream(conn):
    job(conn, "up")
    job(conn, "down")
    conn.execute("SELECT cronbox.add_dependency_at('down', 'up', p_now => %s)", (at(0),))
    trigger(conn, "down", 1)
    assert runs(conn, "down") == []
    assert [f["hold"] for f in futures(conn, "down")] == ["dependency"]


def test_concurrent_triggers_of_one_job_are_decided_one_after_the_other(fresh_dsn):
    """Two sessions trigger a job with overlap 'skip' at once: the job's lock orders them, so
    exactly one run is dispatched and the other fire is skipped (never two dispatched)."""
    with db.connect(fresh_dsn) as c:
        c.execute("SELECT cronbox.schedule('race', cron => '0 0 1 1 *')")
    first = psycopg.connect(fresh_dsn, autocommit=False)
    second = psycopg.connect(fresh_dsn, autocommit=False)
    try:
        first.execute("SELECT cronbox.trigger('race')")   # holds the job's lock until commit
        done = threading.Event()

        def other() -> None:
            second.execute("SELECT cronbox.trigger('race')")
            second.commit()
            done.set()

        t = threading.Thread(target=other)
        t.start()
        with db.connect(fresh_dsn) as watch:  # the second session waits for the job's lock
            wait_until(lambda: watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%cronbox.trigger%%'").fetchone()[0] == 1, 10, "the second trigger waiting")
        assert not done.is_set()
        first.commit()
        t.join(10)
        assert done.is_set()
    finally:
        first.close()
        second.close()
    with db.connect(fresh_dsn) as c:
        got = sorted(r[0] for r in c.execute("SELECT state FROM cronbox.runs WHERE job = 'race'").fetchall())
    assert got == ["dispatched", "skipped"]
