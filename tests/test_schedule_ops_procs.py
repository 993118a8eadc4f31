"""pause(until =>) and backfill with real processes and connections: a real poller
resumes a job by itself after its until while a canary keeps firing, and materialises a
backfill of the paused fires; a backfill pass racing a catch-up saturation of the same fire
on another connection skips the locked job, then never makes that fire twice."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import psycopg

from cronbox import db
from poller.backfill import backfill_once
from poller.saturate import saturate_once

from .procs import Proc, wait_until

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _fires(dsn: str, name: str) -> list[tuple[datetime, str, str]]:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT fire_at, origin, state FROM cronbox.runs WHERE job = %s "
                            "AND state NOT IN ('missed', 'cancelled') ORDER BY fire_at", (name,)).fetchall()


def test_a_real_poller_resumes_a_paused_job_after_until_and_backfills_the_pause(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('canary', every => '1 second', overlap => 'allow')")
        conn.execute("SELECT cronbox.schedule('napper', every => '1 second', overlap => 'allow')")
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_HORIZON="4s") as poller:
        wait_until(lambda: len(_fires(fresh_dsn, "napper")) >= 2, timeout=60, what="napper fires")
        with db.connect(fresh_dsn) as conn:
            paused_at, until = conn.execute(
                "SELECT now(), date_trunc('second', now()) + interval '4 seconds'").fetchone()
            assert conn.execute("SELECT cronbox.pause('napper', 'nap', until => %s)", (until,)).fetchone()[0]
        wait_until(lambda: any(f >= until + 2 * SEC for f, _, _ in _fires(fresh_dsn, "canary")),
                   timeout=60, what="canary fires past until")
        wait_until(lambda: any(f >= until for f, _, _ in _fires(fresh_dsn, "napper")),
                   timeout=30, what="napper fires again after until")
        napper = [f for f, _, _ in _fires(fresh_dsn, "napper")]
        canary = {f for f, _, _ in _fires(fresh_dsn, "canary")}
        inside = [f for f in napper if paused_at + SEC < f < until]
        assert inside == [], f"fired while paused: {inside}"
        assert min(f for f in napper if f >= until) < until + SEC, "did not resume from its until"
        first = min(f for f in canary if f > paused_at + SEC)
        assert all(first + k * SEC in canary for k in range(int((until - first) / SEC) + 2)), \
            "the canary missed a fire during the pause"
        with db.connect(fresh_dsn) as conn:
            assert conn.execute("SELECT action, changed_by FROM cronbox.schedule_changes WHERE job = 'napper' "
                                "ORDER BY change_id DESC LIMIT 1").fetchone() == ("resumed", "cronbox")
            request = conn.execute("SELECT cronbox.backfill('napper', %s, %s, overlap => 'allow')",
                                   (paused_at, until)).fetchone()[0]

        def done():
            with db.connect(fresh_dsn) as conn:
                return conn.execute("SELECT state = 'done' FROM cronbox.backfills WHERE backfill_id = %s",
                                    (request,)).fetchone()[0]
        wait_until(done, timeout=30, what="the backfill request done")
        # the fires of [paused_at, until): skipped by the pause (or withdrawn from the outbox)
        expected = [until - k * SEC for k in range(4, 0, -1) if until - k * SEC >= paused_at]
        wait_until(lambda: sum(o == "backfill" for _, o, _ in _fires(fresh_dsn, "napper")) >= len(expected),
                   timeout=30, what="backfilled runs")
        assert poller.terminate() == 0, poller.output
    fired = [f for f, _, _ in _fires(fresh_dsn, "napper")]
    assert len(fired) == len(set(fired)), "a fire ran twice"
    backfilled = sorted(f for f, o, _ in _fires(fresh_dsn, "napper") if o == "backfill")
    assert backfilled == expected


async def _race(dsn: str) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """A saturation pass left open on one connection while a backfill pass runs on another,
    then again after it committed: (during, after)."""
    saturator = await psycopg.AsyncConnection.connect(dsn, autocommit=False)
    backfiller = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    now = T0 + 60 * MIN
    try:
        await saturator.execute("SELECT 1")  # one transaction, left open after the pass
        await saturate_once(saturator, batch=10, horizon=10 * MIN, grace=30 * SEC, now=now)
        during = await backfill_once(backfiller, now=now)  # the job is locked: left for later
        await saturator.commit()
        return during, await backfill_once(backfiller, now=now)
    finally:
        await saturator.close()
        await backfiller.close()


def test_a_backfill_racing_a_catch_up_of_the_same_fire_makes_it_once(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule_at('r', every => '10 minutes', p_now => %s)", (T0,))
    async def first_pass():
        async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as c:
            await saturate_once(c, batch=10, horizon=10 * MIN, grace=30 * SEC, now=T0)
    asyncio.run(first_pass())  # T0+10m pending; then the poller is away for most of an hour
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.backfill_at('r', %s, %s, p_now => %s)", (T0, T0 + 55 * MIN, T0 + 60 * MIN))
    during, after = asyncio.run(_race(fresh_dsn))
    assert during == (0, 0, 0)  # never waits on (nor reads around) a saturation in flight
    # the catch-up ('latest') made T0+50m a regular future and recorded 20..40 as missed:
    # the backfill fires 20, 30, 40 and leaves 10 and 50, pending regular fires, alone
    assert after == (1, 3, 2)
    with db.connect(fresh_dsn) as conn:
        got = conn.execute("""
            SELECT fire_at, origin FROM cronbox.job_future WHERE fire_at <= %s
            UNION ALL SELECT fire_at, origin FROM cronbox.runs WHERE state <> 'missed' ORDER BY 1""",
            (T0 + 55 * MIN,)).fetchall()
    assert got == [(T0 + 10 * MIN, "schedule"), (T0 + 20 * MIN, "backfill"), (T0 + 30 * MIN, "backfill"),
                   (T0 + 40 * MIN, "backfill"), (T0 + 50 * MIN, "schedule")]
