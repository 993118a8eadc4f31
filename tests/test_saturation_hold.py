"""A saturation pass holds its jobs' locks at most about CRONBOX_SATURATE_HOLD while it computes:
a computation still running then (the first of a new expression, a year of catch-up on a loaded
machine) gives the locks up, with nothing written, and goes on without them; its jobs are then
locked again and stored only where their row is still what was computed from."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import psycopg

from poller import saturate
from poller.saturate import saturate_pass

LOCKS_FREE = """
SELECT count(*) FROM (SELECT FROM cronbox.job_stat s JOIN cronbox.job j USING (job_id)
                      WHERE j.name IN ('steady', 'changed') FOR NO KEY UPDATE OF s SKIP LOCKED) x"""


async def test_a_pass_computing_past_its_hold_gives_the_locks_up_and_stores_only_unchanged_jobs(fresh_dsn, monkeypatch):
    real = saturate.plan_jobs
    started, release = threading.Event(), threading.Event()

    def slow_plan(*args, **kwargs):  # a computation that outlasts the hold: it waits for the test
        started.set()
        assert release.wait(60), "the test never let the computation finish"
        return real(*args, **kwargs)

    monkeypatch.setattr(saturate, "plan_jobs", slow_plan)
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as poller, \
            await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as other:
        for name in ("steady", "changed"):
            await other.execute("SELECT cronbox.schedule(%s, cron => '* * * * *')", (name,))
        running = asyncio.create_task(saturate_pass(poller, batch=10, horizon=timedelta(minutes=10),
                                                    grace=timedelta(seconds=30), budget=5.0, hold=0.05))
        assert await asyncio.to_thread(started.wait, 30)
        # while it computes, its jobs are free: another writer changes one of them meanwhile
        for _ in range(600):
            async with other.transaction():
                free = (await (await other.execute(LOCKS_FREE)).fetchone())[0]
            if free == 2 or running.done():
                break
            await asyncio.sleep(0.05)
        assert free == 2, "the pass kept its jobs locked while it computed"
        await other.execute("SELECT cronbox.schedule('changed', cron => '*/7 * * * *')")
        release.set()
        p = await running

        assert (p.claimed, p.planned) == (2, 1)
        minutes = dict(await (await other.execute(
            "SELECT j.name, array_agg(DISTINCT extract(minute FROM f.fire_at)::int) FROM cronbox.job_future f "
            "JOIN cronbox.job j USING (job_id) GROUP BY j.name")).fetchall())
        assert len(minutes["steady"]) >= 9  # its ten minutes of fires, stored after the relock
        # nothing computed from the old definition was stored over the new one
        assert all(m % 7 == 0 for m in minutes.get("changed", [])), minutes
