"""Exclusion calendars and max_runs where the poller stores fires (cronbox.store_fires, called
by poller/saturate.py): excluded fires are not stored but recorded `skipped` with the calendar
in the reason, one row per stretch however long; a canary job keeps firing; a calendar change
recomputes pending futures; max_runs finishes a schedule after N fires."""

from __future__ import annotations

from datetime import timedelta

from cronbox import db

from .procs import Proc, wait_until
from .schedhelp import aconn, changes, futures, one, rows, saturate, schedule, utc  # noqa: F401

T0 = utc(2030, 1, 1, 0, 0)
SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


async def calendar(conn, name: str, now=T0, **args) -> int:
    named = "".join(f", {k} => %({k})s" for k in args)
    cur = await conn.execute(f"SELECT cronbox.create_calendar_at(%(name)s{named}, p_now => %(now)s)",
                             {"name": name, "now": now, **args})
    return (await cur.fetchone())[0]


async def skipped(conn, name: str) -> list[tuple]:
    return await rows(conn, "SELECT fire_at, missed_last_at, missed_fires, error FROM cronbox.runs "
                            "WHERE job = %s AND state = 'skipped' ORDER BY fire_at", name)


async def test_excluded_fires_are_skipped_with_the_reason_as_one_row_however_many_passes(aconn):
    await calendar(aconn, "newyear", dates=["2030-01-01"])
    await schedule(aconn, name="quiet", every="1 second", starts_at=T0 + SEC, exclude="newyear", p_now=T0)
    await schedule(aconn, name="canary", every="1 second", starts_at=T0 + SEC, p_now=T0)
    passes = 0
    for k in range(0, 10):  # a minute apart: a job is refilled when half the horizon is left
        passes += (await saturate(aconn, T0 + k * MIN))[0] > 0
    assert passes == 5
    assert await futures(aconn, "quiet") == []
    assert len(await futures(aconn, "canary")) == 10 * 60
    [(first, last, n, error)] = await skipped(aconn, "quiet")  # one row over the five passes
    assert (first, last, n) == (T0 + SEC, T0 + 10 * MIN, 10 * 60)
    assert error.startswith("excluded by calendar 'newyear': 600 fires from 2030-01-01 00:00:01")


async def test_a_stored_fire_closes_the_stretch_and_the_next_exclusion_starts_a_new_row(aconn):
    # excluded: the first 30 seconds of every minute (a cron calendar matches to the minute,
    # so use minutes: 00:00-00:01 and 00:03 excluded)
    await calendar(aconn, "gaps", crons=["0-1,3 0 * * *"])
    await schedule(aconn, name="j", every="20 seconds", starts_at=T0, exclude="gaps", p_now=T0)
    await schedule(aconn, name="canary", every="20 seconds", starts_at=T0, p_now=T0)
    await saturate(aconn, T0, horizon=5 * MIN)
    got = await skipped(aconn, "j")
    assert [(a, b, n) for a, b, n, _ in got] == [(T0, T0 + 100 * SEC, 6), (T0 + 3 * MIN, T0 + 3 * MIN + 40 * SEC, 3)]
    assert await futures(aconn, "j") == [T0 + k * 20 * SEC for k in (6, 7, 8, 12, 13, 14, 15)]
    assert len(await futures(aconn, "canary")) == 16


