"""Saturation cost: with 1,000,000 schedules an idle tick reads no job row (the plan of the
claim inside cronbox.claim_saturation, captured with auto_explain, is an index range scan on
job_saturate_idx that returns nothing); a busy tick reads only the due jobs; two claimers at
once get disjoint jobs."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from cronbox import db

from .runs_support import ADD_JOB_ROWS
from .schedhelp import utc

T0 = utc(2030, 1, 1)
N = 1_000_000


@pytest.fixture
def conn(fresh_dsn: str):
    """A fresh database: the shared one carries dead index entries from other tests'
    rolled-back inserts, which would blur the page counts asserted here."""
    c = psycopg.connect(fresh_dsn, autocommit=False, prepare_threshold=None)
    try:
        yield c
    finally:
        c.rollback()
        c.close()


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", []):
        out += _nodes(child)
    return out


def _claim_plan(conn: psycopg.Connection, horizon: str) -> tuple[int, dict[str, Any]]:
    """Run the real claim with auto_explain on; return (rows claimed, plan of the inner query)."""
    try:
        conn.execute("LOAD 'auto_explain'")
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip("LOAD 'auto_explain' needs a superuser (TEST_DATABASE_URL is not one)")
    for setting, value in {"log_min_duration": "0", "log_analyze": "on", "log_buffers": "on",
                           "log_nested_statements": "on", "log_format": "json",
                           "log_level": "notice"}.items():
        conn.execute(f"SET LOCAL auto_explain.{setting} = '{value}'")
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    n = len(conn.execute("SELECT * FROM cronbox.claim_saturation_at(500, %s, p_now => %s)", (horizon, T0)).fetchall())
    conn.execute("SET LOCAL auto_explain.log_min_duration = '-1'")
    plans = [json.loads(m[m.index("{"):])["Plan"] for m in notices if "{" in m]
    # the claim's walk (it takes each job's lock on job_stat as it goes); the rows are read by a
    # second statement, by key
    inner = [p for p in plans if any(node.get("Index Name") == "job_saturate_idx" for node in _nodes(p))]
    assert inner, notices
    return n, inner[0]


def _job_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The scans of cronbox.job_fire (the saturation state) that ran (row security's lookups on
    job_stat's behalf, never executed for the owner, are left out)."""
    return [n for n in _nodes(plan) if n.get("Relation Name") == "job_fire" and n.get("Actual Loops", 1) > 0]


@pytest.mark.slow
def test_with_a_million_schedules_an_idle_tick_reads_no_job_and_a_busy_tick_only_the_due_ones(conn):
    # 1,000,000 jobs materialised 1-2 hours ahead; 1 in 10 paused, 1 in 10 finished.
    conn.execute("""
        INSERT INTO cronbox.job (name, kind, every, anchor, paused, finished_at)
        SELECT 'job-' || g, 'every', interval '1 hour', %(t0)s,
               g %% 10 = 2, CASE WHEN g %% 10 = 1 THEN %(t0)s END
        FROM generate_series(1, %(n)s) g""", {"t0": T0, "n": N})
    conn.execute(ADD_JOB_ROWS)
    conn.execute("""
        UPDATE cronbox.job_fire f SET frontier = %(t0)s + interval '1 hour',
               next_fire = CASE WHEN j.g %% 10 = 1 THEN NULL
                                ELSE %(t0)s + interval '1 hour' + (j.g %% 3600) * interval '1 second' END
        FROM (SELECT job_id, split_part(name, '-', 2)::integer AS g FROM cronbox.job) j
        WHERE j.job_id = f.job_id""", {"t0": T0})
    conn.execute("ANALYZE cronbox.job, cronbox.job_fire")

    claimed, plan = _claim_plan(conn, "2 minutes")
    assert claimed == 0
    nodes = _nodes(plan)
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], plan
    # four walks of the index (refills about to run out, new and due jobs, early refills, those
    # catching up), each a few index pages
    scan = _job_scans(plan)
    assert [(n["Node Type"], n["Index Name"]) for n in scan] == [("Index Scan", "job_saturate_idx")] * 4, plan
    assert sum(n["Actual Rows"] for n in scan) == 0
    assert all(n["Shared Hit Blocks"] + n["Shared Read Blocks"] < 10 for n in scan), plan

    # 101 jobs come due: the claim reads those, not the million.
    conn.execute("UPDATE cronbox.job_fire f SET next_fire = %s FROM cronbox.job j WHERE j.job_id = f.job_id "
                 "AND j.name IN (SELECT 'job-' || g FROM generate_series(3, 1003, 10) g)", (T0 + timedelta(seconds=30),))
    claimed, plan = _claim_plan(conn, "2 minutes")
    assert claimed == 101
    scan = _job_scans(plan)
    assert [(n["Node Type"], n["Index Name"]) for n in scan] == [("Index Scan", "job_saturate_idx")] * 4, plan
    assert [n["Actual Rows"] for n in scan] == [101, 0, 0, 0]
    assert sum(n["Shared Hit Blocks"] + n["Shared Read Blocks"] for n in scan) < 400, plan


