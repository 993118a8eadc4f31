"""Unfinished runs without an index on the state (migration 0190): a run's final update is
heap-only, and cronbox.unfinished_runs(), job_stat.active_runs and job_unfinished_runs() agree
with a full read of history after any sequence of dispatches, claims, acks, reports, leases,
cancels, dead letters and redrives."""

from __future__ import annotations

import pytest
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from .runs_support import active, at, dispatch, fold, future, job, runs

UNFINISHED = ("dispatched", "delivered", "running")


def test_no_index_of_run_names_the_state(conn):
    """Any index naming `state` (as key, expression or predicate) makes every report a
    non-HOT update; the bad final states are indexed through the generated `trouble`."""
    rows = conn.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'cronbox.run'::regclass").fetchall()
    defs = dict(rows)
    # (no lease index either: history holds final runs only, a run in flight is its outbox row)
    assert set(defs) == {"run_pkey", "run_job_history_idx", "run_queue_history_idx",
                         "run_trouble_history_idx"}, defs
    for name, definition in defs.items():
        assert "state" not in definition, (name, definition)
    assert "(trouble, run_id) WHERE (trouble IS NOT NULL)" in defs["run_trouble_history_idx"]
    # and every partition was created with room for the next version of its rows
    options = conn.execute(
        "SELECT c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'cronbox.run'::regclass").fetchall()
    assert options and all(o == ["fillfactor=45"] for (o,) in options), options


def test_a_push_run_answered_in_the_ack_is_written_to_history_once(conn):
    """A run is its outbox row until its final report; the ack with the worker's answer deletes
    the row and inserts the history row final: history is never updated."""
    for i in range(40):
        job(conn, f"h{i}")
        future(conn, f"h{i}", 0)
    assert dispatch(conn, 0)["dispatched"] == 40
    ids = [r[0] for r in conn.execute(
        "SELECT outbox_id FROM cronbox.claim_outbox_at('relay', 100, '30 seconds', p_now => %s)", (at(0),))]
    assert len(ids) == 40
    part = conn.execute("SELECT 'cronbox.run_' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()[0]

    def counts() -> tuple[int, int]:
        return conn.execute("SELECT pg_stat_get_xact_tuples_inserted(%s::regclass), "
                            "pg_stat_get_xact_tuples_updated(%s::regclass)", (part, part)).fetchone()
    before = counts()
    outcomes = [{"outbox_id": o, "state": "succeeded", "result": True} for o in ids]
    assert conn.execute("SELECT cronbox.ack_outbox_at('relay', %s, %s, p_now => %s)",
                        (ids, Jsonb(outcomes), at(1))).fetchone()[0] == 40
    after = counts()
    assert after[0] - before[0] == 40  # each run's history row inserted once, final
    assert after[1] - before[1] == 0  # and never updated
    assert {r["state"] for r in runs(conn)} == {"succeeded"}
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0] == 0


def test_trouble_holds_the_bad_final_states_only(conn):
    job(conn, "t", max_attempts=1)
    future(conn, "t", 0)
    future(conn, "t", 10)
    dispatch(conn, 0)
    [first] = active(conn, "t")
    conn.execute("SELECT cronbox.fail_run_at(%s, 'boom', false, %s)", (first, at(1)))
    dispatch(conn, 10)
    [second] = active(conn, "t")
    conn.execute("SELECT cronbox.complete_run_at(%s, NULL, %s)", (second, at(11)))
    got = conn.execute("SELECT run_id, state, trouble FROM cronbox.runs WHERE job = 't' ORDER BY run_id").fetchall()
    assert got == [(first, "failed", "failed"), (second, "succeeded", None)]
    assert conn.execute("SELECT run_id FROM cronbox.runs WHERE trouble = 'failed'").fetchall() == [(first,)]


# ---- generated sequences of what processes and users do to runs

JOBS = ("u0", "u1", "u2")
OPS = ("fire", "claim", "ack_ok", "ack_delivered", "nack_dead", "start", "heartbeat", "complete",
       "fail", "claim_runs", "reap", "cancel", "redrive", "fire_pull")