async def test_changing_a_calendar_recomputes_the_pending_futures_of_its_jobs(aconn):
    await calendar(aconn, "h", dates=["2030-01-02"])
    await schedule(aconn, name="j", every="1 minute", starts_at=T0, exclude="h", p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    assert len(await futures(aconn, "j")) == 11
    assert await one(aconn, "SELECT fires_made FROM cronbox.job JOIN cronbox.job_fire USING (job_id) WHERE name = 'j'") == 11
    await calendar(aconn, "h", dates=["2030-01-01"], now=T0 + 30 * SEC)
    assert await futures(aconn, "j") == [T0]  # due fires stay; later ones go
    assert await one(aconn, "SELECT fires_made FROM cronbox.job JOIN cronbox.job_fire USING (job_id) WHERE name = 'j'") == 1
    await saturate(aconn, T0 + 30 * SEC, horizon=10 * MIN)
    assert await futures(aconn, "j") == [T0]
    [(first, last, n, _)] = await skipped(aconn, "j")
    assert (first, last, n) == (T0 + MIN, T0 + 10 * MIN, 10)


async def test_max_runs_finishes_the_schedule_after_n_fires_and_schedule_can_raise_it(aconn):
    await schedule(aconn, name="j", every="10 seconds", starts_at=T0 + 10 * SEC, max_runs=3, p_now=T0)
    await saturate(aconn, T0)
    assert await futures(aconn, "j") == [T0 + k * 10 * SEC for k in (1, 2, 3)]
    assert await one(aconn, "SELECT finished_at IS NOT NULL AND next_fire IS NULL FROM cronbox.job JOIN cronbox.job_fire USING (job_id) WHERE name = 'j'")
    # finished in the change log once the third fire is dispatched, not before
    assert "finished" not in [a for a, _, _ in await changes(aconn, "j")]
    assert await rows(aconn, "SELECT fire_at FROM cronbox.next_fires_at('j', 10, %s)", T0) == \
        [T0 + k * 10 * SEC for k in (1, 2, 3)]
    # raised: it goes on from where it stopped, for two more fires
    await schedule(aconn, name="j", every="10 seconds", starts_at=T0 + 10 * SEC, max_runs=5, p_now=T0 + 35 * SEC)
    assert await one(aconn, "SELECT finished_at FROM cronbox.job WHERE name = 'j'") is None
    await saturate(aconn, T0 + 35 * SEC)
    assert await futures(aconn, "j") == [T0 + k * 10 * SEC for k in (1, 2, 3, 4, 5)]
    # lowered to what it has made: finished at once; cleared: it goes on
    await schedule(aconn, name="j", every="10 seconds", starts_at=T0 + 10 * SEC, max_runs=2, p_now=T0 + 36 * SEC)
    assert await one(aconn, "SELECT finished_at IS NOT NULL FROM cronbox.job WHERE name = 'j'")
    await schedule(aconn, name="j", every="10 seconds", starts_at=T0 + 10 * SEC, p_now=T0 + 37 * SEC)
    await saturate(aconn, T0 + 37 * SEC)
    assert len(await futures(aconn, "j")) > 5


async def test_max_runs_is_logged_finished_when_the_last_fire_is_dispatched(aconn):
    await schedule(aconn, name="j", every="10 seconds", starts_at=T0 + 10 * SEC, max_runs=2,
                   overlap="allow", p_now=T0)
    await saturate(aconn, T0)
    await aconn.execute("SELECT cronbox.dispatch_at(100, p_now => %s)", (T0 + 10 * SEC,))
    assert "finished" not in [a for a, _, _ in await changes(aconn, "j")]
    await aconn.execute("SELECT cronbox.dispatch_at(100, p_now => %s)", (T0 + 20 * SEC,))
    assert [(a, r) for a, r, _ in await changes(aconn, "j") if a == "finished"] == [
        ("finished", "max_runs reached: 2 fires")]


async def test_excluded_fires_and_manual_runs_do_not_count_towards_max_runs(aconn):
    await calendar(aconn, "odd", crons=["1,3,5,7,9 * * * *"])
    await schedule(aconn, name="j", every="1 minute", starts_at=T0, max_runs=3, exclude="odd", p_now=T0)
    await aconn.execute("SELECT cronbox.trigger_at('j', p_now => %s)", (T0,))
    await saturate(aconn, T0, horizon=10 * MIN)
    assert await futures(aconn, "j") == [T0, T0 + 2 * MIN, T0 + 4 * MIN]
    assert await rows(aconn, "SELECT fire_at FROM cronbox.next_fires_at('j', 10, %s)", T0) == \
        [T0, T0 + 2 * MIN, T0 + 4 * MIN]


def test_a_real_poller_skips_the_excluded_job_while_the_canary_fires(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        today = conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]
        conn.execute("SELECT cronbox.create_calendar('freeze', ranges => ARRAY[daterange(%s - 1, %s + 2)])",
                     (today, today))
        conn.execute("SELECT cronbox.schedule('quiet', every => '1 second', exclude => 'freeze')")
        conn.execute("SELECT cronbox.schedule('canary', every => '1 second', overlap => 'allow')")
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_HORIZON="4s") as poller:
        def canary_fired() -> bool:
            with db.connect(fresh_dsn) as conn:
                return conn.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'canary' "
                                    "AND state <> 'skipped'").fetchone()[0] >= 8
        wait_until(canary_fired, timeout=60, what="eight canary runs")
        assert poller.terminate() == 0, poller.output
    with db.connect(fresh_dsn) as conn:
        got = conn.execute("SELECT state, missed_fires, error FROM cronbox.runs WHERE job = 'quiet'").fetchall()
        assert conn.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                            "WHERE j.name = 'quiet'").fetchone()[0] == 0
    [(state, n, error)] = got  # one row for the whole stretch, over several passes
    assert state == "skipped" and n >= 8 and error.startswith(f"excluded by calendar 'freeze': {n} fires from ")


async def test_next_fires_lists_exactly_what_the_poller_then_stores_with_calendars_and_max_runs(aconn):
    # Berlin around its 2030 spring-forward night, a cron calendar for nights and a date
    t0 = utc(2030, 3, 30, 12, 0)
    await calendar(aconn, "nights", now=t0, crons=["* 0-5 * * *"], timezone="Europe/Berlin")
    await calendar(aconn, "sunday", now=t0, dates=["2030-03-31"], timezone="Europe/Berlin")
    await schedule(aconn, name="j", cron="*/20 * * * *", timezone="Europe/Berlin", exclude="nights, sunday",
                   max_runs=40, p_now=t0)
    promised = await rows(aconn, "SELECT fire_at FROM cronbox.next_fires_at('j', 1000, %s)", t0)
    assert len(promised) == 40
    await saturate(aconn, t0, horizon=timedelta(days=3))
    assert await futures(aconn, "j") == promised
    assert await one(aconn, "SELECT finished_at IS NOT NULL FROM cronbox.job WHERE name = 'j'")
