"""Bursts: the poller's early-dispatch lead grows with the fires coming due
(poller/lead.py, cronbox.due_ahead), up to CRONBOX_DISPATCH_LEAD_MAX and half the horizon; the
relay still claims only within its own lead, and a change still withdraws every early run no
relay holds, however long before its fire it was written."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import orjson
import psycopg
import pytest
from aiohttp import web

from cronbox import db
from cronbox.config import Config
from poller.lead import LeadPlanner
from poller.tick import lead_planner
from poller.settings import PollerSettings

from .procs import Proc, wait_until
from .relay_support import ThreadedWorker
from .runs_support import at, future, job, runs

L = timedelta(milliseconds=500)


def planner(cap: float = 60, rate: float = 10_000) -> LeadPlanner:
    p = LeadPlanner(L, timedelta(seconds=cap), refresh=2.0)
    p.rate = rate
    return p


def test_a_steady_rate_keeps_the_base_lead():
    p = planner()
    p.observe_profile([(s, 1000) for s in range(60)], now=100.0)  # 1,000 fires every second
    assert p.lead(now=100.0) == L


def test_a_burst_starts_early_enough_for_its_fires_at_the_measured_rate():
    p = planner(rate=12_000)  # counted at 50 %: 6,000/s
    p.observe_profile([(0, 100), (39, 120_000)], now=100.0)  # 120,000 fires 39-40 s away
    assert p.lead(now=100.0) == L  # 20 s of work, 39 s left: not yet
    p.observe_profile([(0, 100), (19, 120_000)], now=200.0)
    assert p.lead(now=200.0) == timedelta(seconds=20)  # now it is: take them all
    assert p.lead(now=205.0) == timedelta(seconds=15)  # the same boundary, 5 s closer


def test_the_lead_never_exceeds_its_cap():
    p = planner(cap=30)
    p.observe_profile([(25, 1_000_000)], now=0.0)  # 167 s of work: as early as allowed
    assert p.lead(now=0.0) == timedelta(seconds=26)
    p.observe_profile([(50, 1_000_000)], now=0.0)
    assert p.lead(now=0.0) == timedelta(seconds=30)


def test_the_count_of_fires_ahead_stops_at_a_caps_work_and_the_lead_is_then_the_cap():
    p = planner(cap=60, rate=10_000)  # counted at 50 %: 5,000/s, a cap's work is 300,000 fires
    assert p.count_limit() == 300_001
    # a burst 40-41 s away counted up to the limit: the lead covers it and whatever follows it
    # within the cap (not counted), as a count of every fire would have made it
    p.observe_profile([(0, 100), (40, 299_901)], now=0.0, cut=True)
    assert p.lead(now=0.0) == timedelta(seconds=60)
    p.observe_profile([(0, 100), (40, 299_800)], now=0.0)  # all of them counted, fewer than a cap's work
    assert p.lead(now=0.0) == timedelta(seconds=41)


def test_the_cap_is_kept_within_half_the_horizon_and_off_without_a_lead(monkeypatch):
    monkeypatch.setenv("CRONBOX_DISPATCH_LEAD_MAX", "10m")
    monkeypatch.setenv("CRONBOX_HORIZON", "1m")
    p = lead_planner(Config.from_env(), PollerSettings.from_env())
    assert p.cap == timedelta(seconds=30)
    monkeypatch.setenv("CRONBOX_DISPATCH_LEAD", "0")
    off = lead_planner(Config.from_env(), PollerSettings.from_env())
    assert not off.on and not off.stale() and off.lead() == timedelta(0)


def test_the_measured_rate_moves_the_lead():
    p = planner(rate=5_000)
    p.observe_rate(1000, 0.05)  # 20,000/s
    assert p.rate == pytest.approx(0.7 * 5_000 + 0.3 * 20_000)
    p.observe_rate(10, 0.001)  # a small batch is no measurement
    assert p.rate == pytest.approx(0.7 * 5_000 + 0.3 * 20_000)


def test_due_ahead_counts_ready_fires_per_second_from_now(fresh_dsn):
    with db.connect(fresh_dsn) as c:
        c.execute("SELECT cronbox.schedule('b' || i, cron => '0 0 1 1 *', overlap => 'allow') "
                  "FROM generate_series(1, 3) i")
        c.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, priority, origin) "
                  "SELECT j.job_id, j.bucket, t, t, 0, 'schedule' FROM cronbox.job j, "
                  "LATERAL (VALUES (now() + interval '10.2 seconds'), (now() + interval '30.5 seconds'), "
                  "(now() + interval '2 hours')) v(t)")
        c.execute("UPDATE cronbox.job_future SET hold = 'paused' WHERE due_at > now() + interval '30 seconds' "
                  "AND job_id = (SELECT min(job_id) FROM cronbox.job)")
        got = c.execute("SELECT second, fires FROM cronbox.due_ahead('1 minute', 1000)").fetchall()
        # held and far fires not counted (9 and 30: 0.2 to 0.5 s between the insert and the read, a loaded machine)
        assert got in ([(10, 3), (30, 2)], [(9, 3), (30, 2)], [(9, 3), (29, 2)], [(10, 3), (29, 2)])
        assert sum(r[1] for r in c.execute("SELECT * FROM cronbox.due_ahead('1 minute', 4)").fetchall()) == 4
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_within"):
            c.execute("SELECT * FROM cronbox.due_ahead('2 hours', 10)")


def _lane_futures(conn, n_jobs: int = 4) -> None:
    """Ready futures in four lanes (two queues, two priorities) over a minute and a half, many on
    a few seconds and one or two on others (microseconds apart), beside held, past and far ones."""
    for i in range(n_jobs):
        job(conn, f"lane{i}", overlap="allow", queue="qa" if i % 2 else "qb", priority=i // 2)
    conn.execute("""
        INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, queue, priority, hold, held_since)
        SELECT j.job_id, j.bucket, t, t, j.queue, j.priority, CASE WHEN g % 97 = 0 THEN 'paused' END,
               CASE WHEN g % 97 = 0 THEN now() END
        FROM cronbox.job j CROSS JOIN generate_series(1, 3000) g
        CROSS JOIN LATERAL (VALUES (now() + CASE WHEN g % 3 = 0 THEN interval '20 seconds'
                                                 WHEN g % 3 = 1 THEN (g % 90) * interval '1 second'
                                                 ELSE interval '1 minute' END
                                    + (g * 7 + j.job_id) * interval '1 microsecond'
                                    - CASE WHEN g % 50 = 0 THEN interval '30 seconds' ELSE interval '0' END)) v(t)
        WHERE j.name LIKE 'lane%'""")


def _counted(conn, within: str, limit: int) -> list[tuple[int, int]]:
    """What due_ahead must answer: each ready future within the window, lane by lane (queue,
    priority) soonest first in each, the first `limit` of them, counted by whole second from now."""
    return conn.execute("""
        SELECT s, count(*)::integer FROM (
            SELECT floor(date_part('epoch', f.due_at - now()))::integer AS s,
                   row_number() OVER (ORDER BY f.queue, f.priority, f.due_at) AS n
            FROM cronbox.job_future f
            WHERE f.hold IS NULL AND f.due_at > now() AND f.due_at <= now() + %s::interval) x
        WHERE n <= %s GROUP BY 1 ORDER BY 1""", (within, limit)).fetchall()


def test_due_ahead_counts_each_second_of_every_lane_as_a_plain_count_would_up_to_its_limit(conn):
    """The loose walk by second (one probe per second with fires, then that second's entries
    counted) answers what counting every future would: every lane, held, past and far futures
    left out, a limit reached in the middle of a second of a lane after the first."""
    _lane_futures(conn)
    total = sum(n for _, n in _counted(conn, "1 hour", 10_000_000))
    assert total > 9000
    for within, limit in (("1 hour", 10_000_000), ("1 minute", 10_000_000), ("30 seconds", 10_000_000),
                          ("1 hour", total - 1), ("1 hour", 4321), ("1 minute", 1), ("1 second", 100)):
        got = conn.execute("SELECT second, fires FROM cronbox.due_ahead(%s, %s)", (within, limit)).fetchall()
        assert got == _counted(conn, within, limit), (within, limit)


def test_due_ahead_reads_index_entries_only_not_each_future_s_row(fresh_dsn):
    """The count of fires ahead reads the lane index alone (runs as cronbox_runner: no row
    security check wanting each future's job from the heap): 20,000 futures on one second, not
    written in due order, cost the index's pages, not a heap page each."""
    with db.connect(fresh_dsn) as c:
        # a commit flushed at once: VACUUM marks a page all-visible only once its rows' commit is
        # on disk (the test cluster commits asynchronously)
        c.execute("SET synchronous_commit = on")
        c.execute("SELECT cronbox.schedule('burst', cron => '0 0 1 1 *', overlap => 'allow')")
        c.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                  "SELECT j.job_id, j.bucket, t, t FROM cronbox.job j, generate_series(1, 20000) g, "
                  "LATERAL (VALUES (date_trunc('second', now()) + interval '30 seconds' "
                  "+ (g * 7919 % 20000) * interval '1 microsecond')) v(t)")  # not in the order written
        c.commit()
        c.autocommit = True
        c.execute("VACUUM (ANALYZE) cronbox.job_future")  # all-visible, as autovacuum leaves a steady table
        plan = c.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM cronbox.due_ahead('1 minute', 100000)"
                         ).fetchone()[0][0]["Plan"]
        assert plan["Actual Rows"] == 1
        assert plan["Shared Hit Blocks"] + plan["Shared Read Blocks"] < 2000, plan


