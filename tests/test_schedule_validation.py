"""cronbox.schedule() rejects bad input itself, before anything is written: a table of bad
inputs, each with its SQLSTATE and a message naming the field; none leaves a row behind; a bad
update leaves the existing job untouched; the poller's cron parser agrees with the SQL one."""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg import sql

from cronbox import db
from poller.cron import CronError, CronSchedule, normalize

NULL, INVALID = "22004", "22023"
BIG_PAYLOAD = '{"blob": "' + "x" * 70_000 + '"}'

# (label, arguments of cronbox.schedule, SQLSTATE, message must start with)
BAD_INPUTS: list[tuple[str, dict[str, object], str, str]] = [
    ("name NULL", {"name": None, "cron": "* * * * *"}, NULL, "name:"),
    ("name empty", {"name": "", "cron": "* * * * *"}, INVALID, "name:"),
    ("name blank", {"name": "   ", "cron": "* * * * *"}, INVALID, "name:"),
    ("name too long", {"name": "x" * 201, "cron": "* * * * *"}, INVALID, "name:"),
    ("name surrounding space", {"name": " lead", "cron": "* * * * *"}, INVALID, "name:"),
    ("name control char", {"name": "a\tb", "cron": "* * * * *"}, INVALID, "name:"),
    ("name bidi override", {"name": "invoice\u202egnp.exe", "cron": "* * * * *"}, INVALID, "name: must not contain invisible"),
    ("name zero-width", {"name": "back\u200bup", "cron": "* * * * *"}, INVALID, "name: must not contain invisible"),
    ("no when at all", {"name": "j"}, INVALID, "schedule: give exactly one"),
    ("cron and every", {"name": "j", "cron": "* * * * *", "every": "1 minute"}, INVALID, "schedule: give exactly one"),
    ("cron and at", {"name": "j", "cron": "* * * * *", "at": "2030-01-01 00:00Z"}, INVALID, "schedule: give exactly one"),
    ("every and after", {"name": "j", "every": "1 minute", "after": ["a"]}, INVALID, "schedule: give exactly one"),
    ("cron empty", {"name": "j", "cron": ""}, INVALID, "cron: expression is empty"),
    ("cron 4 fields", {"name": "j", "cron": "* * * *"}, INVALID, "cron: expected 5, 6 or 7 fields"),
    ("cron 8 fields", {"name": "j", "cron": "0 * * * * * * *"}, INVALID, "cron: expected 5, 6 or 7 fields"),
    ("cron minute 60", {"name": "j", "cron": "60 * * * *"}, INVALID, "cron: minute field"),
    ("cron hour 24", {"name": "j", "cron": "* 24 * * *"}, INVALID, "cron: hour field"),
    ("cron day-of-month 0", {"name": "j", "cron": "* * 0 * *"}, INVALID, "cron: day-of-month field"),
    ("cron month 13", {"name": "j", "cron": "* * * 13 *"}, INVALID, "cron: month field"),
    ("cron day-of-week 8", {"name": "j", "cron": "* * * * 8"}, INVALID, "cron: day-of-week field"),
    ("cron second 61 (6 fields, seconds first)", {"name": "j", "cron": "61 * * * * *"}, INVALID, "cron: second field"),
    ("cron year 1969 (7 fields)", {"name": "j", "cron": "0 0 0 * * * 1969"}, INVALID, "cron: year field"),
    ("cron step 0", {"name": "j", "cron": "*/0 * * * *"}, INVALID, "cron: minute field"),
    ("cron reversed range", {"name": "j", "cron": "5-1 * * * *"}, INVALID, "cron: minute field"),
    ("cron unknown month name", {"name": "j", "cron": "* * * FOO *"}, INVALID, "cron: month field"),
    ("cron # occurrence 6", {"name": "j", "cron": "* * * * MON#6"}, INVALID, "cron: day-of-week field"),
    ("cron unknown macro", {"name": "j", "cron": "@reboot"}, INVALID, "cron: unsupported macro"),
    ("cron empty list item", {"name": "j", "cron": "1,,2 * * * *"}, INVALID, "cron: minute field"),
    ("cron # mixed with days", {"name": "j", "cron": "* * * * 1#2,3"}, INVALID, "cron: day-of-week field"),
    ("cron garbage", {"name": "j", "cron": "every monday"}, INVALID, "cron: expected 5, 6 or 7 fields"),
    ("every zero", {"name": "j", "every": "0 seconds"}, INVALID, "every:"),
    ("every negative", {"name": "j", "every": "-5 minutes"}, INVALID, "every:"),
    ("every in months", {"name": "j", "every": "1 month"}, INVALID, "every: months and years"),
    ("every below a second", {"name": "j", "every": "500 milliseconds"}, INVALID, "every: must be at least 1 second"),
    ("every_mode unknown", {"name": "j", "every": "1 minute", "every_mode": "fixed"}, INVALID, "every_mode:"),
    ("every_mode fixed_delay with cron", {"name": "j", "cron": "* * * * *", "every_mode": "fixed_delay"}, INVALID, "every_mode:"),
    ("every_mode NULL", {"name": "j", "every": "1 minute", "every_mode": None}, NULL, "every_mode:"),
    ("at infinity", {"name": "j", "at": "infinity"}, INVALID, "at:"),
    ("at in a time zone that does not exist", {"name": "j", "at": "2030-01-01 10:00 Mars/Olympus"}, INVALID, 'time zone "mars/olympus" not recognized'),
    ("timezone unknown", {"name": "j", "cron": "* * * * *", "timezone": "Mars/Olympus"}, INVALID, "timezone: unknown time zone"),
    ("timezone wrong case", {"name": "j", "cron": "* * * * *", "timezone": "europe/berlin"}, INVALID, "timezone: unknown time zone"),
    ("timezone abbreviation", {"name": "j", "cron": "* * * * *", "timezone": "PDT"}, INVALID, "timezone: unknown time zone"),
    ("timezone POSIX offset", {"name": "j", "cron": "* * * * *", "timezone": "UTC+3"}, INVALID, "timezone: unknown time zone"),
    ("timezone NULL", {"name": "j", "cron": "* * * * *", "timezone": None}, NULL, "timezone:"),
    ("overlap unknown", {"name": "j", "cron": "* * * * *", "overlap": "sometimes"}, INVALID, "overlap:"),
    ("overlap NULL", {"name": "j", "cron": "* * * * *", "overlap": None}, NULL, "overlap:"),
    ("on_error unknown", {"name": "j", "cron": "* * * * *", "on_error": "explode"}, INVALID, "on_error:"),
    ("catchup unknown", {"name": "j", "cron": "* * * * *", "catchup": "some"}, INVALID, "catchup:"),
    ("catchup NULL", {"name": "j", "cron": "* * * * *", "catchup": None}, NULL, "catchup:"),
    ("catchup_window zero", {"name": "j", "cron": "* * * * *", "catchup_window": "0"}, INVALID, "catchup_window:"),
    ("ends_at before starts_at", {"name": "j", "cron": "* * * * *", "starts_at": "2030-01-02Z", "ends_at": "2030-01-01Z"}, INVALID, "ends_at: must be after starts_at"),
    ("ends_at equal to starts_at", {"name": "j", "cron": "* * * * *", "starts_at": "2030-01-01Z", "ends_at": "2030-01-01Z"}, INVALID, "ends_at: must be after starts_at"),
    ("starts_at -infinity", {"name": "j", "cron": "* * * * *", "starts_at": "-infinity"}, INVALID, "starts_at:"),
    ("payload array", {"name": "j", "cron": "* * * * *", "payload": "[1, 2]"}, INVALID, "payload: must be a JSON object"),
    ("payload string", {"name": "j", "cron": "* * * * *", "payload": '"text"'}, INVALID, "payload: must be a JSON object"),
    ("payload NULL", {"name": "j", "cron": "* * * * *", "payload": None}, NULL, "payload:"),
    ("payload over 64 KiB", {"name": "j", "cron": "* * * * *", "payload": BIG_PAYLOAD}, INVALID, "payload: must be at most 65536 bytes"),
    ("queue empty", {"name": "j", "cron": "* * * * *", "queue": ""}, INVALID, "queue:"),
    ("queue with a space", {"name": "j", "cron": "* * * * *", "queue": "my queue"}, INVALID, "queue:"),
    ("queue NULL", {"name": "j", "cron": "* * * * *", "queue": None}, NULL, "queue:"),
    ("priority NULL", {"name": "j", "cron": "* * * * *", "priority": None}, NULL, "priority:"),
    ("priority out of range", {"name": "j", "cron": "* * * * *", "priority": 100_000}, INVALID, "priority:"),
    ("max_attempts zero", {"name": "j", "cron": "* * * * *", "max_attempts": 0}, INVALID, "max_attempts:"),
    ("max_attempts NULL", {"name": "j", "cron": "* * * * *", "max_attempts": None}, NULL, "max_attempts:"),
    ("retry_delay zero", {"name": "j", "cron": "* * * * *", "retry_delay": "0"}, INVALID, "retry_delay:"),
    ("retry_max_delay below retry_delay", {"name": "j", "cron": "* * * * *", "retry_max_delay": "1 second"}, INVALID, "retry_max_delay:"),
    ("timeout negative", {"name": "j", "cron": "* * * * *", "timeout": "-1 second"}, INVALID, "timeout:"),
    ("timeout NULL", {"name": "j", "cron": "* * * * *", "timeout": None}, NULL, "timeout:"),
    ("jitter negative", {"name": "j", "cron": "* * * * *", "jitter": "-1 second"}, INVALID, "jitter:"),
    ("jitter NULL", {"name": "j", "cron": "* * * * *", "jitter": None}, NULL, "jitter:"),
    ("after empty", {"name": "j", "after": []}, INVALID, "after:"),
    ("after with NULL", {"name": "j", "after": ["a", None]}, NULL, "after:"),
    ("after itself", {"name": "j", "after": ["j"]}, INVALID, "after: a job cannot run after itself"),
    ("after twice", {"name": "j", "after": ["a", "a"]}, INVALID, "after: lists a job twice"),
    ("reason too long", {"name": "j", "cron": "* * * * *", "reason": "r" * 1001}, INVALID, "reason:"),
]


