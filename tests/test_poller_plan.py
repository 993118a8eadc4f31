"""A saturation pass computes each distinct question once (poller/plan.py): schedules sharing
an expression, a time zone, a frontier and a catch-up policy share one computation; any input
that differs (start, catch-up mode or window, time zone, end) gets its own, and each job
stores exactly its own fires: preview's (the SQL engine) after now, its own missed gap before."""

from __future__ import annotations

from datetime import timedelta

from poller.saturate import saturate_pass

from .schedhelp import aconn, futures, gaps, one, rows, schedule, utc  # noqa: F401

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
GRACE = timedelta(seconds=30)


async def preview(conn, cron: str, tz: str, starts_at, now, until) -> list:
    fires = await rows(conn, "SELECT fire_at FROM cronbox.preview_at(cron => %s, timezone => %s, starts_at => %s, "
                             "n => 1000, p_now => %s)", cron, tz, starts_at, now)
    return [f for f in fires if f <= until]


async def test_schedules_sharing_an_expression_share_one_computation_and_keep_their_own_fires(aconn):
    now = utc(2026, 10, 24, 12, 0)  # Europe/Berlin falls back on 2026-10-25 at 03:00 local
    horizon = 2 * DAY
    same = dict(cron="30 2 * * *", timezone="Europe/Berlin")
    for k in range(20):  # twenty identical definitions: one computation
        await schedule(aconn, name=f"same-{k}", **same, p_now=now)
    cases = {  # one input differs each time
        "new-york": dict(cron="30 2 * * *", timezone="America/New_York"),
        "starts-later": dict(**same, starts_at=now + 15 * HOUR),  # after the first fire
        "ends-earlier": dict(**same, ends_at=now + DAY),
        "every-half-hour": dict(cron="*/30 2 * * *", timezone="Europe/Berlin"),
        "past-start-all": dict(**same, starts_at=now - 5 * DAY, catchup="all", catchup_window="3 days"),
        "past-start-latest": dict(**same, starts_at=now - 5 * DAY, catchup="latest"),
        "past-start-skip": dict(**same, starts_at=now - 5 * DAY, catchup="skip"),
    }
    for name, args in cases.items():
        await schedule(aconn, name=name, **args, p_now=now)
    p = await saturate_pass(aconn, batch=1000, horizon=horizon, grace=GRACE, now=now)
    assert p.planned == p.claimed == 20 + len(cases)
    assert p.computed == 1 + len(cases), "identical definitions were computed more than once"
    assert await one(aconn, "SELECT count(*) FROM cronbox.job WHERE paused") == 0

    until = now + horizon
    want_same = await preview(aconn, "30 2 * * *", "Europe/Berlin", None, now, until)
    # 02:30 local on the fall-back day (still summer time then), and the day after (winter time)
    assert want_same == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    for k in range(20):
        assert await futures(aconn, f"same-{k}") == want_same
    assert await futures(aconn, "new-york") == await preview(aconn, "30 2 * * *", "America/New_York", None, now, until)
    assert await futures(aconn, "starts-later") == [utc(2026, 10, 26, 1, 30)]
    assert await futures(aconn, "ends-earlier") == [utc(2026, 10, 25, 0, 30)]
    # not fixed-time: both instants of the repeated 02:00-02:59 hour fire
    half = await futures(aconn, "every-half-hour")
    assert half == await preview(aconn, "*/30 2 * * *", "Europe/Berlin", None, now, until)
    assert half[:4] == [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 0),
                        utc(2026, 10, 25, 1, 30)]
    # the past starts: each its own catch-up (a new job looks back at most its catch-up window),
    # then the same fires ahead as the others
    late = {d: utc(2026, 10, d, 0, 30) for d in range(20, 25)}  # 02:30 summer time, 20th..24th
    assert await futures(aconn, "past-start-all") == [late[22], late[23], late[24], *want_same]  # 3 days
    assert await gaps(aconn, "past-start-all") == []
    assert await futures(aconn, "past-start-latest") == [late[24], *want_same]  # 1 day, the latest runs
    assert await futures(aconn, "past-start-skip") == want_same
    assert await gaps(aconn, "past-start-skip") == [(late[24], late[24], 1)]
    # next_fire is each job's own: the fire after its last future
    assert await one(aconn, "SELECT next_fire FROM cronbox.job JOIN cronbox.job_fire USING (job_id) WHERE name = 'same-0'") == utc(2026, 10, 27, 1, 30)
    assert await one(aconn, "SELECT next_fire, finished_at IS NOT NULL FROM cronbox.job JOIN cronbox.job_fire USING (job_id) "
                            "WHERE name = 'ends-earlier'") == (None, True)


async def test_interval_schedules_with_their_own_anchors_get_their_own_fires(aconn):
    now = utc(2026, 3, 29, 0, 30)  # Europe/Berlin springs forward at 01:00 UTC: intervals ignore it
    for k in range(5):
        await schedule(aconn, name=f"every-{k}", every="25 minutes", timezone="Europe/Berlin",
                       starts_at=now + k * timedelta(minutes=7), p_now=now)
    await saturate_pass(aconn, batch=1000, horizon=2 * HOUR, grace=GRACE, now=now)
    for k in range(5):
        start = now + k * timedelta(minutes=7)
        assert await futures(aconn, f"every-{k}") == [start + i * timedelta(minutes=25) for i in range(5)
                                                      if start + i * timedelta(minutes=25) <= now + 2 * HOUR]
