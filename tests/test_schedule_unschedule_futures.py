"""No future outlives its job. cronbox.job_future has no foreign key to cronbox.job (migration
0442: its check locked the job row for every future written); unschedule() deletes the job's
futures itself, and every writer of futures holds the job's lock, which unschedule() takes
first: a saturation pass storing a job's fires and the job's unschedule() wait for each other,
in either order, and leave no future behind."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg

from poller.saturate import saturate_once

from .schedhelp import aconn, one, saturate, schedule, utc  # noqa: F401

T0 = utc(2030, 1, 1, 0, 0)
MIN = timedelta(minutes=1)
ORPHANS = "SELECT count(*) FROM cronbox.job_future f WHERE NOT EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = f.job_id)"


async def test_unschedule_deletes_the_futures_of_every_origin_and_held_ones_and_only_its_own(aconn):
    await schedule(aconn, name="gone", cron="* * * * *", p_now=T0)
    await schedule(aconn, name="kept", cron="* * * * *", p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    # one future of each other origin, one of them held, as trigger, retries, dependencies,
    # backfills and re-runs write them
    await aconn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, priority, origin, hold, queue) "
        "SELECT j.job_id, j.bucket, %s + o.n * interval '1 second', %s, j.priority, o.origin, o.hold, j.queue "
        "FROM cronbox.job j, (VALUES ('manual', NULL, 1), ('retry', NULL, 2), ('dependency', 'dependency', 3), "
        "                            ('backfill', NULL, 4), ('rerun', 'overlap', 5)) o(origin, hold, n) "
        "WHERE j.name = 'gone'", (T0 - 30 * MIN, T0))
    kept = await one(aconn, "SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                            "WHERE j.name = 'kept'")
    assert kept == 10
    assert await one(aconn, "SELECT count(DISTINCT origin) FROM cronbox.job_future f JOIN cronbox.job j "
                            "USING (job_id) WHERE j.name = 'gone'") == 6

    assert await one(aconn, "SELECT cronbox.unschedule_at('gone', p_now => %s)", T0 + MIN)
    assert await one(aconn, ORPHANS) == 0
    assert await one(aconn, "SELECT count(*) FROM cronbox.job_future") == kept


async def _pass(dsn: str, now) -> tuple[int, int, int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        return await saturate_once(c, batch=100, horizon=10 * MIN, grace=timedelta(seconds=30), now=now)


async def test_a_pass_storing_a_jobs_fires_and_its_unschedule_leave_no_future_in_either_order(fresh_dsn):
    async with await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as a, \
            await psycopg.AsyncConnection.connect(fresh_dsn, autocommit=True) as b:
        for name in ("x", "y"):
            await schedule(a, name=name, cron="* * * * *", p_now=T0)
        b_pid = await one(b, "SELECT pg_backend_pid()")

        # 1. the pass first: it holds x's lock from its claim to its commit; unschedule waits
        async with a.transaction():
            await saturate_once(a, batch=100, horizon=10 * MIN, grace=timedelta(seconds=30), now=T0)
            assert await one(a, "SELECT count(*) FROM cronbox.job_future") == 20
            gone = asyncio.create_task(one(b, "SELECT cronbox.unschedule_at('x', p_now => %s)", T0))
            for _ in range(600):  # until unschedule waits on the pass's transaction
                if await one(a, "SELECT pg_backend_pid() = ANY (pg_blocking_pids(%s))", b_pid) or gone.done():
                    break
                await asyncio.sleep(0.05)
            assert not gone.done(), "unschedule did not wait for the pass holding the job's lock"
        assert await gone is True
        assert await one(a, ORPHANS) == 0
        assert await one(a, "SELECT count(*) FROM cronbox.job_future") == 10

        # 2. unschedule first: a pass meanwhile skips the job (its lock is held), and finds it
        # gone once unschedule commits
        await schedule(a, name="x", cron="* * * * *", p_now=T0)
        async with b.transaction():
            assert await one(b, "SELECT cronbox.unschedule_at('x', p_now => %s)", T0)
            claimed, futures, _ = await _pass(fresh_dsn, T0)
            assert (claimed, futures) == (0, 0)  # y is saturated, x's lock is held
        assert await _pass(fresh_dsn, T0) == (0, 0, 0)
        assert await one(a, ORPHANS) == 0
        assert await one(a, "SELECT count(*) FROM cronbox.job_future") == 10