def test_two_claimers_at_once_get_disjoint_jobs(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        for i in range(20):
            setup.execute("SELECT cronbox.schedule_at(%s, every => '1 minute', p_now => %s)", (f"d{i}", T0))
    with db.connect(fresh_dsn, autocommit=False) as a, db.connect(fresh_dsn, autocommit=False) as b:
        first = {r[0] for r in a.execute("SELECT job_id FROM cronbox.claim_saturation_at(12, '2 minutes', p_now => %s)", (T0,))}
        second = {r[0] for r in b.execute("SELECT job_id FROM cronbox.claim_saturation_at(12, '2 minutes', p_now => %s)", (T0,))}
        assert len(first) == 12 and len(second) == 8
        assert not first & second


def test_a_refill_about_to_run_out_is_claimed_before_new_jobs_and_new_ones_before_early_refills(conn):
    """A million schedules created at once all carry next_fire = their creation time (a lower
    bound, nothing computed yet): older than a running job's exact next fire. By next_fire
    alone they were all claimed first and an every-second job's futures ran out. Order: refills
    with at most a quarter of the horizon left, then new and due jobs (at most a horizon old),
    then the other refills, then jobs catching up from further back."""
    state = {  # name: (frontier, next_fire) relative to T0, in seconds
        "old": (-600, -600),           # catching up (more than a horizon behind)
        "early": (49, 50),             # refill, a minute's futures left: may wait
        "new-2": (-20, -20), "new-1": (-40, -40),  # created at once, nothing computed yet
        "due": (-5, 25),               # refill, 25 s left: urgent
        "later": (140, 150),           # saturated
    }
    for name, (frontier, next_fire) in state.items():
        job_id = conn.execute("SELECT cronbox.schedule_at(%s, every => '1 second', p_now => %s)",
                              (name, T0 - timedelta(minutes=20))).fetchone()[0]
        conn.execute("UPDATE cronbox.job_fire SET frontier = %s, next_fire = %s WHERE job_id = %s",
                     (T0 + timedelta(seconds=frontier), T0 + timedelta(seconds=next_fire), job_id))

    def claim(limit: int) -> list[str]:
        conn.execute("SAVEPOINT claim")
        try:
            return [r[0] for r in conn.execute(
                "SELECT j.name FROM cronbox.claim_saturation_at(%s, '2 minutes', p_now => %s) c "
                "JOIN cronbox.job j USING (job_id)", (limit, T0)).fetchall()]
        finally:
            conn.execute("ROLLBACK TO SAVEPOINT claim")

    assert claim(1) == ["due"]
    assert claim(100) == ["due", "new-1", "new-2", "early", "old"]
