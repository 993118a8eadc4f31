"""Failure policy: retries as new attempts with capped exponential backoff, on_error, streaks."""

from __future__ import annotations

from datetime import timedelta

from .runs_support import (active, at, complete, dispatch, fail, future, futures, job, jobrow,
                           notifications, runs, states)


def start_one(conn, name, **opts) -> int:
    job(conn, name, **opts)
    future(conn, name, 0)
    dispatch(conn, 0)
    [rid] = active(conn, name)
    return rid


def retry_future(conn, name):
    [f] = futures(conn, name)
    assert f["origin"] == "retry"
    return f


def test_failed_run_is_retried_as_new_attempts_with_capped_exponential_backoff(conn):
    rid = start_one(conn, "r", max_attempts=4, retry_delay="10 seconds", retry_max_delay="25 seconds")
    now = 100
    waits = []
    for attempt in (1, 2, 3):
        assert fail(conn, rid, now, f"boom {attempt}") == "failed"
        f = retry_future(conn, "r")
        assert (f["attempt"], f["retry_of"], f["fire_at"]) == (attempt + 1, rid, at(0))
        waits.append((f["due_at"] - at(now)).total_seconds())
        now = (f["due_at"] - at(0)).total_seconds()
        assert dispatch(conn, now - 0.001)["dispatched"] == 0  # not before the backoff
        assert dispatch(conn, now)["dispatched"] == 1
        [new] = active(conn, "r")
        row = next(r for r in runs(conn, "r") if r["run_id"] == new)
        assert (row["attempt"], row["retry_of"], row["origin"]) == (attempt + 1, rid, "retry")
        rid = new
    assert 8 <= waits[0] <= 10 and 16 <= waits[1] <= 20 and 20 <= waits[2] <= 25  # 10s, 20s, capped at 25s
    # the last attempt's message (sent while the run is in flight) carries its own key
    msg = conn.execute("SELECT message FROM cronbox.claim_outbox_at('r', 1000, '30 seconds', p_now => %s) "
                       "WHERE kind = 'run' ORDER BY outbox_id DESC LIMIT 1", (at(now + 1),)).fetchone()[0]
    assert msg["idempotency_key"] == f"{rid}:4"
    fail(conn, rid, now + 1, "boom 4")
    assert futures(conn, "r") == []  # attempts exhausted; retry_schedule waits for the next fire
    assert states(conn, "r") == ["failed"] * 4
    [note] = notifications(conn, "run_failed")
    assert (note["job"], note["attempt"], note["error"]) == ("r", 4, "boom 4")


def test_backoff_has_jitter_below_the_exponential_and_never_exceeds_the_cap(conn):
    rows = conn.execute(
        "SELECT extract(epoch FROM cronbox.retry_backoff('10 seconds', '1 hour', 3)) "
        "FROM generate_series(1, 200)").fetchall()
    values = [float(r[0]) for r in rows]
    assert 32 <= min(values) and max(values) <= 40 and len(set(values)) > 1
    capped = conn.execute("SELECT cronbox.retry_backoff('10 seconds', '25 seconds', 50)").fetchone()[0]
    assert timedelta(seconds=20) <= capped <= timedelta(seconds=25)


def test_non_retryable_failure_skips_the_remaining_attempts(conn):
    rid = start_one(conn, "nr", max_attempts=5)
    fail(conn, rid, 10, "bad input", retryable=False)
    assert futures(conn, "nr") == []
    assert notifications(conn, "run_failed")[0]["attempt"] == 1


def test_on_error_retry_soon_keeps_retrying_once_attempts_are_exhausted(conn):
    rid = start_one(conn, "rs", max_attempts=1, on_error="retry_soon", retry_delay="5 seconds",
                    retry_max_delay="12 seconds")
    now = 10
    for attempt in (1, 2, 3):
        fail(conn, rid, now)
        f = retry_future(conn, "rs")
        assert f["attempt"] == attempt + 1
        assert f["due_at"] - at(now) <= timedelta(seconds=12)
        now = (f["due_at"] - at(0)).total_seconds()
        dispatch(conn, now)
        [rid] = active(conn, "rs")
    assert len(notifications(conn, "run_failed")) == 1  # when attempts ran out, not on every retry
    complete(conn, rid, now + 1)
    assert jobrow(conn, "rs")["consecutive_failures"] == 0