def test_a_fire_dispatched_long_ahead_is_not_claimed_by_a_relay_until_its_own_lead(conn):
    job(conn, "far", overlap="allow")
    future(conn, "far", 60)
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead_at(100, '1 minute', p_now => %s)",
                        (at(5),)).fetchone()[0] == 1
    claim = ("SELECT count(*) FROM cronbox.claim_outbox_at('r1', 100, '30 seconds', p_now => %s, "
             "p_ahead => '500 milliseconds')")
    assert conn.execute(claim, (at(5),)).fetchone()[0] == 0
    assert conn.execute(claim, (at(59.4),)).fetchone()[0] == 0
    assert conn.execute(claim, (at(59.6),)).fetchone()[0] == 1
    assert conn.execute("SELECT lease_until FROM cronbox.outbox").fetchone()[0] == at(90)  # from the due time


def test_a_pause_withdraws_a_fire_dispatched_a_minute_ahead(conn):
    job(conn, "far", overlap="allow")
    future(conn, "far", 60)
    conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead_at(100, '1 minute', p_now => %s)", (at(5),))
    conn.execute("SELECT cronbox.pause_at('far', p_now => %s)", (at(30),))
    [run] = runs(conn, "far")
    assert run["state"] == "cancelled" and "before its fire time" in run["error"]
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0] == 0


