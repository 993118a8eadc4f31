"""Leases: the reaper declares expired runs lost and retries them; late reports never win."""

from __future__ import annotations

from .runs_support import active, at, complete, dispatch, future, futures, job, runs


def reap(conn, now) -> int:
    return conn.execute("SELECT cronbox.reap_lost_at(100, p_now => %s)", (at(now),)).fetchone()[0]


def running(conn, name="l", **opts) -> int:
    opts.setdefault("timeout", "60 seconds")
    job(conn, name, **opts)
    future(conn, name, 0)
    dispatch(conn, 0)
    [rid] = active(conn, name)
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(1)))  # lease until at(61)
    return rid


def test_expired_lease_is_declared_lost_retried_and_the_old_worker_told_to_cancel(conn):
    old = running(conn, max_attempts=2, retry_delay="1 second")
    assert reap(conn, 60) == 0
    assert reap(conn, 62) == 1
    [r] = runs(conn, "l")
    assert r["state"] == "lost" and "lease expired" in r["error"]
    [f] = futures(conn, "l")
    assert (f["attempt"], f["retry_of"]) == (2, old)
    assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (old, at(63))).fetchone()[0] == "cancel"
    dispatch(conn, 70)
    [new] = active(conn, "l")
    conn.execute("SELECT cronbox.start_run_at(%s, 'w2', %s)", (new, at(71)))
    # the old worker finally reports: kept, but the newer attempt is untouched
    assert complete(conn, old, 75, {"late": True}) == "lost"
    rows = {r["run_id"]: r for r in runs(conn, "l")}
    assert rows[old]["state"] == "lost" and rows[old]["late_report"]["report"] == "succeeded"
    assert rows[old]["late_report"]["result"] == {"late": True}
    assert (rows[new]["state"], rows[new]["worker"], rows[new]["attempt"]) == ("running", "w2", 2)
    assert complete(conn, new, 80) == "succeeded"


def test_heartbeats_keep_a_run_alive_past_its_timeout(conn):
    rid = running(conn)
    for t in (50, 100, 150):
        assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (rid, at(t))).fetchone()[0] == "continue"
        assert reap(conn, t + 59) == 0
    assert reap(conn, 211) == 1


def test_delivered_run_that_never_starts_is_reaped_from_the_relay_lease(conn):
    job(conn, "d", timeout="30 seconds")
    future(conn, "d", 0)
    dispatch(conn, 0)
    rows = conn.execute("SELECT outbox_id, message FROM cronbox.claim_outbox_at('relay', 10, '30 seconds', p_now => %s)",
                        (at(1),)).fetchall()
    [(oid, msg)] = rows
    assert msg["deadline"] is not None  # the soft timeout travels with the message
    conn.execute("SELECT cronbox.ack_outbox_at('relay', %s, p_now => %s)", ([oid], at(2)))
    [r] = runs(conn, "d")
    assert (r["state"], r["lease_until"]) == ("delivered", at(32))
    assert reap(conn, 31) == 0 and reap(conn, 33) == 1
    assert runs(conn, "d")[0]["state"] == "lost"


def test_expired_run_asked_to_cancel_ends_cancelled_without_retry(conn):
    rid = running(conn, max_attempts=3)
    conn.execute("SELECT cronbox.cancel_at(%s, %s)", (rid, at(2)))
    assert reap(conn, 62) == 1
    assert runs(conn, "l")[0]["state"] == "cancelled"
    assert futures(conn, "l") == []


def test_reaping_is_rechecked_under_lock_so_a_renewed_lease_is_not_lost(conn):
    rid = running(conn)
    conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (rid, at(60)))
    verdict = conn.execute("SELECT verdict FROM cronbox.finish_runs(%s, 'lost', NULL, NULL, true, %s)",
                           ([rid], at(62))).fetchone()[0]
    assert verdict == "ignored"
    assert runs(conn, "l")[0]["state"] == "running"


def test_a_heartbeat_committing_while_the_reaper_waits_keeps_the_run_alive(fresh_dsn):
    """finish_runs reads runs without a row lock (one WAL record fewer per run) and re-checks in
    its UPDATE: a heartbeat that renews an expired lease and commits while the reaper waits for
    the row wins; the run is neither lost nor retried."""
    import threading

    from cronbox import db

    from .procs import wait_until

    with db.connect(fresh_dsn) as conn:
        rid = running(conn, max_attempts=3)
    with db.connect(fresh_dsn, autocommit=False) as worker, db.connect(fresh_dsn) as reaper:
        worker.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (rid, at(60)))  # lease until at(120), not committed
        pid = reaper.execute("SELECT pg_backend_pid()").fetchone()[0]
        result: list[int] = []
        t = threading.Thread(target=lambda: result.append(reap(reaper, 62)))
        t.start()
        with db.connect(fresh_dsn) as watch:
            wait_until(lambda: watch.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                                             (pid,)).fetchone()[0] == "Lock", what="reaper waits for the run's row")
        worker.commit()
        t.join(10)
    assert result == [0]
    with db.connect(fresh_dsn) as conn:
        [r] = runs(conn, "l")
        assert (r["state"], r["lease_until"]) == ("running", at(120))
        assert futures(conn, "l") == []
