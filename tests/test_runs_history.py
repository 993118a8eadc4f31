"""History: partitions ahead and retention, the runs and queues views, poller settings."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from cronbox import db
from cronbox.config import Config, ConfigError
from poller.maintenance import maintain_once
from poller.settings import PollerSettings

from .runs_support import active, dispatch, future, job, runs


def partitions(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'cronbox.run'::regclass ORDER BY 1")]


def test_every_outcome_is_a_history_row_with_state_attempt_timings_worker_and_error(conn):
    job(conn, "h", max_attempts=2, retry_delay="1 second")
    future(conn, "h", 0)
    dispatch(conn, 0)
    [rid] = active(conn, "h")
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', now())", (rid,))
    conn.execute("SELECT cronbox.fail_run(%s, 'exit 3')", (rid,))
    [r] = runs(conn, "h")
    assert (r["state"], r["attempt"], r["worker"], r["error"]) == ("failed", 1, "w1", "exit 3")
    assert r["dispatched_at"] and r["started_at"] and r["finished_at"] and r["duration"] is not None
    assert r["idempotency_key"] == f"{rid}:1"


def test_partitions_are_created_ahead_and_whole_days_dropped_after_retention(conn):
    today, in_9, in_12 = conn.execute(
        "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD'), "
        "to_char((now() + interval '9 days') AT TIME ZONE 'UTC', 'YYYYMMDD'), "
        "to_char((now() + interval '12 days') AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()
    conn.execute("SELECT cronbox.ensure_run_partitions_at(2, now() + interval '10 days')")
    assert {f"run_{in_9}", f"run_{in_12}"} <= set(partitions(conn))
    job(conn, "old")
    future(conn, "old", 0)
    dispatch(conn, 0)
    [rid] = active(conn, "old")
    conn.execute("SELECT cronbox.complete_run(%s)", (rid,))
    dropped = [r[0] for r in conn.execute(
        "SELECT * FROM cronbox.drop_run_partitions_at('5 days', now() + interval '10 days')")]
    assert f"run_{today}" in dropped and f"run_{in_9}" not in dropped
    assert runs(conn, "old") == []  # its day is past retention: gone with the partition
    assert f"run_{in_12}" in partitions(conn)


def test_a_day_with_a_run_in_flight_is_kept_until_the_run_is_final_and_its_late_reports_go_with_it(conn):
    today = conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()[0]
    job(conn, "long")
    future(conn, "long", 0)
    dispatch(conn, 0)
    [rid] = active(conn, "long")
    drop = "SELECT * FROM cronbox.drop_run_partitions_at('5 days', now() + interval '10 days')"
    assert f"run_{today}" not in [r[0] for r in conn.execute(drop)]  # its message waits
    conn.execute("SELECT cronbox.start_run(%s, 'w1')", (rid,))
    assert f"run_{today}" not in [r[0] for r in conn.execute(drop)]  # it runs, under a lease
    assert active(conn, "long") == [rid]
    conn.execute("SELECT cronbox.complete_run(%s)", (rid,))
    conn.execute("SELECT cronbox.complete_run(%s)", (rid,))  # a duplicate: a late report
    assert runs(conn, "long")[0]["late_report"]["report"] == "succeeded"
    assert f"run_{today}" in [r[0] for r in conn.execute(drop)]
    assert runs(conn, "long") == []
    assert conn.execute("SELECT count(*) FROM cronbox.run_late_report WHERE run_id = %s",
                        (rid,)).fetchone()[0] == 0


async def test_poller_maintenance_drops_history_past_the_configured_retention(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.ensure_run_partitions_at(0, now() - interval '40 days')")
        old = conn.execute("SELECT to_char((now() - interval '40 days') AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()[0]
        assert f"run_{old}" in partitions(conn)
    pool = await db.open_pool(fresh_dsn, min_size=1, max_size=1)
    try:
        dropped = await maintain_once(pool, timedelta(days=30))
    finally:
        await pool.close()
    assert f"run_{old}" in dropped
    with db.connect(fresh_dsn) as conn:
        names = partitions(conn)
        today = conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()[0]
    assert f"run_{old}" not in names and f"run_{today}" in names


def test_retention_and_dispatch_cap_come_from_the_environment():
    ps = PollerSettings.from_env({"CRONBOX_RETENTION": "7d", "CRONBOX_DISPATCH_TICK_CAP": "250"})
    assert ps.retention == timedelta(days=7) and ps.dispatch_tick_cap == 250
    default = PollerSettings.from_env({})
    assert default.retention == timedelta(days=30) and default.dispatch_tick_cap == 0
    with pytest.raises(ConfigError, match="CRONBOX_RETENTION"):
        PollerSettings.from_env({"CRONBOX_RETENTION": "forever"})


def test_queues_view_shows_due_blocked_outbox_running_and_lag(conn):
    conn.execute("SELECT cronbox.set_queue_limit('vq', 1)")
    conn.execute("SELECT cronbox.schedule('v1', every => '1 hour', queue => 'vq', overlap => 'allow')")
    jid = conn.execute("SELECT job_id FROM cronbox.job WHERE name = 'v1'").fetchone()[0]
    for secs in (40, 30, 20):
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, now() - make_interval(secs => %s), now() - make_interval(secs => %s) "
                     "FROM cronbox.job WHERE job_id = %s", (secs, secs, jid))
    conn.execute("SELECT * FROM cronbox.dispatch(2)")  # one dispatched (the cap), one held
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, now() - interval '5 seconds', now() - interval '5 seconds' FROM cronbox.job WHERE job_id = %s",
                 (jid,))
    row = conn.execute(
        "SELECT due, blocked, in_outbox, running, max_running, oldest_lag FROM cronbox.queues WHERE queue = 'vq'").fetchone()
    due, blocked, in_outbox, running, max_running, lag = row
    assert (due, blocked, in_outbox, running, max_running) == (2, 1, 1, 1, 1)
    assert lag >= timedelta(seconds=40)


def test_poller_loop_respects_the_dispatch_cap_per_wake_up(fresh_dsn):
    from cronbox.proc import Waker
    from poller.dispatch_loop import dispatch_loop

    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule_at('cap', every => '1 hour', overlap => 'allow', p_now => now() - interval '1 day')")
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT j.job_id, j.bucket, now() - make_interval(secs => g), now() - make_interval(secs => g) "
                     "FROM cronbox.job j, generate_series(1, 25) g")

    async def one_wake_up() -> None:
        env = {"DATABASE_URL": fresh_dsn, "CRONBOX_DISPATCH_BATCH": "4",
               "CRONBOX_DISPATCH_TICK_CAP": "10", "CRONBOX_POLL_INTERVAL": "30s"}
        cfg, ps = Config.from_env(env), PollerSettings.from_env(env)
        pool = await db.open_pool(fresh_dsn, min_size=1, max_size=2)
        waker = Waker()
        task = asyncio.create_task(dispatch_loop(pool, cfg, ps, waker))
        try:
            for _ in range(200):  # until the loop has used its cap and sleeps
                await asyncio.sleep(0.02)
                with db.connect(fresh_dsn) as c:
                    if c.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'dispatched'").fetchone()[0] >= 10:
                        break
            await asyncio.sleep(0.3)
        finally:
            waker.stop.set()
            await task
            await pool.close()

    asyncio.run(one_wake_up())
    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'dispatched'").fetchone()[0] == 10


def test_a_run_id_says_when_its_row_was_written(conn):
    """The run row keeps no creation time (migration 0190): its id encodes the clock at the
    insert, in milliseconds, and cronbox.run_id_time reads it back."""
    ts = datetime(2031, 3, 1, 12, 0, 7, 123456, tzinfo=timezone.utc)
    assert conn.execute("SELECT cronbox.run_id_time(cronbox.run_id_at(%s) + 12345)", (ts,)).fetchone()[0] \
        == ts.replace(microsecond=123000)
    lo, rid, hi = conn.execute("SELECT clock_timestamp(), cronbox.new_run_id(), clock_timestamp()").fetchone()
    written = conn.execute("SELECT cronbox.run_id_time(%s)", (rid,)).fetchone()[0]
    assert lo - timedelta(milliseconds=1) <= written <= hi
