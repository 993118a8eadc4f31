"""Catch-up: fires the poller finds in the past (it was down, the schedule started in the
past, the clock jumped) are sorted by the job's policy; each dropped fire is a `missed`
history row per gap (first fire, last fire, count), counted per job. "The poller was down" = saturation passes at a later p_now."""

from __future__ import annotations

from datetime import timedelta

import pytest

from poller.plan import CATCHUP_MAX

from .schedhelp import aconn, futures, gaps, missed, one, saturate, schedule, utc  # noqa: F401

T0 = utc(2030, 1, 1, 0, 0)
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)
SEC = timedelta(seconds=1)


def minutes(*ks: int) -> list:
    return [T0 + k * MIN for k in ks]


@pytest.mark.parametrize("catchup, window, want_missed, want_futures", [
    # down from T0+2m to T0+60m; grace 30 s: fires T0+3m .. T0+59m are late
    ("skip", "1 day", range(3, 60), [1, 2, 60, 61, 62]),
    ("latest", "1 day", range(3, 59), [1, 2, 59, 60, 61, 62]),
    ("all", "30 minutes", range(3, 30), [1, 2, *range(30, 63)]),
])
async def test_fires_missed_while_the_poller_was_down_follow_the_catchup_policy(
        aconn, catchup, window, want_missed, want_futures):
    await schedule(aconn, name="c", cron="* * * * *", catchup=catchup, catchup_window=window, p_now=T0)
    await saturate(aconn, T0, horizon=2 * MIN)
    assert await futures(aconn, "c") == minutes(1, 2)
    await saturate(aconn, T0 + HOUR, horizon=2 * MIN)  # the poller comes back an hour later
    assert await missed(aconn, "c") == minutes(*want_missed)
    assert await futures(aconn, "c") == minutes(*want_futures)
    assert await one(aconn, "SELECT missed_count FROM cronbox.schedules WHERE name = 'c'") == len(want_missed)
    # one row for the whole gap, saying how many fires and which policy
    assert await one(aconn, "SELECT count(*) FROM cronbox.runs WHERE job = 'c' AND state = 'missed' "
                            "AND error LIKE %s", f"missed: {len(want_missed)} fires from % by catch-up policy {catchup}") == 1


async def test_a_long_backlog_is_one_gap_row_written_in_one_pass_without_holes(aconn):
    await schedule(aconn, name="b", every="1 second", starts_at=T0, catchup="skip", p_now=T0)
    await saturate(aconn, T0, horizon=2 * MIN)
    claimed, _, dropped = await saturate(aconn, T0 + HOUR, horizon=2 * MIN)
    assert claimed == 1  # the late fires are counted, not walked
    lost = await missed(aconn, "b")
    kept = await futures(aconn, "b")
    assert dropped == 1 and len(lost) == 3570 - 121  # T0+121s .. T0+3569s were late
    assert sorted(lost + kept) == [T0 + k * SEC for k in range(3600 + 121)]


async def test_a_schedule_created_with_a_past_start_catches_up_from_its_start(aconn):
    await schedule(aconn, name="s", every="1 hour", starts_at=T0 - 5 * HOUR, catchup="all", p_now=T0)
    await saturate(aconn, T0)
    assert await futures(aconn, "s") == [T0 - k * HOUR for k in range(5, -1, -1)]  # oldest first
    assert await missed(aconn, "s") == []


async def test_a_past_start_with_latest_runs_only_the_most_recent_late_fire(aconn):
    await schedule(aconn, name="l", every="1 hour", starts_at=T0 - 5 * HOUR, p_now=T0)
    await saturate(aconn, T0)
    assert await missed(aconn, "l") == [T0 - k * HOUR for k in range(5, 1, -1)]
    assert await futures(aconn, "l") == [T0 - HOUR, T0]


async def test_a_new_job_looks_back_at_most_its_catchup_window(aconn):
    await schedule(aconn, name="w", every="1 hour", starts_at=T0 - timedelta(days=3), catchup="skip",
                   catchup_window="1 day", p_now=T0)
    await saturate(aconn, T0)
    assert await missed(aconn, "w") == [T0 - k * HOUR for k in range(24, 0, -1)]
    assert await futures(aconn, "w") == [T0]


async def test_misfire_grace_decides_what_is_late(aconn):
    await schedule(aconn, name="g", every="10 seconds", starts_at=T0, catchup="skip", p_now=T0)
    await saturate(aconn, T0 + MIN, horizon=10 * SEC, grace=25 * SEC)
    assert await missed(aconn, "g") == [T0 + k * 10 * SEC for k in range(0, 4)]  # older than T0+35s
    assert (await futures(aconn, "g"))[0] == T0 + 40 * SEC


