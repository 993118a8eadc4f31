"""Resource pools: set_pool, schedule(needs => ...), on_unavailable, units held while a run is in
flight and given back exactly once at its end (SQL level; processes: test_pools_chaos.py)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from .runs_support import (active, at, complete, dispatch, fail, future, futures, job, jobrow,
                           notifications, runs, states)


def pool(conn, name: str) -> dict:
    cur = conn.execute("SELECT * FROM cronbox.pools WHERE name = %s", (name,))
    cols = [d.name for d in cur.description]
    return dict(zip(cols, cur.fetchone()))


def in_flight_units(conn, name: str) -> int:
    """The units held by unfinished runs, counted from history (what in_use must equal)."""
    return conn.execute(
        "SELECT coalesce(sum((r.needs ->> %s)::bigint), 0) FROM cronbox.runs r "
        "WHERE r.state IN ('dispatched', 'delivered', 'running')", (name,)).fetchone()[0]


def gpu_jobs(conn, n: int, units: int, **opts) -> None:
    for i in range(n):
        job(conn, f"train{i}", needs=Jsonb({"gpu": units}), priority=i, **opts)
        future(conn, f"train{i}", 0)


def test_runs_start_only_while_their_units_fit_and_waiting_fires_go_in_priority_order(conn):
    assert conn.execute("SELECT cronbox.set_pool('gpu', 16)").fetchone()[0] == 0
    gpu_jobs(conn, 5, 8)
    out = dispatch(conn, 1)
    assert (out["dispatched"], out["held"]) == (2, 3)
    assert pool(conn, "gpu")["in_use"] == 16 and pool(conn, "gpu")["waiting"] == 3
    waiting = conn.execute("SELECT job, hold, waiting_for FROM cronbox.upcoming_fires ORDER BY job").fetchall()
    assert waiting == [(f"train{i}", "pool", "pool gpu") for i in (2, 3, 4)]
    order, now = [], 1
    while True:
        current = [r for r in (active(conn, f"train{i}") for i in range(5)) if r]
        flat = [r for rs in current for r in rs]
        assert len(flat) * 8 <= 16
        assert pool(conn, "gpu")["in_use"] == in_flight_units(conn, "gpu") == len(flat) * 8
        if not flat:
            break
        order += [r for r in flat if r not in order]
        now += 1
        complete(conn, min(flat), now)
        dispatch(conn, now)
    names = [conn.execute("SELECT job FROM cronbox.runs WHERE run_id = %s", (r,)).fetchone()[0] for r in order]
    assert names == [f"train{i}" for i in range(5)]
    assert pool(conn, "gpu")["in_use"] == 0


def test_every_final_state_gives_the_units_back_exactly_once(conn):
    conn.execute("SELECT cronbox.set_pool('ip', 4)")
    job(conn, "a", needs=Jsonb({"ip": 1}), overlap="allow", max_attempts=1, timeout=timedelta(seconds=30))
    for t in range(4):
        future(conn, "a", t)
    assert dispatch(conn, 5)["dispatched"] == 4
    r1, r2, r3, r4 = active(conn, "a")
    assert pool(conn, "ip")["in_use"] == 4
    complete(conn, r1, 6)
    fail(conn, r2, 6)
    conn.execute("SELECT cronbox.cancel_at(%s, %s)", (r3, at(6)))  # in the outbox: cancelled at once
    assert pool(conn, "ip")["in_use"] == 1
    # lost: delivered with a lease that expires, then the reaper
    conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (r4, at(7)))
    conn.execute("SELECT * FROM cronbox.reap_lost_at(100, p_now => %s)", (at(100),))
    assert states(conn, "a")[:4] == ["succeeded", "failed", "cancelled", "lost"]
    assert pool(conn, "ip")["in_use"] == 0
    # late and repeated reports change nothing
    complete(conn, r1, 101)
    fail(conn, r4, 101)
    assert pool(conn, "ip")["in_use"] == 0


def test_a_run_keeps_the_units_it_took_when_the_job_needs_change(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 10)")
    job(conn, "a", needs=Jsonb({"gpu": 3}))
    future(conn, "a", 0)
    dispatch(conn, 1)
    conn.execute("SELECT cronbox.schedule_at('a', every => '1 hour', needs => '{\"gpu\": 5}', p_now => %s)", (at(2),))
    assert pool(conn, "gpu")["in_use"] == 3
    complete(conn, active(conn, "a")[0], 2)
    assert pool(conn, "gpu")["in_use"] == 0


def test_lowered_capacity_takes_effect_as_runs_end_raised_capacity_starts_waiting_fires_at_once(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 4)")
    gpu_jobs(conn, 4, 1)
    assert dispatch(conn, 1)["dispatched"] == 4
    assert conn.execute("SELECT cronbox.set_pool('gpu', 2)").fetchone()[0] == 4  # units in use now
    assert pool(conn, "gpu")["free"] == 0
    for i in range(4):
        future(conn, f"train{i}", 10)
    for rid in [active(conn, f"train{i}")[0] for i in range(3)]:
        complete(conn, rid, 11)
    dispatch(conn, 12)
    assert pool(conn, "gpu")["in_use"] == 2  # 1 still running + 1 new: the new capacity
    conn.execute("SELECT cronbox.set_pool('gpu', 8)")
    # raised: the waiting fires were released by set_pool itself; the next dispatch starts them
    assert pool(conn, "gpu")["waiting"] == 0
    dispatch(conn, 13)  # train3's fire was skipped (overlap: its first run is unfinished)
    assert pool(conn, "gpu")["in_use"] == 4 == in_flight_units(conn, "gpu")


def test_a_big_waiting_fire_is_not_overtaken_by_smaller_ones_of_lower_priority(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 8)")
    job(conn, "small0", needs=Jsonb({"gpu": 4}), priority=0)
    job(conn, "big", needs=Jsonb({"gpu": 8}), priority=1)
    job(conn, "small2", needs=Jsonb({"gpu": 4}), priority=2)
    future(conn, "small0", 0)
    future(conn, "big", 0)
    dispatch(conn, 1)
    assert futures(conn, "big")[0]["hold"] == "pool"
    future(conn, "small2", 2)
    dispatch(conn, 2)
    assert states(conn, "small2") == []  # 4 units free, but big (priority 1) waits first
    assert "priority 1" not in str(futures(conn, "small2"))
    complete(conn, active(conn, "small0")[0], 3)
    dispatch(conn, 3)
    assert states(conn, "big") == ["dispatched"] and states(conn, "small2") == []


def test_on_unavailable_fail_records_a_failed_run_with_the_reason_and_notifies(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 4)")
    job(conn, "hog", needs=Jsonb({"gpu": 4}))
    job(conn, "eager", needs=Jsonb({"gpu": 2}), on_unavailable="fail", priority=1)
    future(conn, "hog", 0)
    future(conn, "eager", 0)
    out = dispatch(conn, 1)
    assert (out["dispatched"], out["failed"]) == (1, 1)
    (run,) = runs(conn, "eager")
    assert run["state"] == "failed"
    assert run["error"] == "unavailable: pool gpu: 0 of 4 units free, needs 2 (on_unavailable fail)"
    (note,) = notifications(conn, "unavailable")
    assert note["job"] == "eager" and note["pool"] == "gpu" and note["run_id"] == run["run_id"]
    assert jobrow(conn, "eager")["consecutive_failures"] == 1
    assert pool(conn, "gpu")["in_use"] == 4


def test_on_unavailable_retry_puts_the_fire_back_after_its_retry_delay_doubling(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 1)")
    job(conn, "hog", needs=Jsonb({"gpu": 1}))
    job(conn, "r", needs=Jsonb({"gpu": 1}), on_unavailable="retry", priority=1,
        retry_delay=timedelta(seconds=10), retry_max_delay=timedelta(seconds=25))
    future(conn, "hog", 0)
    future(conn, "r", 0)
    dispatch(conn, 0)
    (f,) = futures(conn, "r")
    assert f["hold"] is None and f["due_at"] == at(10) and f["held_since"] == at(0)
    dispatch(conn, 10)
    assert futures(conn, "r")[0]["due_at"] == at(20)   # waited 10 s: 10 s more
    dispatch(conn, 20)
    assert futures(conn, "r")[0]["due_at"] == at(40)   # waited 20 s: 20 s more
    dispatch(conn, 40)
    assert futures(conn, "r")[0]["due_at"] == at(65)   # waited 40 s: capped at 25 s
    complete(conn, active(conn, "hog")[0], 50)
    dispatch(conn, 65)
    assert states(conn, "r") == ["dispatched"]


def test_wait_ends_in_a_failure_after_unavailable_timeout(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 1)")
    job(conn, "hog", needs=Jsonb({"gpu": 1}))
    job(conn, "w", needs=Jsonb({"gpu": 1}), priority=1, unavailable_timeout=timedelta(seconds=60))
    future(conn, "hog", 0)
    future(conn, "w", 0)
    dispatch(conn, 0)
    (f,) = futures(conn, "w")
    assert f["hold"] == "pool" and f["hold_until"] == at(30)  # the backstop comes first
    conn.execute("SELECT cronbox.release_holds_at(10000, p_now => %s)", (at(60),))
    out = dispatch(conn, 60)
    assert out["failed"] == 1
    (run,) = runs(conn, "w")
    assert run["error"].startswith("unavailable: pool gpu: 0 of 1 units free, needs 1 after waiting 00:01:00")
    assert notifications(conn, "unavailable")[0]["job"] == "w"


def test_a_run_needing_two_pools_waits_for_both(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 8)")
    conn.execute("SELECT cronbox.set_pool('ip', 1)")
    job(conn, "a", needs=Jsonb({"gpu": 8, "ip": 1}))
    job(conn, "b", needs=Jsonb({"ip": 1}), priority=-1)
    future(conn, "a", 0)
    future(conn, "b", 0)
    dispatch(conn, 1)
    assert states(conn, "b") == ["dispatched"] and futures(conn, "a")[0]["hold_queue"] == "ip"
    assert pool(conn, "gpu")["in_use"] == 0
    complete(conn, active(conn, "b")[0], 2)
    dispatch(conn, 2)
    assert states(conn, "a") == ["dispatched"]
    assert (pool(conn, "gpu")["in_use"], pool(conn, "ip")["in_use"]) == (8, 1)


def test_jobs_without_needs_ignore_pools_and_never_go_early_with_needs(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 0)")
    job(conn, "plain", overlap="allow")
    job(conn, "pooled", overlap="allow", needs=Jsonb({"gpu": 1}))
    future(conn, "plain", 10)
    future(conn, "pooled", 10)
    out = conn.execute("SELECT * FROM cronbox.dispatch_ahead_at(100, '1 minute', p_now => %s)", (at(0),)).fetchone()
    assert out[0] == 1 and states(conn, "plain") == ["dispatched"] and states(conn, "pooled") == []


def test_reconcile_recounts_units_from_the_runs_in_flight(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 8)")
    gpu_jobs(conn, 2, 3)
    dispatch(conn, 1)
    conn.execute("UPDATE cronbox.pool SET in_use = 0")
    assert conn.execute("SELECT cronbox.reconcile_pools_at(NULL, %s)", (at(2),)).fetchone()[0] == 1
    assert pool(conn, "gpu")["in_use"] == 6


def test_redriven_run_holds_its_units_again(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 8)")
    gpu_jobs(conn, 1, 3)
    dispatch(conn, 1)
    (rid,) = active(conn, "train0")
    conn.execute("SELECT cronbox.finish_runs(ARRAY[%s]::bigint[], 'failed', NULL, ARRAY['undeliverable: gone'], false, %s)",
                 (rid, at(2)))
    conn.execute("DELETE FROM cronbox.outbox WHERE run_id = %s AND kind = 'run'", (rid,))
    conn.execute("INSERT INTO cronbox.dead_letter (outbox_id, queue, kind, run_id, message, timeout, attempts, last_error, "
                 "created_at, dead_at) VALUES (-1, 'default', 'run', %s, '{}', '5 minutes', 3, 'gone', %s, %s)", (rid, at(1), at(2)))
    assert pool(conn, "gpu")["in_use"] == 0
    conn.execute("SELECT cronbox.redrive_at(NULL, 'default', false, %s)", (at(3),))
    assert states(conn, "train0") == ["dispatched"] and pool(conn, "gpu")["in_use"] == 3


def test_set_pool_checks_its_arguments_and_refuses_to_remove_a_pool_in_use(conn):
    for args, err, field in [(("gpu", -1), psycopg.errors.InvalidParameterValue, "capacity"),
                             (("bad name", 1), psycopg.errors.InvalidParameterValue, "name"),
                             ((None, 1), psycopg.errors.NullValueNotAllowed, "name")]:
        with pytest.raises(err, match=f"^{field}: "), conn.transaction():
            conn.execute("SELECT cronbox.set_pool(%s, %s)", args)
    conn.execute("SELECT cronbox.set_pool('gpu', 2)")
    job(conn, "a", needs=Jsonb({"gpu": 1}))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="needed by schedule"), conn.transaction():
        conn.execute("SELECT cronbox.set_pool('gpu', NULL)")
    conn.execute("SELECT cronbox.unschedule('a')")
    assert conn.execute("SELECT cronbox.set_pool('gpu', NULL)").fetchone()[0] is None
    assert conn.execute("SELECT count(*) FROM cronbox.pools").fetchone()[0] == 0


@pytest.mark.parametrize("needs, err, text", [
    ({"gpu": 0}, psycopg.errors.InvalidParameterValue, "whole number"),
    ({"gpu": 1.5}, psycopg.errors.InvalidParameterValue, "whole number"),
    ({"gpu": "8"}, psycopg.errors.InvalidParameterValue, "whole number"),
    ({"gpu": None}, psycopg.errors.NullValueNotAllowed, "must not be null"),
    ({}, psycopg.errors.InvalidParameterValue, "1 to 16 pools"),
    ([1], psycopg.errors.InvalidParameterValue, "JSON object"),
    ({"nope": 1}, psycopg.errors.NoDataFound, "no pool named 'nope'"),
])
def test_schedule_refuses_bad_needs_before_writing(conn, needs, err, text):
    conn.execute("SELECT cronbox.set_pool('gpu', 2)")
    with pytest.raises(err, match=f"^needs: .*{text}"), conn.transaction():
        job(conn, "a", needs=Jsonb(needs))
    assert conn.execute("SELECT count(*) FROM cronbox.job WHERE name = 'a'").fetchone()[0] == 0


@pytest.mark.parametrize("notify, err", [
    (["team@example.com"], psycopg.errors.InvalidParameterValue),
    (["mailto:a b@example.com"], psycopg.errors.InvalidParameterValue),
    (["ftp://x"], psycopg.errors.InvalidParameterValue),
    (["mailto:a@example.com", "MAILTO:A@example.com"], psycopg.errors.InvalidParameterValue),
    (["mailto:a@example.com", None], psycopg.errors.NullValueNotAllowed),
    ([], psycopg.errors.InvalidParameterValue),
])
def test_schedule_refuses_bad_notify_addresses(conn, notify, err):
    with pytest.raises(err, match="^notify: "), conn.transaction():
        job(conn, "a", notify=notify)


def test_status_and_metrics_show_each_pool(fresh_dsn):
    from cronbox import db
    from cronbox.metrics import DATABASE

    from .test_ops_status import _status
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.set_pool('gpu', 24)")
        su.execute("SELECT cronbox.schedule('train', every => '1 hour', needs => '{\"gpu\": 8}')")
        gauges = su.execute("SELECT metric, label, value FROM cronbox.metrics_gauges() "
                            "WHERE metric LIKE 'pool\\_%' ORDER BY 1").fetchall()
    assert gauges == [("pool_capacity", "gpu", 24.0), ("pool_in_use", "gpu", 0.0), ("pool_waiting", "gpu", 0.0)]
    DATABASE.gauges = gauges
    exposed = {s.name: s.value for fam in DATABASE.collect() for s in fam.samples}
    assert exposed["cronbox_resource_pool_capacity"] == 24.0
    lines = _status(fresh_dsn).splitlines()
    at = lines.index("pools:")
    assert lines[at + 1].split() == ["name", "capacity", "in_use", "free", "waiting", "oldest_wait"]
    assert lines[at + 2].split()[:5] == ["gpu", "24", "0", "24", "0"]