def apply(conn: psycopg.Connection, op: str, pick: int, now: float) -> None:
    """One operation at time `now`; `pick` chooses among the candidates. Refusals (a run
    already finished, nothing to claim) are part of the game: each op is its own savepoint."""
    name = JOBS[pick % len(JOBS)]
    leased = [r[0] for r in conn.execute(
        "SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run' AND lease_owner = 'relay' "
        "AND lease_until > %s ORDER BY outbox_id", (at(now),))]
    any_runs = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.runs ORDER BY run_id")]
    some_run = any_runs[pick % len(any_runs)] if any_runs else None
    try:
        with conn.transaction():
            if op in ("fire", "fire_pull"):
                future(conn, name if op == "fire" else "pull", now)
                dispatch(conn, now)
            elif op == "claim":
                conn.execute("SELECT cronbox.claim_outbox_at('relay', 2, '30 seconds', "
                             "p_exclude => ARRAY['pulled'], p_now => %s)", (at(now),))
            elif op in ("ack_ok", "ack_delivered") and leased:
                ids = leased[:1 + pick % 2]
                outcomes = (Jsonb([{"outbox_id": o, "state": "succeeded"} for o in ids])
                            if op == "ack_ok" else None)
                conn.execute("SELECT cronbox.ack_outbox_at('relay', %s, %s, p_now => %s)", (ids, outcomes, at(now)))
            elif op == "nack_dead" and leased:
                conn.execute("SELECT * FROM cronbox.nack_outbox_at('relay', %s, %s, %s, p_now => %s)",
                             (leased[:1], ["gone"], [False], at(now)))
            elif op == "start" and some_run:
                conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (some_run, at(now)))
            elif op == "heartbeat" and some_run:
                conn.execute("SELECT cronbox.heartbeat_at(%s, NULL, %s)", (some_run, at(now)))
            elif op == "complete" and some_run:
                conn.execute("SELECT cronbox.complete_run_at(%s, NULL, %s)", (some_run, at(now)))
            elif op == "fail" and some_run:
                conn.execute("SELECT cronbox.fail_run_at(%s, 'boom', %s, %s)", (some_run, pick % 2 == 0, at(now)))
            elif op == "claim_runs":
                conn.execute("SELECT * FROM cronbox.claim_runs_at('pulled', 'w', 2, p_now => %s)", (at(now),))
            elif op == "reap":
                conn.execute("SELECT cronbox.reap_lost_at(100, p_now => %s)", (at(now + 100),))
            elif op == "cancel" and some_run:
                conn.execute("SELECT cronbox.cancel_at(%s, %s)", (some_run, at(now)))
            elif op == "redrive":
                conn.execute("SELECT cronbox.redrive_at(everything => true, p_now => %s)", (at(now),))
    except psycopg.errors.DatabaseError as exc:
        assert exc.sqlstate in ("55000", "P0002"), (op, exc)


def check(conn: psycopg.Connection) -> None:
    truth = set(conn.execute(
        "SELECT run_id, job_id, queue, state FROM cronbox.runs WHERE state IN ('dispatched', 'delivered', 'running')"))
    found = conn.execute("SELECT run_id, job_id, queue, state FROM cronbox.unfinished_runs()").fetchall()
    assert len(found) == len(set(found)), found  # no run twice
    assert set(found) == truth
    fold(conn)  # the poller's fold of statistics (jobs no policy reads them for), as every second
    for job_id, active_runs in conn.execute("SELECT job_id, active_runs FROM cronbox.job_stat"):
        mine = sorted((r for r in truth if r[1] == job_id), key=lambda r: -r[0])
        assert active_runs == len(mine), (job_id, active_runs, mine)
        walked = conn.execute("SELECT run_id, state FROM cronbox.job_unfinished_runs(%s)", (job_id,)).fetchall()
        assert walked == [(r[0], r[3]) for r in mine]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 5)), min_size=1, max_size=30))
def test_unfinished_runs_agree_with_history_after_any_sequence(conn, steps):
    with conn.transaction(force_rollback=True):
        for name in JOBS:
            job(conn, name, timeout="30 seconds", overlap="allow", max_attempts=2, retry_delay="1 second")
        job(conn, "pull", queue="pulled", timeout="30 seconds", overlap="allow")
        for i, (op, pick) in enumerate(steps):
            apply(conn, op, pick, now=10.0 * i)
            check(conn)


def test_the_job_stat_columns_every_run_rewrites_are_last(conn):
    """A heap-only update logs the row minus the bytes it shares with the old version at both
    ends (migration 0191): what dispatch and a finish change sits at the end of the row, followed
    only by the job's bucket (migration 0390), which no update changes (in the shared suffix:
    bench.sqlcost, 2 bytes more per fold), and by the early 'skip' run's marker (migration 0464),
    which only early dispatch of a 'skip' fire and its withdrawal change (NULL otherwise: no
    bytes; set, in the shared suffix of every other update), and by the flag of a one-off whose
    statistics are derived from its runs (migration 0480), which only the write of its statistics
    into the row clears (in the shared suffix of every other update)."""
    columns = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'cronbox.job_stat'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum")]
    assert columns[-11:] == ["last_fire_at", "last_run_id", "last_success_at", "active_runs", "last_run_state",
                             "bucket", "early_due_at", "early_prev_fire_at", "early_prev_run_id", "early_prev_state",
                             "stats_from_runs"]


def test_the_write_rereads_futures_and_leaves_alone_one_gone_or_held(conn):
    """dispatch_locked gets futures by id from the caller's pick and re-reads them under the
    jobs' locks: one gone since (dispatched elsewhere) or held since (a pause) is left alone."""
    job(conn, "gone", overlap="allow")
    job(conn, "held", overlap="allow")
    f_gone = future(conn, "gone", 0)
    f_held = future(conn, "held", 0)
    jobs = [r[0] for r in conn.execute("SELECT job_id FROM cronbox.job WHERE name IN ('gone', 'held') ORDER BY name")]
    conn.execute("DELETE FROM cronbox.job_future WHERE future_id = %s", (f_gone,))  # dispatched elsewhere
    conn.execute("UPDATE cronbox.job_future SET hold = 'paused' WHERE future_id = %s", (f_held,))
    got = conn.execute("SELECT dispatched, skipped, failed, held FROM cronbox.dispatch_locked(%s, %s, NULL, %s)",
                       ([f_gone, f_held], jobs, at(1))).fetchone()
    assert got == (0, 0, 0, 0)
    assert runs(conn) == []
    assert conn.execute("SELECT hold FROM cronbox.job_future WHERE future_id = %s", (f_held,)).fetchone() == ("paused",)
    assert conn.execute("SELECT sum(active_runs) FROM cronbox.job_stat WHERE job_id = ANY (%s)", (jobs,)).fetchone() == (0,)