async def test_a_clock_jumping_back_neither_refires_nor_drops(aconn):
    await schedule(aconn, name="j", cron="* * * * *", p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    before = await futures(aconn, "j")
    assert await saturate(aconn, T0 - HOUR, horizon=10 * MIN) == (0, 0, 0)
    assert await futures(aconn, "j") == before
    await saturate(aconn, T0 + 8 * MIN, horizon=10 * MIN)
    assert await futures(aconn, "j") == minutes(*range(1, 19))
    assert await missed(aconn, "j") == []


async def test_a_one_second_schedule_down_ten_years_writes_one_gap_row_and_a_bounded_backlog(aconn):
    start = T0 - timedelta(days=3650)
    await schedule(aconn, name="ten", every="1 second", starts_at=start, catchup="all",
                   catchup_window="1 day", p_now=start)
    claimed, futures_written, gaps_written = await saturate(aconn, T0, horizon=2 * MIN)
    assert gaps_written == 1
    (first, last, n), = await gaps(aconn, "ten")
    kept = await futures(aconn, "ten")
    # 'all' replays at most CATCHUP_MAX (1,000) late fires: the most recent ones
    assert kept[0] == T0 - 30 * SEC - CATCHUP_MAX * SEC and first == start and last == kept[0] - SEC
    assert n == int((last - first).total_seconds()) + 1
    assert kept == [kept[0] + k * SEC for k in range(len(kept))] and kept[-1] == T0 + 2 * MIN
    assert await one(aconn, "SELECT count(*) FROM cronbox.runs WHERE job = 'ten'") == 1
    assert await one(aconn, "SELECT missed_count FROM cronbox.schedules WHERE name = 'ten'") == n


async def test_the_catchup_window_counts_calendar_months(aconn):
    t = utc(2030, 3, 31, 12, 0)
    start = t - timedelta(days=90)
    await schedule(aconn, name="m", every="1 day", starts_at=start, catchup="all",
                   catchup_window="1 month", p_now=start)
    await saturate(aconn, t, horizon=MIN)
    # 31 March minus one calendar month is 28 February (30 days would be 1 March)
    assert (await futures(aconn, "m"))[0] == utc(2030, 2, 28, 12, 0)


async def test_the_catchup_window_is_24_hours_a_day_across_dst(aconn):
    t = utc(2030, 3, 31, 12, 0)  # Europe/Paris sprang forward at 01:00 UTC that day
    await schedule(aconn, name="d", cron="0 * * * *", timezone="Europe/Paris", catchup="all",
                   catchup_window="1 day", p_now=t - timedelta(days=3))
    await saturate(aconn, t, horizon=MIN)
    assert (await futures(aconn, "d"))[0] == t - timedelta(hours=24)
    (first, last, n), = await gaps(aconn, "d")
    assert first == t - timedelta(hours=71) and last == t - timedelta(hours=25) and n == 47


async def test_materialised_fires_missed_while_the_poller_was_down_are_missed_not_overlap_skipped(aconn):
    await schedule(aconn, name="o", cron="* * * * *", p_now=T0)  # overlap skip, catchup latest
    await saturate(aconn, T0, horizon=5 * MIN)
    # the poller comes back at T0+5m30s: fires T0+1m .. T0+5m are all due at once
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_grace => '30 seconds', p_now => %s)",
              T0 + 5 * MIN + 30 * SEC)
    got = await one(aconn, "SELECT array_agg(state || ':' || left(error, 7) ORDER BY fire_at) FROM cronbox.runs "
                           "WHERE job = 'o' AND state IN ('missed', 'skipped')")
    assert got == ["missed:missed:"] * 4
    assert await one(aconn, "SELECT fire_at FROM cronbox.runs WHERE job = 'o' AND state = 'dispatched'") == T0 + 5 * MIN
    assert await one(aconn, "SELECT missed_count FROM cronbox.schedules WHERE name = 'o'") == 4


async def test_a_leap_day_schedule_catching_up_a_year_is_not_quarantined(aconn):
    # 29 February fires once in four years: counting back CATCHUP_MAX of its fires to find
    # where 'all' replays from would reach year 0; the walk back stops at the window's start.
    t = utc(2026, 11, 27, 4, 0)
    await schedule(aconn, name="leap", cron="0 0 29 2 *", starts_at=utc(2026, 3, 26), catchup="all",
                   catchup_window="366 days", p_now=utc(2026, 3, 20))
    await saturate(aconn, t)
    assert await one(aconn, "SELECT paused FROM cronbox.job WHERE name = 'leap'") is False
    assert await futures(aconn, "leap") == [] and await missed(aconn, "leap") == []
    assert await one(aconn, "SELECT next_fire FROM cronbox.job JOIN cronbox.job_fire USING (job_id) WHERE name = 'leap'") == utc(2028, 2, 29)
