"""Seams between the schedule side and the run side, driven through the public functions:
fixed-delay chains through complete_run/fail_run, resume releases held retries at once,
trigger() runs a paused job."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from .runs_support import active, at, complete, dispatch, fail, future, futures, job, jobrow, runs


def test_fixed_delay_job_fires_one_interval_after_each_run_finished(conn):
    job(conn, "fd", every=timedelta(seconds=10), every_mode="fixed_delay", starts_at=at(0))
    # what a saturation pass leaves for a fixed-delay job: its one fire materialised, no next
    conn.execute("UPDATE cronbox.job_fire f SET frontier = %s, next_fire = NULL FROM cronbox.job j "
                 "WHERE j.job_id = f.job_id AND j.name = 'fd'", (at(0),))
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, %s, %s FROM cronbox.job WHERE name = 'fd'", (at(0), at(0)))
    assert dispatch(conn, 0)["dispatched"] == 1
    (first,) = active(conn, "fd")
    complete(conn, first, 7.5)                      # finished 7.5 s after its fire
    # the hook hands the next fire to the poller (which materialises from next_fire)
    assert jobrow(conn, "fd")["next_fire"] == at(17.5)
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, %s, %s FROM cronbox.job WHERE name = 'fd'", (at(17.5), at(17.5)))
    conn.execute("UPDATE cronbox.job_fire f SET frontier = %s, next_fire = NULL FROM cronbox.job j "
                 "WHERE j.job_id = f.job_id AND j.name = 'fd'", (at(17.5),))
    assert dispatch(conn, 17.5)["dispatched"] == 1
    (second,) = active(conn, "fd")
    fail(conn, second, 20, retryable=False)          # a final failure continues the chain too
    assert jobrow(conn, "fd")["next_fire"] == at(30)


def test_resume_releases_held_retries_at_once(conn):
    job(conn, "rr", max_attempts=3, retry_delay=timedelta(seconds=1), retry_max_delay=timedelta(seconds=1))
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, %s, %s FROM cronbox.job WHERE name = 'rr'", (at(0), at(0)))
    dispatch(conn, 0)
    (run_id,) = active(conn, "rr")
    fail(conn, run_id, 1)                            # retry due at ~2 s
    conn.execute("SELECT cronbox.pause_at('rr', p_now => %s)", (at(1.5),))
    assert dispatch(conn, 5)["dispatched"] == 0      # held while paused
    assert [f["hold"] for f in futures(conn, "rr")] == ["paused"]
    conn.execute("SELECT cronbox.resume_at('rr', p_now => %s)", (at(6),))
    assert [f["hold"] for f in futures(conn, "rr")] == [None]  # ready again without the backstop
    assert dispatch(conn, 6)["dispatched"] == 1
    assert [r["attempt"] for r in runs(conn, "rr")] == [1, 2]


def test_trigger_runs_a_paused_job_and_the_schedule_stays_paused(conn):
    job(conn, "tp")
    conn.execute("SELECT cronbox.pause_at('tp', p_now => %s)", (at(0),))
    conn.execute("SELECT cronbox.trigger_at('tp', p_now => %s)", (at(1),))
    assert dispatch(conn, 1)["dispatched"] == 0  # trigger() decided it itself
    assert [(r["origin"], r["state"]) for r in runs(conn, "tp")] == [("manual", "dispatched")]
    assert jobrow(conn, "tp")["paused"] is True


def test_after_jobs_must_name_existing_upstreams_and_never_close_a_cycle(conn):
    job(conn, "extract")
    with pytest.raises(psycopg.errors.NoDataFound, match=r"^after: no schedule named 'nope'"), \
            conn.transaction():
        conn.execute("SELECT cronbox.schedule('load', after => ARRAY['extract', 'nope'])")
    conn.execute("SELECT cronbox.schedule('transform', after => ARRAY['extract'])")
    conn.execute("SELECT cronbox.schedule('load', after => ARRAY['transform'])")
    # extract waiting for load would close extract -> transform -> load -> extract
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"^after: 'extract' .* cycle: .*load"), \
            conn.transaction():
        conn.execute("SELECT cronbox.schedule('extract', after => ARRAY['load'])")
    assert jobrow(conn, "extract")["kind"] == "every"  # the refused update wrote nothing


def test_every_writer_of_paused_keeps_its_copy_beside_the_saturation_state(conn):
    # The claim's index on cronbox.job_fire leaves paused jobs out by job_fire.paused, a copy of
    # the job's flag: pause, resume, their bulk forms, quarantine and on_error => 'pause' each
    # write both, so no paused job is claimed and no resumed one is forgotten.
    def unequal() -> list[str]:
        return [r[0] for r in conn.execute("SELECT j.name FROM cronbox.job j JOIN cronbox.job_fire f USING (job_id) "
                                           "WHERE j.paused IS DISTINCT FROM f.paused")]

    for name in ("cp-a", "cp-b", "cp-c"):
        job(conn, name)
    job(conn, "cp-fails", on_error="pause", max_attempts=1)
    steps = [
        "SELECT cronbox.pause_at('cp-a', p_now => now())",
        "SELECT cronbox.pause_schedules(name_like => 'cp-_')",
        "SELECT cronbox.resume_at('cp-a', p_now => now())",
        "SELECT cronbox.resume_schedules(name_like => 'cp-_')",
        "SELECT cronbox.quarantine_job((SELECT job_id FROM cronbox.job WHERE name = 'cp-c'), 'poisoned')",
    ]
    for sql in steps:
        conn.execute(sql)
        assert unequal() == [], sql
    assert [r[0] for r in conn.execute("SELECT name FROM cronbox.job WHERE paused ORDER BY name")] == ["cp-c"]
    future(conn, "cp-fails", 0)
    assert dispatch(conn, 0)["dispatched"] == 1
    (rid,) = active(conn, "cp-fails")
    fail(conn, rid, 1, retryable=False)
    assert jobrow(conn, "cp-fails")["paused"] and unequal() == []
