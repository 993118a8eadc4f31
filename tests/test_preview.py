"""cronbox.preview, cronbox.next_fires and exclusion calendars at the SQL level: what they
return, their bounds and errors, and row security. The fire engine's agreement with the
poller is in tests/test_preview_engine.py; what the poller stores, in tests/test_calendar_poller.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg import errors

from cronbox import db
from poller.cron import CronSchedule, normalize

from .roles import logins  # noqa: F401  (fixture)

UTC = timezone.utc
NOW = datetime(2030, 3, 30, 22, 0, 30, tzinfo=UTC)  # Berlin springs forward early on 31 March 2030


def preview(conn: psycopg.Connection, **args) -> list[datetime]:
    args.setdefault("p_now", NOW)
    named = ", ".join(f"{k} => %({k})s" for k in args)
    return [r[0] for r in conn.execute(f"SELECT fire_at FROM cronbox.preview_at({named})", args)]


def public(conn: psycopg.Connection, fn: str, **args) -> list:
    named = ", ".join(f"{k} => %({k})s" for k in args)
    return conn.execute(f"SELECT * FROM cronbox.{fn}({named})", args).fetchall()


def test_preview_of_a_cron_is_the_pollers_fires_after_now_across_a_dst_change(conn):
    got = preview(conn, cron="30 2 * * *", timezone="Europe/Berlin", n=3)
    want = CronSchedule(normalize("30 2 * * *"), "Europe/Berlin").fires_between(NOW, NOW + timedelta(days=10), 3)
    assert got == want
    assert got[0] == datetime(2030, 3, 31, 1, 0, tzinfo=UTC)  # 02:30 does not exist: 03:00 CEST


def test_preview_of_every_is_fixed_rate_from_starts_at_or_from_now(conn):
    start = datetime(2030, 4, 1, 12, 0, tzinfo=UTC)
    assert preview(conn, every="90 minutes", starts_at=start, n=3) == [start + k * timedelta(minutes=90) for k in range(3)]
    first = NOW.replace(microsecond=0) + timedelta(minutes=5)  # as schedule(): one interval after now, whole second
    assert preview(conn, every="5 minutes", n=2) == [first, first + timedelta(minutes=5)]
    # a start in the past: the fires from now on, on the start's phase
    past = datetime(2030, 3, 30, 21, 0, 10, tzinfo=UTC)
    assert preview(conn, every="1 hour", starts_at=past, n=1) == [datetime(2030, 3, 30, 23, 0, 10, tzinfo=UTC)]


def test_preview_of_a_cron_with_starts_at_begins_at_the_start(conn):
    start = datetime(2030, 6, 1, 0, 0, tzinfo=UTC)
    assert preview(conn, cron="0 0 * * *", starts_at=start, n=2) == [start, start + timedelta(days=1)]


def test_preview_searches_at_most_ten_years_ahead(conn):
    # the first fire in 2041 lies beyond the ten years after 2030
    assert preview(conn, cron="0 0 0 29 2 * 2041-2099", n=5) == []
    leap = preview(conn, cron="0 0 29 2 *", n=1000)
    assert leap[0] == datetime(2032, 2, 29, tzinfo=UTC) and leap[-1] == datetime(2040, 2, 29, tzinfo=UTC)


@pytest.mark.parametrize(("args", "state", "message"), [
    ({"n": 0, "cron": "* * * * *"}, "22023", "n: must be between 1 and 1000, got 0"),
    ({"n": 1001, "cron": "* * * * *"}, "22023", "n: must be between 1 and 1000, got 1001"),
    ({"n": None, "cron": "* * * * *"}, "22004", "n: must not be NULL"),
    ({}, "22023", "preview: give exactly one of cron, every; got none"),
    ({"cron": "* * * * *", "every": "1 hour"}, "22023", "preview: give exactly one of cron, every; got cron and every"),
    ({"cron": "61 * * * *"}, "22023", 'cron: minute field "61" is out of range 0-59 in "61 * * * *"'),
    ({"cron": "0 0 1 * 5#3"}, "22023", "cron: a day-of-month restriction (1) together with # or L days of the week"),
    ({"every": "0 seconds"}, "22023", "every: must be a positive interval"),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "22023", "timezone: unknown time zone 'Mars/Olympus'"),
    ({"cron": "* * * * *", "timezone": None}, "22004", "timezone: must not be NULL"),
    ({"cron": "* * * * *", "exclude": "nope"}, "P0002", "exclude: no calendar named 'nope'"),
    ({"cron": "* * * * *", "exclude": "a b"}, "22023", "exclude: calendar names are"),
])
def test_preview_refuses_bad_arguments_with_the_usual_sqlstates(conn, args, state, message):
    with pytest.raises(psycopg.Error) as info:
        public(conn, "preview", **args)
    assert info.value.sqlstate == state
    assert info.value.diag.message_primary.startswith(message), info.value.diag.message_primary


def calendar(conn: psycopg.Connection, name: str, **args) -> int:
    args.setdefault("p_now", NOW)
    named = ", ".join(f"{k} => %({k})s" for k in args)
    return conn.execute(f"SELECT cronbox.create_calendar_at(%(name)s, {named})", {"name": name, **args}).fetchone()[0]


def test_preview_honours_exclusion_calendars_dates_ranges_and_crons(conn):
    calendar(conn, "holidays", dates=["2030-04-01"], ranges=["[2030-04-03,2030-04-05)"], timezone="Europe/Berlin")
    calendar(conn, "weekends", crons=["* * * * SAT,SUN"], timezone="Europe/Berlin")
    got = preview(conn, cron="0 9 * * *", timezone="Europe/Berlin", n=4, exclude="holidays, weekends")
    # 31 Mar is a Sunday, 1 Apr listed, 2 Apr runs, 3-4 Apr in the range, 5 Apr runs, 6-7 weekend
    assert got == [datetime(2030, 4, d, 7, 0, tzinfo=UTC) for d in (2, 5, 8, 9)]
    # the array-literal spelling reads the same
    assert preview(conn, cron="0 9 * * *", timezone="Europe/Berlin", n=4, exclude="{holidays,weekends}") == got


def test_a_calendar_excluding_everything_ends_the_search_bounded(conn):
    calendar(conn, "always", crons=["* * * * *"])
    assert preview(conn, cron="*/5 * * * * *", n=10, exclude="always") == []


@pytest.mark.parametrize(("args", "state", "message"), [
    ({"name": None}, "22004", "name: must not be NULL"),
    ({"name": "bad name"}, "22023", "name: calendar names are"),
    ({"name": "c", "timezone": "PDT"}, "22023", "timezone: unknown time zone"),
    ({"name": "c", "dates": [None]}, "22004", "dates: must not contain NULL"),
    ({"name": "c", "dates": ["1969-12-31"]}, "22023", "dates: each date must be from 1970-01-01"),
    ({"name": "c", "ranges": ["[2030-01-01,)"]}, "22023", "ranges: each range must be non-empty with both bounds"),
    ({"name": "c", "ranges": ["empty"]}, "22023", "ranges: each range must be non-empty"),
    ({"name": "c", "crons": ["* * *"]}, "22023", 'cron: expected 5, 6 or 7 fields, got 3 in "* * *"'),
    ({"name": "c", "crons": [None]}, "22004", "crons: must not contain NULL"),
    ({"name": "c", "crons": ["* * * * *"] * 101}, "22023", "crons: at most 100 expressions, got 101"),
])
def test_create_calendar_refuses_bad_arguments_and_writes_nothing(conn, args, state, message):
    with pytest.raises(psycopg.Error) as info:
        public(conn, "create_calendar", **args)
    assert info.value.sqlstate == state
    assert info.value.diag.message_primary.startswith(message), info.value.diag.message_primary
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM cronbox.calendar").fetchone()[0] == 0


def test_create_calendar_again_replaces_it_and_an_identical_call_changes_nothing(conn):
    first = calendar(conn, "h", dates=["2030-04-02", "2030-04-01", "2030-04-02"])
    assert conn.execute("SELECT dates::text FROM cronbox.calendar WHERE name = 'h'").fetchone()[0] == "{2030-04-01,2030-04-02}"
    stamp = conn.execute("SELECT updated_at FROM cronbox.calendar WHERE name = 'h'").fetchone()[0]
    assert calendar(conn, "h", dates=["2030-04-01", "2030-04-02"], p_now=NOW + timedelta(hours=1)) == first
    assert conn.execute("SELECT updated_at FROM cronbox.calendar WHERE name = 'h'").fetchone()[0] == stamp
    assert calendar(conn, "h", ranges=["[2030-05-01,2030-05-03]"], p_now=NOW + timedelta(hours=1)) == first
    assert conn.execute("SELECT dates::text, ranges::text FROM cronbox.calendar WHERE name = 'h'").fetchone() == (
        "{}", '{"[2030-05-01,2030-05-04)"}')


def test_drop_calendar_is_refused_while_a_schedule_uses_it(conn):
    cal = calendar(conn, "h", dates=["2030-04-01"])
    job = conn.execute("SELECT cronbox.schedule_at('j', cron => '0 9 * * *', p_now => %s)", (NOW,)).fetchone()[0]
    conn.execute("INSERT INTO cronbox.job_calendar VALUES (%s, %s)", (job, cal))
    with pytest.raises(errors.ObjectNotInPrerequisiteState) as info:
        public(conn, "drop_calendar", name="h")
    assert info.value.diag.message_primary == "name: calendar 'h' is used by 1 schedule(s) ('j'); remove it from them first"
    conn.rollback()
    calendar(conn, "h2")
    assert public(conn, "drop_calendar", name="h2") == [(True,)]
    assert public(conn, "drop_calendar", name="h2") == [(False,)]
    with pytest.raises(errors.NullValueNotAllowed):
        public(conn, "drop_calendar", name=None)


def test_next_fires_of_a_new_schedule_equals_its_preview_and_follows_the_futures(conn):
    conn.execute("SELECT cronbox.schedule_at('j', cron => '*/20 1-3 * * *', timezone => 'America/New_York', p_now => %s)",
                 (datetime(2030, 11, 3, 4, 0, tzinfo=UTC),))
    now = datetime(2030, 11, 3, 4, 0, tzinfo=UTC)
    nf = [r[0] for r in conn.execute("SELECT * FROM cronbox.next_fires_at('j', 12, %s)", (now,))]
    assert nf == preview(conn, cron="*/20 1-3 * * *", timezone="America/New_York", n=12, p_now=now)
    assert len(set(nf)) == 12  # the repeated hour of the fall-back day fires twice (elapsed time)


def test_next_fires_shows_nothing_while_paused_and_p0002_for_an_unknown_name(conn):
    conn.execute("SELECT cronbox.schedule_at('j', every => '1 hour', p_now => %s)", (NOW,))
    assert len(public(conn, "next_fires", name="j", n=3)) == 3
    conn.execute("SELECT cronbox.pause('j')")
    assert public(conn, "next_fires", name="j", n=3) == []
    with pytest.raises(errors.NoDataFound), conn.transaction():
        public(conn, "next_fires", name="nope")
    for n, state in ((0, "22023"), (1001, "22023"), (None, "22004")):
        with pytest.raises(psycopg.Error) as info, conn.transaction():
            public(conn, "next_fires", name="j", n=n)
        assert info.value.sqlstate == state


def test_next_fires_of_a_job_paused_until_a_time_are_the_fires_from_that_time_on(conn):
    conn.execute("SELECT cronbox.schedule_at('j', cron => '0 * * * *', max_runs => 3, p_now => %s)", (NOW,))
    conn.execute("SELECT cronbox.schedule_at('d', every => '1 hour', every_mode => 'fixed_delay', p_now => %s)", (NOW,))
    until = datetime(2030, 3, 31, 3, 0, tzinfo=UTC)  # a fire exactly at until runs (resume_at)
    for name in ("j", "d"):
        conn.execute("SELECT cronbox.pause_at(%s, 'window', until => %s, p_now => %s)", (name, until, NOW))
    got = [r[0] for r in conn.execute("SELECT * FROM cronbox.next_fires_at('j', 10, %s)", (NOW,))]
    assert got == [until, until + timedelta(hours=1), until + timedelta(hours=2)]  # max_runs still counts
    # a fixed-delay job is anchored one interval after the pause's end, as resume_at does
    assert [r[0] for r in conn.execute("SELECT * FROM cronbox.next_fires_at('d', 3, %s)", (NOW,))] == [
        until + timedelta(hours=1)]
    # what the automatic resume then does agrees: its frontier lets the fire at until through
    assert conn.execute("SELECT cronbox.resume_paused_at(10, p_now => %s)", (until + timedelta(seconds=1),)).fetchone()[0] == 2
    frontier = conn.execute("SELECT frontier FROM cronbox.job JOIN cronbox.job_fire USING (job_id) WHERE name = 'j'").fetchone()[0]
    assert frontier < until and [r[0] for r in conn.execute(
        "SELECT * FROM cronbox.plan_fires('cron', (SELECT cron_normalized FROM cronbox.job WHERE name = 'j'), 'UTC', "
        "NULL, NULL, NULL, NULL, NULL, %s, '{}', 1, %s)", (frontier, until + timedelta(days=1)))] == [until]
    conn.execute("SELECT cronbox.pause_at('j', 'for good', p_now => %s)", (until + timedelta(seconds=2),))
    assert conn.execute("SELECT count(*) FROM cronbox.next_fires_at('j', 10, %s)",
                        (until + timedelta(seconds=2),)).fetchone()[0] == 0  # no end: none


def test_each_user_sees_and_uses_only_its_own_calendars(fresh_dsn, logins):  # noqa: F811
    with logins.connect(fresh_dsn, "alice") as alice:
        alice.execute("SELECT cronbox.create_calendar('alice-days', dates => '{2031-01-01}')")
        assert alice.execute("SELECT count(*) FROM cronbox.preview('* * * * *', n => 1, exclude => 'alice-days')").fetchone()[0] == 1
    with logins.connect(fresh_dsn, "bob") as bob:
        with pytest.raises(errors.NoDataFound):
            bob.execute("SELECT * FROM cronbox.preview('* * * * *', exclude => 'alice-days')")
        bob.rollback()
        assert bob.execute("SELECT cronbox.drop_calendar('alice-days')").fetchone()[0] is False
        bob.rollback()
        # the name is taken (by a calendar bob cannot see)
        with pytest.raises(errors.InvalidParameterValue):
            bob.execute("SELECT cronbox.create_calendar('alice-days')")
    with logins.connect(fresh_dsn, "admin") as admin:
        assert admin.execute("SELECT count(*) FROM cronbox.preview('* * * * *', n => 1, exclude => 'alice-days')").fetchone()[0] == 1
    for who in ("worker", "reader", "process"):
        with logins.connect(fresh_dsn, who) as c:
            for stmt in ("SELECT cronbox.create_calendar('x')", "SELECT * FROM cronbox.preview('* * * * *')",
                         "SELECT cronbox.drop_calendar('x')"):
                with pytest.raises(errors.InsufficientPrivilege):
                    c.execute(stmt)
                c.rollback()
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT owner FROM cronbox.calendar").fetchone()[0] == logins.name("alice")


def test_schedule_exclude_links_calendars_and_is_checked_before_writing(conn):
    calendar(conn, "h", dates=["2030-04-01"])
    calendar(conn, "w", crons=["* * * * SAT,SUN"])
    sched = "SELECT cronbox.schedule_at('j', cron => '0 9 * * *', exclude => %s, p_now => %s)"
    job = conn.execute(sched, ("h, w", NOW)).fetchone()[0]
    links = "SELECT array_agg(c.name ORDER BY c.name) FROM cronbox.job_calendar jc JOIN cronbox.calendar c USING (calendar_id) WHERE jc.job_id = %s"
    assert conn.execute(links, (job,)).fetchone()[0] == ["h", "w"]
    version = "SELECT definition_version FROM cronbox.job WHERE job_id = %s"
    v = conn.execute(version, (job,)).fetchone()[0]
    conn.execute(sched, ("h, w", NOW))  # identical: a no-op
    assert conn.execute(version, (job,)).fetchone()[0] == v
    conn.execute(sched, ("{w}", NOW))
    assert conn.execute(links, (job,)).fetchone()[0] == ["w"]
    assert public(conn, "drop_calendar", name="h") == [(True,)]
    conn.execute(sched, (None, NOW))
    assert conn.execute(links, (job,)).fetchone()[0] is None
    for args, state, message in (
            ("cron => '* * * * *', exclude => 'nope'", "P0002", "exclude: no calendar named 'nope'"),
            ("cron => '* * * * *', exclude => 'w,w,,'", "22023", "exclude: calendar names are"),
            ("every => '1 hour', every_mode => 'fixed_delay', exclude => 'w'", "22023",
             "exclude: only cron, fixed-rate every and at schedules may use exclusion calendars, got every_mode fixed_delay"),
            ("after => ARRAY['j'], exclude => 'w'", "22023", "exclude: only cron"),
            ("cron => '* * * * *', max_runs => 0", "22023", "max_runs: must be between 1 and 1000000000, got 0"),
            ("cron => '* * * * *', max_runs => 1000000001", "22023", "max_runs: must be between 1 and 1000000000"),
    ):
        with pytest.raises(psycopg.Error) as info, conn.transaction():
            conn.execute(f"SELECT cronbox.schedule('k', {args})")
        assert info.value.sqlstate == state, (args, info.value)
        assert info.value.diag.message_primary.startswith(message), info.value.diag.message_primary
    assert conn.execute("SELECT count(*) FROM cronbox.job WHERE name = 'k'").fetchone()[0] == 0


def test_a_schedule_may_use_only_its_owners_calendars(fresh_dsn, logins):  # noqa: F811
    with logins.connect(fresh_dsn, "alice") as alice:
        alice.execute("SELECT cronbox.create_calendar('alice-days', dates => '{2031-01-01}')")
        alice.execute("SELECT cronbox.schedule('alice-job', cron => '0 9 * * *', exclude => 'alice-days')")
    with logins.connect(fresh_dsn, "bob") as bob:
        with pytest.raises(errors.NoDataFound):  # invisible to bob
            bob.execute("SELECT cronbox.schedule('bob-job', cron => '0 9 * * *', exclude => 'alice-days')")
    with logins.connect(fresh_dsn, "admin") as admin:
        with pytest.raises(errors.InvalidParameterValue) as info:  # visible, but not the admin's
            admin.execute("SELECT cronbox.schedule('admin-job', cron => '0 9 * * *', exclude => 'alice-days')")
        assert "belongs to another role than the schedule's owner" in info.value.diag.message_primary
        admin.rollback()
        # an admin updating alice's job may keep her calendar (the owner stays alice)
        admin.execute("SELECT cronbox.schedule('alice-job', cron => '0 10 * * *', exclude => 'alice-days')")
        assert admin.execute("SELECT used_by FROM cronbox.calendars").fetchone()[0] == ["alice-job"]
