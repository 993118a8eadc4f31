"""poller/cron.py without a database: the dialect, DST behaviour, drift, and bad input."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from poller.cron import CronError, CronSchedule, normalize, schedule_for
from tests.cron_cases import INVALID, VALID, expressions

UTC = timezone.utc
NY = "America/New_York"
BERLIN = "Europe/Berlin"


def local(tz: str, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(tz), fold=fold)


def fires(expr: str, tz: str, after: datetime, until: datetime, limit: int = 1000) -> list[str]:
    """Fires in (after, until] as local ISO strings (offset included), for readable asserts."""
    zone = ZoneInfo(tz)
    got = CronSchedule(normalize(expr), tz).fires_between(after, until, limit)
    return [f.astimezone(zone).isoformat() for f in got]


def chained(expr: str, tz: str, after: datetime, n: int) -> list[datetime]:
    schedule = CronSchedule(normalize(expr), tz)
    out: list[datetime] = []
    for _ in range(n):
        nxt = schedule.next_after(after)
        if nxt is None:
            break
        out.append(nxt)
        after = nxt
    return out


# --- the dialect -------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "expected"), VALID)
def test_valid_expression_normalizes_to_seven_fields(expr: str, expected: str) -> None:
    assert normalize(expr) == expected
    assert normalize(expected) == expected  # idempotent: the stored form re-validates
    croniter.expand(expected, second_at_beginning=True)
    assert CronSchedule(expected, NY).next_after(local(NY, 2026, 1, 1)) is not None


@pytest.mark.parametrize(("expr", "fragment"), INVALID)
def test_invalid_expression_raises_cron_error(expr: str, fragment: str) -> None:
    with pytest.raises(CronError) as info:
        normalize(expr)
    assert fragment in str(info.value)
    assert str(info.value).startswith("cron: ")


def test_null_expression_is_rejected() -> None:
    with pytest.raises(CronError, match="^cron: expression must not be NULL$"):
        normalize(None)  # type: ignore[arg-type]


def test_unknown_time_zone_is_rejected() -> None:
    with pytest.raises(CronError, match='unknown time zone "Mars/Olympus"'):
        CronSchedule("0 * * * * * *", "Mars/Olympus")


def test_naive_datetimes_are_rejected() -> None:
    schedule = CronSchedule("0 * * * * * *", "UTC")
    with pytest.raises(ValueError):
        schedule.next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        schedule.fires_between(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2), 10)


def test_schedule_for_caches_per_expression_and_zone() -> None:
    assert schedule_for("0 * * * * * *", NY) is schedule_for("0 * * * * * *", NY)
    assert schedule_for("0 * * * * * *", NY) is not schedule_for("0 * * * * * *", BERLIN)


def test_equal_range_means_the_single_value_not_the_whole_field() -> None:
    got = fires("5-5 * * * *", "UTC", local("UTC", 2026, 1, 1), local("UTC", 2026, 1, 1, 3))
    assert got == [f"2026-01-01T0{h}:05:00+00:00" for h in range(3)]


def test_start_with_step_at_field_maximum_is_that_value_only() -> None:
    got = fires("59/15 * * * *", "UTC", local("UTC", 2026, 1, 1), local("UTC", 2026, 1, 1, 2))
    assert got == ["2026-01-01T00:59:00+00:00", "2026-01-01T01:59:00+00:00"]


def test_day_of_week_range_ending_on_sunday() -> None:
    got = fires("0 12 * * FRI-SUN", "UTC", local("UTC", 2026, 1, 5), local("UTC", 2026, 1, 19))
    days = [datetime.fromisoformat(f).strftime("%a %d") for f in got]
    assert days == ["Fri 09", "Sat 10", "Sun 11", "Fri 16", "Sat 17", "Sun 18"]


def test_day_of_month_and_day_of_week_match_either() -> None:
    got = fires("0 0 13 * 5", "UTC", local("UTC", 2026, 2, 1), local("UTC", 2026, 2, 28))
    assert [f[:10] for f in got] == ["2026-02-06", "2026-02-13", "2026-02-20", "2026-02-27"]


def test_last_day_of_month() -> None:
    got = chained("0 0 L * *", "UTC", local("UTC", 2027, 12, 1), 4)
    assert [f.date().isoformat() for f in got] == [
        "2027-12-31", "2028-01-31", "2028-02-29", "2028-03-31",
    ]


def test_last_weekday_of_month() -> None:
    got = chained("0 0 * * 5L", "UTC", local("UTC", 2026, 1, 1), 3)
    assert [f.date().isoformat() for f in got] == ["2026-01-30", "2026-02-27", "2026-03-27"]


def test_nth_weekday_of_month() -> None:
    got = chained("0 0 * * FRI#3", "UTC", local("UTC", 2026, 1, 1), 3)
    assert [f.date().isoformat() for f in got] == ["2026-01-16", "2026-02-20", "2026-03-20"]
    # a fifth Monday exists only in some months
    got = chained("0 0 * * 1#5", "UTC", local("UTC", 2026, 1, 1), 3)
    assert [f.date().isoformat() for f in got] == ["2026-03-30", "2026-06-29", "2026-08-31"]


def test_year_limited_expression_ends() -> None:
    after = local(NY, 2026, 6, 1)
    got = chained("0 0 0 1 1 * 2027-2028", NY, after, 5)
    assert got == [datetime(2027, 1, 1, 5, tzinfo=UTC), datetime(2028, 1, 1, 5, tzinfo=UTC)]
    schedule = CronSchedule("0 0 0 1 1 * 2027-2028", NY)
    assert schedule.next_after(got[-1]) is None
    assert schedule.fires_between(after, local(NY, 2099, 1, 1), 100) == got


def test_far_year_is_reached() -> None:
    schedule = CronSchedule(normalize("0 0 12 1 1 * 2099"), "UTC")
    assert schedule.next_after(local("UTC", 1970, 1, 2)) == datetime(2099, 1, 1, 12, tzinfo=UTC)


def test_impossible_date_has_no_fire() -> None:
    assert CronSchedule(normalize("0 0 30 2 *"), "UTC").next_after(local("UTC", 2026, 1, 1)) is None


def test_fires_between_is_half_open_limited_and_utc() -> None:
    schedule = CronSchedule(normalize("@hourly"), BERLIN)
    after = datetime(2026, 1, 1, 0, tzinfo=UTC)
    got = schedule.fires_between(after, datetime(2026, 1, 1, 3, tzinfo=UTC), 10)
    assert got == [datetime(2026, 1, 1, h, tzinfo=UTC) for h in (1, 2, 3)]
    assert all(f.tzinfo is UTC for f in got)
    assert schedule.fires_between(after, datetime(2026, 1, 1, 3, tzinfo=UTC), 2) == got[:2]
    assert schedule.fires_between(after, datetime(2026, 1, 1, 3, tzinfo=UTC), 0) == []
    assert schedule.fires_between(after, after, 10) == []


def test_next_after_is_strict_and_ignores_sub_seconds() -> None:
    schedule = CronSchedule(normalize("*/2 * * * * *"), "UTC")
    base = datetime(2026, 1, 1, tzinfo=UTC)
    assert schedule.next_after(base) == base + timedelta(seconds=2)
    assert schedule.next_after(base + timedelta(microseconds=1)) == base + timedelta(seconds=2)
    assert schedule.next_after(base - timedelta(microseconds=1)) == base


# --- DST ---------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", ["30 1 * * *", "0 30 1 * * *", "0 30 1 * * * 2026-2027"])
def test_fixed_hour_job_fires_once_on_fall_back_day_new_york(expr: str) -> None:
    got = fires(expr, NY, local(NY, 2026, 10, 31, 12), local(NY, 2026, 11, 2, 12))
    assert got == ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
    # chaining from the previous fire (how the poller calls it) gives the same
    first = datetime.fromisoformat(got[0])
    assert CronSchedule(normalize(expr), NY).next_after(first) == datetime.fromisoformat(got[1])


def test_fixed_hour_job_fires_once_on_fall_back_day_berlin() -> None:
    got = fires("30 2 * * *", BERLIN, local(BERLIN, 2026, 10, 24, 12), local(BERLIN, 2026, 10, 26, 12))
    assert got == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]


def test_fixed_hour_list_fires_each_hour_once_on_fall_back_day() -> None:
    got = fires("30 1,2 * * *", NY, local(NY, 2026, 11, 1), local(NY, 2026, 11, 1, 12))
    assert got == ["2026-11-01T01:30:00-04:00", "2026-11-01T02:30:00-05:00"]


def test_hour_range_is_fixed_time_and_fires_once_on_fall_back_day() -> None:
    # Debian cron: neither minute nor hour starts with `*`, so a range is fixed-time too.
    got = fires("0 1-2 * * *", NY, local(NY, 2026, 11, 1), local(NY, 2026, 11, 1, 12))
    assert got == ["2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00"]


def test_wildcard_minute_in_a_fixed_hour_follows_elapsed_time_on_fall_back_day() -> None:
    # `* 1 * * *`: the minute field starts with `*`, so (as in Debian cron) the job follows
    # elapsed time: both real 01:xx hours run, each minute once.
    got = fires("* 1 * * *", NY, local(NY, 2026, 11, 1), local(NY, 2026, 11, 1, 12))
    assert len(got) == 120 and len(set(got)) == 120
    assert got[0] == "2026-11-01T01:00:00-04:00" and got[59] == "2026-11-01T01:59:00-04:00"
    assert got[60] == "2026-11-01T01:00:00-05:00" and got[-1] == "2026-11-01T01:59:00-05:00"


LORD_HOWE = "Australia/Lord_Howe"  # a 30-minute shift: 02:00 -> 01:30 (April), 02:00 -> 02:30 (October)


@pytest.mark.parametrize(("expr", "fixed"), [
    ("30 2 * * *", True), ("45 1-3 * * *", True), ("0 2,14 * * *", True), ("0/15 1 * * *", True),
    ("0 0 2 * * *", True), ("*/10 30 2 * * *", True), ("@daily", True),
    ("*/15 * * * *", False), ("5 * * * *", False), ("* 1 * * *", False), ("0 */2 * * *", False),
    ("*/20 1-3 * * *", False), ("@hourly", False),
])
def test_fixed_time_follows_debian_crons_rule_on_minute_and_hour(expr: str, fixed: bool) -> None:
    assert CronSchedule(normalize(expr), "UTC").fixed_time is fixed


@pytest.mark.parametrize(("tz", "day", "want"), [
    (NY, (2026, 11, 1), ["2026-11-01T01:45:00-04:00", "2026-11-01T02:45:00-05:00",
                         "2026-11-01T03:45:00-05:00"]),
    (BERLIN, (2026, 10, 25), ["2026-10-25T01:45:00+02:00", "2026-10-25T02:45:00+02:00",
                              "2026-10-25T03:45:00+01:00"]),
    (LORD_HOWE, (2026, 4, 5), ["2026-04-05T01:45:00+11:00", "2026-04-05T02:45:00+10:30",
                               "2026-04-05T03:45:00+10:30"]),
])
def test_hour_range_job_fires_once_per_wall_time_on_fall_back_day(tz: str, day: tuple[int, int, int],
                                                                   want: list[str]) -> None:
    assert fires("45 1-3 * * *", tz, local(tz, *day), local(tz, *day, 12)) == want


@pytest.mark.parametrize(("tz", "day", "want"), [
    # the gap 02:00-03:00 (NY, Berlin): 02:45 fires at the first instant after it
    (NY, (2026, 3, 8), ["2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00",
                        "2026-03-08T03:45:00-04:00"]),
    (BERLIN, (2026, 3, 29), ["2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00",
                             "2026-03-29T03:45:00+02:00"]),
    # Lord Howe's gap is 02:00-02:30: 02:45 exists
    (LORD_HOWE, (2026, 10, 4), ["2026-10-04T01:45:00+10:30", "2026-10-04T02:45:00+11:00",
                                "2026-10-04T03:45:00+11:00"]),
])
def test_hour_range_job_on_spring_forward_day(tz: str, day: tuple[int, int, int], want: list[str]) -> None:
    assert fires("45 1-3 * * *", tz, local(tz, *day), local(tz, *day, 12)) == want


def test_fixed_time_job_in_a_half_hour_gap_fires_at_its_end() -> None:
    got = fires("15 2 * * *", LORD_HOWE, local(LORD_HOWE, 2026, 10, 3, 12), local(LORD_HOWE, 2026, 10, 5, 12))
    assert got == ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]


def test_hour_list_job_fires_once_per_wall_time_on_lord_howe_fall_back_day() -> None:
    got = fires("40 1,2 * * *", LORD_HOWE, local(LORD_HOWE, 2026, 4, 5), local(LORD_HOWE, 2026, 4, 5, 12))
    assert got == ["2026-04-05T01:40:00+11:00", "2026-04-05T02:40:00+10:30"]


@pytest.mark.parametrize("tz", [NY, BERLIN, LORD_HOWE])
@pytest.mark.parametrize("month", [3, 4, 10, 11])
@pytest.mark.parametrize("expr", ["5 * * * *", "*/20 1-3 * * *"])
def test_elapsed_time_jobs_fire_at_each_real_matching_instant_in_change_months(tz: str, month: int,
                                                                              expr: str) -> None:
    # Not fixed-time (minute or hour starts with `*`): every real instant whose wall time
    # matches fires once, none doubled or dropped; wall times inside a gap do not exist.
    zone = ZoneInfo(tz)
    start = datetime(2026, month, 1, tzinfo=UTC)
    end = datetime(2026, month + 1, 1, tzinfo=UTC)
    minute, hours = (lambda m: m == 5, range(24)) if expr.startswith("5") else (lambda m: m % 20 == 0, range(1, 4))
    want, t = [], start + timedelta(minutes=1)
    while t <= end:
        wall = t.astimezone(zone)
        if minute(wall.minute) and wall.hour in hours:
            want.append(t)
        t += timedelta(minutes=1)
    assert CronSchedule(normalize(expr), tz).fires_between(start, end, 10_000) == want


def test_seconds_level_fixed_hour_job_on_fall_back_day() -> None:
    got = fires("*/20 30 1 * * *", NY, local(NY, 2026, 11, 1), local(NY, 2026, 11, 1, 12))
    assert got == [f"2026-11-01T01:30:{s}-04:00" for s in ("00", "20", "40")]
    got = fires("*/20 30 2 * * *", BERLIN, local(BERLIN, 2026, 10, 25), local(BERLIN, 2026, 10, 25, 12))
    assert got == [f"2026-10-25T02:30:{s}+02:00" for s in ("00", "20", "40")]


@pytest.mark.parametrize(
    ("tz", "after", "expected"),
    [
        (NY, (2026, 3, 7), ["2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00",
                            "2026-03-09T02:30:00-04:00"]),
        (BERLIN, (2026, 3, 28), ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00",
                                 "2026-03-30T02:30:00+02:00"]),
    ],
)
@pytest.mark.parametrize("expr", ["30 2 * * *", "0 30 2 * * *"])
def test_fixed_hour_job_in_gap_fires_at_end_of_gap_on_spring_forward_day(
    expr: str, tz: str, after: tuple[int, int, int], expected: list[str]
) -> None:
    start = local(tz, *after)
    assert fires(expr, tz, start, start + timedelta(days=3), 3) == expected


def test_seconds_level_fixed_hour_job_in_gap_fires_once_at_end_of_gap() -> None:
    got = fires("*/20 30 2 * * *", NY, local(NY, 2026, 3, 8), local(NY, 2026, 3, 9, 12))
    assert got == ["2026-03-08T03:00:00-04:00"] + [f"2026-03-09T02:30:{s}-04:00" for s in ("00", "20", "40")]


def test_wildcard_hour_job_follows_elapsed_time_on_fall_back_day() -> None:
    got = fires("*/30 * * * *", NY, local(NY, 2026, 11, 1, 0, 45), local(NY, 2026, 11, 1, 2, 0), 10)
    assert got == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]
    got = fires("*/30 * * * *", BERLIN, local(BERLIN, 2026, 10, 25, 1, 45), local(BERLIN, 2026, 10, 25, 3), 10)
    assert got == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_wildcard_hour_job_follows_elapsed_time_on_spring_forward_day() -> None:
    got = fires("*/30 * * * *", NY, local(NY, 2026, 3, 8, 1, 15), local(NY, 2026, 3, 8, 3, 30), 10)
    assert got == ["2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"]
    got = fires("*/30 * * * *", BERLIN, local(BERLIN, 2026, 3, 29, 1, 15), local(BERLIN, 2026, 3, 29, 3, 30))
    assert got == ["2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"]


@pytest.mark.parametrize(
    ("tz", "day"),
    [(NY, (2026, 3, 8)), (NY, (2026, 11, 1)), (BERLIN, (2026, 3, 29)), (BERLIN, (2026, 10, 25))],
)
@pytest.mark.parametrize(("expr", "spacing"), [("*/30 * * * *", 1800), ("*/30 * * * * *", 30)])
def test_wildcard_hour_job_neither_doubles_nor_drops_on_change_days(
    expr: str, spacing: int, tz: str, day: tuple[int, int, int]
) -> None:
    after = local(tz, *day)
    got = CronSchedule(normalize(expr), tz).fires_between(after, after + timedelta(hours=5), 100_000)
    gaps = {(b - a).total_seconds() for a, b in zip(got, got[1:])}
    assert gaps == {spacing}
    assert got[0] == after.astimezone(UTC) + timedelta(seconds=spacing)


# --- no drift ----------------------------------------------------------------------------


def test_ten_thousand_chained_minute_fires_have_no_drift() -> None:
    # */7 in the minute field: minutes 0, 7, ..., 56 of every hour; New York's offsets are
    # whole hours, so the expected fires are the UTC minutes divisible by 7, across fall-back.
    start = local(NY, 2026, 10, 20)
    got = chained("*/7 * * * *", NY, start, 10_000)
    expected: list[datetime] = []
    t = start.astimezone(UTC)
    while len(expected) < 10_000:
        t += timedelta(minutes=1)
        if t.minute % 7 == 0:
            expected.append(t)
    assert got == expected


def test_ten_thousand_chained_second_fires_have_no_drift() -> None:
    start = local(NY, 2026, 11, 1, 0, 30)  # 10,000 x 2 s spans the 02:00 fall-back
    got = chained("*/2 * * * * *", NY, start, 10_000)
    base = start.astimezone(UTC)
    assert got == [base + timedelta(seconds=2 * k) for k in range(1, 10_001)]


# --- bad input never escapes as anything but CronError -----------------------------------

_CRONISH = st.sampled_from(
    ["*", "?", "L", "W", "#", "/", "-", ",", " ", " ", " ", "\t", "0", "1", "5", "7", "12", "23",
     "31", "59", "60", "2030", "MON", "fri", "JAN", "dec", "@", "@daily", "@reboot", "H", "\u00a0",
     "\u017f", "\u0663", "x", "0#", "L5"]
)
_GARBAGE = st.one_of(
    st.text(max_size=40),
    st.lists(_CRONISH, max_size=25).map("".join),
    st.lists(st.lists(_CRONISH, min_size=1, max_size=4).map("".join), min_size=5, max_size=7).map(" ".join),
)


@settings(max_examples=500, deadline=None)
@given(_GARBAGE)
def test_random_input_normalizes_or_raises_cron_error(expr: str) -> None:
    try:
        normalized = normalize(expr)
    except CronError as exc:
        assert str(exc).startswith("cron: ")
        return
    assert normalize(normalized) == normalized
    assert len(normalized.split(" ")) == 7
    croniter.expand(normalized, second_at_beginning=True)
    CronSchedule(normalized, BERLIN).next_after(datetime(2026, 1, 1, tzinfo=UTC))


# --- croniter reads the normal form the way the dialect documents it ----------------------

_BOUNDS = [(0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7), (1970, 2099)]


def _documented_values(field: int, text: str) -> set[int]:
    """The values a plain normal-form field denotes per the module docstring (7 is Sunday)."""
    low, high = _BOUNDS[field]
    top = 6 if field == 5 else high  # a/n runs to the field's maximum, Saturday for weekdays
    out: set[int] = set()
    for item in text.split(","):
        body, _, step = item.partition("/")
        n = int(step or 1)
        if body == "*":
            out.update(range(low, high + 1, n))
        elif "-" in body:
            a, b = map(int, body.split("-"))
            out.update(range(a, b + 1, n))
        elif step:
            out.update(range(int(body), top + 1, n))
        else:
            out.add(int(body))
    return {0 if (field == 5 and v == 7) else v for v in out}


@settings(max_examples=400, deadline=None)
@given(expressions())
def test_croniter_reads_the_normal_form_as_documented(expr: str) -> None:
    normalized = normalize(expr)
    expanded, _ = croniter.expand(normalized, second_at_beginning=True)
    # croniter's order with second_at_beginning: min hour dom mon dow sec year
    by_field = dict(zip((1, 2, 3, 4, 5, 0, 6), expanded))
    for field, text in enumerate(normalized.split(" ")):
        if "L" in text or "#" in text:
            continue
        low, high = _BOUNDS[field]
        got = by_field[field]
        full = set(range(low, (6 if field == 5 else high) + 1))
        got_set = full if "*" in got else set(got)  # croniter reads "*,1" as "*"
        assert got_set == _documented_values(field, text), (field, text, got)


_CHANGES = [datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC),
            datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC),
            datetime(2026, 4, 4, 15, tzinfo=UTC), datetime(2026, 10, 3, 15, tzinfo=UTC)]


@settings(max_examples=150, deadline=None)
@given(
    expressions(),
    st.sampled_from([NY, BERLIN, "Australia/Lord_Howe", "America/Santiago", "UTC"]),
    st.sampled_from(_CHANGES),
    st.integers(-3000, 3000),
)
def test_fires_increase_and_chaining_next_after_gives_fires_between(
    expr: str, tz: str, change: datetime, minutes: int
) -> None:
    schedule = CronSchedule(normalize(expr), tz)
    after = change + timedelta(minutes=minutes, seconds=minutes % 7)
    got = schedule.fires_between(after, after + timedelta(days=800), 20)
    assert all(f > after for f in got)
    assert all(a < b for a, b in zip(got, got[1:]))
    chain, cursor = [], after
    for _ in got:
        cursor = schedule.next_after(cursor)
        chain.append(cursor)
    assert chain == got
    if schedule.fixed_time:  # once per local wall-clock time, even across fall-back
        walls = [f.astimezone(ZoneInfo(tz)).replace(tzinfo=None) for f in got]
        assert all(a < b for a, b in zip(walls, walls[1:]))


@settings(max_examples=40, deadline=None)
@given(
    expressions(),
    st.sampled_from([NY, BERLIN, "Australia/Lord_Howe", "America/Santiago", "UTC"]),
    st.sampled_from(_CHANGES),
    st.lists(st.tuples(st.integers(-3000, 3000), st.integers(-120, 3000), st.sampled_from([1, 3, 50])),
             min_size=2, max_size=12),
)
def test_one_schedule_answers_every_window_as_a_fresh_walk_does(
    expr: str, tz: str, change: datetime, questions: list[tuple[int, int, int]]
) -> None:
    """window() keeps one walked stretch per schedule and answers later questions from it (many
    jobs' frontiers, pass after pass), as stretch() does (the catch-up's short look back):
    whatever the order of the questions, each answer equals that of a schedule that never
    answered anything before."""
    shared = CronSchedule(normalize(expr), tz)
    seen: list[datetime] = []  # a job's frontier is a fire an earlier question returned
    for minutes, length, limit in questions:
        after = (seen[minutes % len(seen)] if seen and minutes % 2 else
                 change + timedelta(minutes=minutes, seconds=minutes % 11))
        until = after + timedelta(minutes=length)
        got = shared.window(after, until, limit)
        assert got == CronSchedule(normalize(expr), tz).window(after, until, limit)
        seen += got[0]
        near = shared.stretch(after, until)  # [after, until), when the stretch reaches it
        if near is not None:
            fresh = CronSchedule(normalize(expr), tz).fires_between(after - timedelta(microseconds=1), until, 10**6)
            assert near == [f for f in fresh if f < until]
