"""Time zones and DST end to end: schedule() -> real saturation passes -> job_future rows, on
real change dates in Europe/Berlin and America/New_York; and no drift over 10,000 fires."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from .schedhelp import aconn, futures, saturate, schedule, utc  # noqa: F401

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


async def fires_over(aconn, name: str, tz: str, cron: str, start, days: int, horizon=timedelta(days=1)) -> list:
    """Schedule at `start` and saturate day by day for `days` days; return the futures."""
    await schedule(aconn, name=name, cron=cron, timezone=tz, p_now=start)
    for d in range(days + 1):
        await saturate(aconn, start + timedelta(days=d), horizon=horizon)
    return [f for f in await futures(aconn, name) if f <= start + timedelta(days=days)]


@pytest.mark.parametrize("tz, cron, start, want", [
    # Berlin spring forward 2025-03-30 02:00 CET -> 03:00 CEST: 02:30 does not exist, fires at 03:00
    (BERLIN, "30 2 * * *", utc(2025, 3, 28, 12),
     [utc(2025, 3, 29, 1, 30), utc(2025, 3, 30, 1, 0), utc(2025, 3, 31, 0, 30), utc(2025, 4, 1, 0, 30)]),
    # Berlin fall back 2025-10-26 03:00 CEST -> 02:00 CET: 02:30 happens twice, fires once (the first)
    (BERLIN, "30 2 * * *", utc(2025, 10, 24, 12),
     [utc(2025, 10, 25, 0, 30), utc(2025, 10, 26, 0, 30), utc(2025, 10, 27, 1, 30), utc(2025, 10, 28, 1, 30)]),
    # New York spring forward 2025-03-09 02:00 EST -> 03:00 EDT
    (NEW_YORK, "30 2 * * *", utc(2025, 3, 7, 12),
     [utc(2025, 3, 8, 7, 30), utc(2025, 3, 9, 7, 0), utc(2025, 3, 10, 6, 30), utc(2025, 3, 11, 6, 30)]),
    # New York fall back 2025-11-02 02:00 EDT -> 01:00 EST: 01:30 happens twice, fires once
    (NEW_YORK, "30 1 * * *", utc(2025, 10, 31, 12),
     [utc(2025, 11, 1, 5, 30), utc(2025, 11, 2, 5, 30), utc(2025, 11, 3, 6, 30), utc(2025, 11, 4, 6, 30)]),
    # 6 fields (seconds first), fixed hour, same rule
    (BERLIN, "15 30 2 * * *", utc(2025, 10, 24, 12),
     [utc(2025, 10, 25, 0, 30, 15), utc(2025, 10, 26, 0, 30, 15), utc(2025, 10, 27, 1, 30, 15),
      utc(2025, 10, 28, 1, 30, 15)]),
])
async def test_fixed_hour_job_fires_exactly_once_per_local_day_on_change_days(aconn, tz, cron, start, want):
    got = await fires_over(aconn, "fixed", tz, cron, start, days=4)
    assert got == want
    local_days = Counter(f.astimezone(ZoneInfo(tz)).date() for f in got)
    assert set(local_days.values()) == {1}


def matching_instants(tz: str, start: datetime, days: int, match) -> list[datetime]:
    """Oracle: every real minute in the window whose local wall time matches."""
    zone, out, t = ZoneInfo(tz), [], start
    while t <= start + timedelta(days=days):
        if match(t.astimezone(zone)):
            out.append(t)
        t += timedelta(minutes=1)
    return out


@pytest.mark.parametrize("tz, start", [
    (BERLIN, utc(2025, 3, 29)), (BERLIN, utc(2025, 10, 25)),
    (NEW_YORK, utc(2025, 3, 8, 5)), (NEW_YORK, utc(2025, 11, 1, 4)),
])
@pytest.mark.parametrize("cron, match", [
    ("30 * * * *", lambda t: t.minute == 30),
    ("0 */2 * * *", lambda t: t.minute == 0 and t.hour % 2 == 0),
    ("*/20 1-3 * * *", lambda t: t.minute % 20 == 0 and 1 <= t.hour <= 3),
])
async def test_wildcard_or_stepped_hour_follows_real_elapsed_time(aconn, tz, start, cron, match):
    got = await fires_over(aconn, "elapsed", tz, cron, start, days=3)
    assert got == sorted(set(got))  # never doubled
    real = [t for t in matching_instants(tz, start, 3, match) if t > start]
    assert set(real) <= set(got)  # never dropped: every real instant that matches fires
    # The only other fire allowed: the dialect's rule for wall times that do not exist -- a
    # matching wall time inside the spring-forward gap fires at the first instant after it.
    for extra in set(got) - set(real):
        assert gap_before(tz, extra, match), extra


def gap_before(tz: str, instant: datetime, match) -> bool:
    """True if a spring-forward gap ends at `instant` and a wall time inside it matches."""
    zone = ZoneInfo(tz)
    before, after = instant - timedelta(microseconds=1), instant
    jump = after.astimezone(zone).utcoffset() - before.astimezone(zone).utcoffset()
    if jump <= timedelta(0):
        return False
    wall = after.astimezone(zone).replace(tzinfo=None)
    return any(match(wall - timedelta(minutes=m)) for m in range(1, int(jump.total_seconds() // 60) + 1))


async def test_hourly_job_has_23_and_25_fires_on_the_change_days(aconn):
    got = await fires_over(aconn, "hourly", BERLIN, "30 * * * *", utc(2025, 3, 29), days=3)
    got += await fires_over(aconn, "hourly2", BERLIN, "30 * * * *", utc(2025, 10, 25), days=3)
    per_day = Counter(f.astimezone(ZoneInfo(BERLIN)).date() for f in got)
    assert per_day[date(2025, 3, 30)] == 23 and per_day[date(2025, 10, 26)] == 25
    assert all(b - a == timedelta(hours=1) for a, b in zip(got, got[1:]) if b - a < timedelta(days=1))


@pytest.mark.parametrize("args, step, horizon, grid", [
    # wildcard hour in Berlin: elapsed time, across the 2025-03-30 change
    ({"cron": "*/5 * * * *", "timezone": BERLIN}, timedelta(hours=12), timedelta(days=1),
     lambda k: utc(2025, 3, 15) + (k + 1) * timedelta(minutes=5)),
    ({"every": "7 seconds", "starts_at": utc(2025, 3, 15)}, timedelta(hours=1), timedelta(hours=2),
     lambda k: utc(2025, 3, 15) + k * timedelta(seconds=7)),
], ids=["cron-every-5-minutes-berlin", "every-7-seconds"])
async def test_no_drift_over_10000_consecutive_fires(aconn, args, step, horizon, grid):
    """Saturated pass after pass as p_now advances: every fire comes from the previous
    scheduled one, never from the clock, so fire 10,000 is still exactly on the grid."""
    start = utc(2025, 3, 15)
    await schedule(aconn, name="drift", p_now=start, **args)
    now = start
    while len(fires := await futures(aconn, "drift")) < 10_000:
        await saturate(aconn, now, horizon=horizon)
        now += step
    assert fires[:10_000] == [grid(k) for k in range(10_000)]


async def test_fixed_hour_daily_job_keeps_its_local_time_for_10000_days(aconn):
    start = utc(2025, 3, 15)
    await schedule(aconn, name="daily", cron="0 9 * * *", timezone=NEW_YORK, p_now=start)
    now = start
    while len(fires := await futures(aconn, "daily")) < 10_000:
        await saturate(aconn, now, horizon=timedelta(days=800))
        now += timedelta(days=400)
    local = [f.astimezone(ZoneInfo(NEW_YORK)) for f in fires[:10_000]]
    assert all((t.hour, t.minute, t.second, t.microsecond) == (9, 0, 0, 0) for t in local)
    assert all((b.date() - a.date()).days == 1 for a, b in zip(local, local[1:]))