def test_a_relay_picks_up_a_run_written_beyond_its_lead_in_time_without_a_notify(fresh_dsn, tmp_path):
    """The poller's lead may exceed the relay's (a burst): the NOTIFY comes when the run is
    written, too early for the relay to claim it. The relay still claims it once it comes within
    its own lead (it claims again every half lead) and sends it at its time, not a poll interval
    (here 30 s) later."""
    arrivals: list[tuple[float, dict]] = []

    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        doc = orjson.loads(body)
        arrivals.extend((time.time(), m) for m in (doc if isinstance(doc, list) else [doc]))
        return web.Response(status=202)

    with ThreadedWorker(answer) as worker:
        env = {"CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_DISPATCH_LEAD": "500ms", "CRONBOX_POLL_INTERVAL": "30s"}
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            with db.connect(fresh_dsn) as conn:
                conn.execute("SELECT cronbox.schedule('far', cron => '0 0 1 1 *', overlap => 'allow')")
                conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                             "SELECT job_id, bucket, now() + interval '3 seconds', now() + interval '3 seconds' "
                             "FROM cronbox.job WHERE name = 'far'")
                assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(10, '5 seconds')").fetchone()[0] == 1
            wait_until(lambda: arrivals, timeout=20, what="the far run delivered")
            assert relay.terminate() == 0, relay.output
    [(t, m)] = arrivals
    fire = datetime.fromisoformat(m["fire_at"]).timestamp()
    assert fire - 0.005 <= t < fire + 1.0, (t - fire)


def test_fires_of_one_instant_claimed_in_several_claims_leave_together_and_never_early(fresh_dsn, tmp_path):
    """Rows claimed ahead wait in the relay for their due time grouped by it, across claims
    (relay/lanes.py, departures): 20 fires of one instant claimed 5 at a time reach a worker
    that declares batches as one request, at their time and not before it."""
    requests: list[tuple[float, list[dict]]] = []

    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        doc = orjson.loads(body)
        requests.append((time.time(), doc if isinstance(doc, list) else [doc]))
        return web.Response(status=202, headers={"Cronbox-Accept-Batch": "100"})

    with ThreadedWorker(answer) as worker:
        env = {"CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_DISPATCH_LEAD": "3s", "CRONBOX_RELAY_BATCH": "5"}
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            with db.connect(fresh_dsn) as conn:
                conn.execute("SELECT cronbox.schedule('warm', cron => '0 0 1 1 *', overlap => 'allow')")
                conn.execute("SELECT cronbox.trigger('warm')")  # the first answer declares batches
                wait_until(lambda: requests, timeout=20, what="the warm-up run delivered")
                for i in range(20):
                    conn.execute(f"SELECT cronbox.schedule('same-{i}', cron => '0 0 1 1 *', overlap => 'allow')")
                conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                             "SELECT job_id, bucket, date_trunc('second', now()) + interval '2 seconds', "
                             "date_trunc('second', now()) + interval '2 seconds' "
                             "FROM cronbox.job WHERE name LIKE 'same-%'")
                assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(100, '5 seconds')").fetchone()[0] == 20
            wait_until(lambda: sum(len(ms) for _, ms in requests[1:]) >= 20, timeout=20, what="20 fires delivered")
            assert relay.terminate() == 0, relay.output
    [(t, messages)] = requests[1:]
    assert len(messages) == 20
    fire = datetime.fromisoformat(messages[0]["fire_at"]).timestamp()
    assert fire <= t < fire + 0.5, (t - fire)