def _call(conn: psycopg.Connection, args: dict[str, object]) -> int:
    q = sql.SQL("SELECT cronbox.{}({})").format(sql.Identifier("schedule_at" if "p_now" in args else "schedule"),
        sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in args))
    return conn.execute(q, args).fetchone()[0]


def _counts(conn: psycopg.Connection) -> tuple[int, ...]:
    return conn.execute(
        "SELECT (SELECT count(*) FROM cronbox.job), (SELECT count(*) FROM cronbox.job_future), "
        "(SELECT count(*) FROM cronbox.job_change), (SELECT count(*) FROM cronbox.runs)").fetchone()


def test_bad_input_table_is_long_enough_and_labels_are_unique():
    assert len(BAD_INPUTS) >= 40
    assert len({label for label, *_ in BAD_INPUTS}) == len(BAD_INPUTS)


def test_every_bad_input_is_rejected_with_its_sqlstate_and_field_and_leaves_no_row(fresh_dsn):
    failures = []
    with db.connect(fresh_dsn) as conn:  # autocommit: each call is its own transaction
        before = _counts(conn)
        assert before == (0, 0, 0, 0)
        for label, args, state, prefix in BAD_INPUTS:
            try:
                _call(conn, args)
            except psycopg.Error as exc:
                got_state, msg = exc.sqlstate, exc.diag.message_primary or ""
                if got_state != state or not msg.startswith(prefix):
                    failures.append(f"{label}: got {got_state} {msg!r}, want {state} {prefix!r}")
            else:
                failures.append(f"{label}: accepted")
        assert _counts(conn) == before
    assert failures == []