def test_on_error_pause_pauses_the_schedule_records_why_and_notifies(conn):
    rid = start_one(conn, "pz", max_attempts=1, on_error="pause")
    fail(conn, rid, 10, "disk full")
    j = jobrow(conn, "pz")
    assert j["paused"] and "disk full" in j["paused_reason"]
    change = conn.execute(
        "SELECT action, reason, changed_at FROM cronbox.schedule_changes WHERE job = 'pz' "
        "ORDER BY change_id DESC LIMIT 1").fetchone()
    assert change[0] == "paused_after_failure" and "disk full" in change[1] and change[2] == at(10)
    [paused] = notifications(conn, "schedule_paused")
    assert paused["job"] == "pz" and "disk full" in paused["reason"]
    assert len(notifications(conn, "run_failed")) == 1
    future(conn, "pz", 60)
    assert dispatch(conn, 60)["held"] == 1  # its next fire waits for resume


def test_consecutive_failures_and_crashes_are_counted_and_reset_on_success(conn):
    job(conn, "st", overlap="allow", timeout="30 seconds")
    for t in range(3):
        future(conn, "st", t)
    dispatch(conn, 5)
    a, b, c = active(conn, "st")
    fail(conn, a, 6)
    conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (b, at(6)))
    assert conn.execute("SELECT cronbox.reap_lost_at(10, p_now => %s)", (at(40),)).fetchone()[0] == 1
    j = jobrow(conn, "st")
    assert (j["consecutive_failures"], j["consecutive_crashes"], j["active_runs"]) == (2, 1, 1)
    complete(conn, c, 41)
    j = jobrow(conn, "st")
    assert (j["consecutive_failures"], j["consecutive_crashes"], j["last_success_at"]) == (0, 0, at(41))


def test_consecutive_failures_counts_runs_not_attempts(conn):
    # max_attempts 3: a run whose first two attempts fail and whose third fails too is ONE
    # failure; attempts that are retried are not failures yet; a success resets.
    rid = start_one(conn, "cf", max_attempts=3, retry_delay="1 second", retry_max_delay="1 second")
    t = 1
    for attempt in (1, 2, 3):
        fail(conn, rid, t)
        j = jobrow(conn, "cf")
        assert j["consecutive_failures"] == (1 if attempt == 3 else 0), attempt
        if attempt < 3:
            t += 5
            dispatch(conn, t)
            [rid] = active(conn, "cf")
    # a second run: lost once (a crash, retried), then fails for good without retry
    future(conn, "cf", 100)
    dispatch(conn, 100)
    [rid] = active(conn, "cf")
    conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (rid, at(100)))
    assert conn.execute("SELECT cronbox.reap_lost_at(10, p_now => %s)", (at(1000),)).fetchone()[0] == 1
    j = jobrow(conn, "cf")
    assert (j["consecutive_failures"], j["consecutive_crashes"]) == (1, 1)  # the lost attempt is retried
    dispatch(conn, 1010)
    [rid] = active(conn, "cf")
    fail(conn, rid, 1011, retryable=False)
    j = jobrow(conn, "cf")
    assert (j["consecutive_failures"], j["consecutive_crashes"]) == (2, 1)
    assert len(notifications(conn, "run_failed")) == 2  # one per failed run, as the streak
    # a third run succeeds: both streaks reset
    future(conn, "cf", 2000)
    dispatch(conn, 2000)
    [rid] = active(conn, "cf")
    complete(conn, rid, 2001)
    j = jobrow(conn, "cf")
    assert (j["consecutive_failures"], j["consecutive_crashes"]) == (0, 0)


def test_retry_soon_counts_the_run_once_however_many_attempts_follow(conn):
    rid = start_one(conn, "rs", max_attempts=2, on_error="retry_soon", retry_delay="1 second",
                    retry_max_delay="1 second")
    t = 1
    for _ in range(4):
        fail(conn, rid, t)
        t += 5
        dispatch(conn, t)
        [rid] = active(conn, "rs")
    assert jobrow(conn, "rs")["consecutive_failures"] == 1