def test_a_rejected_update_leaves_the_existing_job_and_its_futures_untouched(conn):
    job_id = _call(conn, {"name": "keep", "cron": "*/5 * * * *", "p_now": "2030-01-01 00:00Z"})
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, '2030-01-01 00:05Z', '2030-01-01 00:05Z' FROM cronbox.job WHERE job_id = %s", (job_id,))
    snapshot = "SELECT to_jsonb(j) FROM cronbox.job j WHERE j.job_id = %s"
    before = conn.execute(snapshot, (job_id,)).fetchone()[0]
    for args in ({"name": "keep", "cron": "*/5 * * *"}, {"name": "keep", "every": "-1 minute"},
                 {"name": "keep", "cron": "*/5 * * * *", "timezone": "Nowhere/City"},
                 {"name": "keep", "cron": "*/5 * * * *", "payload": "[]"}):
        with pytest.raises(psycopg.errors.InvalidParameterValue), conn.transaction():
            _call(conn, {**args, "p_now": "2030-01-01 00:01Z"})
    assert conn.execute(snapshot, (job_id,)).fetchone()[0] == before
    assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE job_id = %s", (job_id,)).fetchone()[0] == 1


GOOD_CRON = [
    "* * * * *", "*/15 9-17 * * MON-FRI", "0 0 1 JAN *", "30 2 * * *", "0 */2 * * *",
    "*/2 * * * * *", "0 0 12 * * ? 2030", "0 0 L * *", "0 9 * * 5#3", "0 9 * * 5L",
    "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
    "0,30 * * * * *", "0 0 0 29 2 * *", "15 10 * * fri-sun", "5/10 * * * *",
]


@pytest.mark.parametrize("expr", GOOD_CRON)
def test_sql_and_poller_normalise_good_cron_identically(conn, expr):
    sql_form = conn.execute("SELECT cronbox.normalize_cron(%s)", (expr,)).fetchone()[0]
    assert normalize(expr) == sql_form
    CronSchedule(sql_form, "Europe/Berlin").next_after(
        conn.execute("SELECT '2030-01-01 00:00Z'::timestamptz").fetchone()[0])


def test_sql_and_poller_reject_bad_cron_with_the_same_message(conn):
    exprs = [a["cron"] for _, a, _, prefix in BAD_INPUTS if prefix.startswith("cron:")]
    assert len(exprs) >= 15
    for expr in exprs:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as sql_err, conn.transaction():
            conn.execute("SELECT cronbox.normalize_cron(%s)", (expr,))
        with pytest.raises(CronError) as py_err:
            normalize(expr)
        assert str(py_err.value) == sql_err.value.diag.message_primary, expr


def test_unknown_time_zone_error_suggests_the_right_spelling(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=re.escape("did you mean 'Europe/Berlin'?")):
        _call(conn, {"name": "j", "cron": "* * * * *", "timezone": "europe/berlin"})


def test_iana_zones_are_accepted(conn):
    zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu", "Australia/Lord_Howe", "Etc/GMT+3"]
    for i, tz in enumerate(zones):
        _call(conn, {"name": f"tz{i}", "cron": "0 9 * * *", "timezone": tz})
    assert conn.execute("SELECT count(*) FROM cronbox.job").fetchone()[0] >= len(zones)
