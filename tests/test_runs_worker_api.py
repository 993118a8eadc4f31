"""The worker API: start_run, heartbeat, complete_run, fail_run, cancel, claim_runs, batches."""

from __future__ import annotations

import psycopg
import pytest

from .runs_support import active, at, complete, dispatch, fail, fold, future, job, jobrow, runs, states


def one_run(conn, name="w", **opts) -> int:
    job(conn, name, **opts)
    future(conn, name, 0)
    dispatch(conn, 0)
    [rid] = active(conn, name)
    return rid


def test_start_heartbeat_complete_walks_the_states_and_extends_the_lease(conn):
    rid = one_run(conn, timeout="60 seconds")
    deadline = conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(10))).fetchone()[0]
    assert deadline == at(70)
    assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (rid, at(50))).fetchone()[0] == "continue"
    [r] = runs(conn, "w")
    assert (r["state"], r["worker"], r["lease_until"]) == ("running", "w1", at(110))
    assert complete(conn, rid, 80, {"rows": 3}) == "succeeded"
    [r] = runs(conn, "w")
    assert (r["state"], r["result"], r["finished_at"], r["lease_until"]) == ("succeeded", {"rows": 3}, at(80), None)
    assert r["duration"].total_seconds() == 70
    j = jobrow(conn, "w")
    assert (j["active_runs"], j["last_run_state"], j["last_success_at"]) == (0, "succeeded", at(80))


def test_start_run_is_idempotent_for_the_same_worker_and_refused_for_another(conn):
    rid = one_run(conn)
    first = conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(1))).fetchone()[0]
    assert conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(2))).fetchone()[0] == first
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="running on worker w1"):
        conn.execute("SELECT cronbox.start_run_at(%s, 'w2', %s)", (rid, at(3)))


def test_start_runs_starts_a_batch_and_refuses_run_by_run_as_start_run_would(conn):
    """cronbox.start_runs (the worker kit's push mode, a batch a request): each run started as
    start_run starts it, or its refusal (code and message) in its own row, in the order given;
    a refused run leaves the others started."""
    a, b, c = one_run(conn, "a"), one_run(conn, "b"), one_run(conn, "c")
    conn.execute("SELECT cronbox.start_run_at(%s, 'w2', %s)", (c, at(1)))  # running on another worker
    rows = conn.execute("SELECT run_id, deadline IS NOT NULL, code, error FROM cronbox.start_runs(%s, 'w1')",
                        ([a, 42, b, c, a],)).fetchall()
    assert rows == [(a, True, None, None), (42, False, "P0002", "run_id: no run 42"), (b, True, None, None),
                    (c, False, "55000", f"run_id: run {c} is running on worker w2, it cannot be started"),
                    (a, True, None, None)]  # the same worker's repeat: its lease again
    assert {(r["job"], r["state"], r["worker"]) for r in runs(conn)} == {
        ("a", "running", "w1"), ("b", "running", "w1"), ("c", "running", "w2")}
    for args, code in (((None, "w1"), "22004"), (([a, None], "w1"), "22004"), (([a], ""), "22023")):
        with pytest.raises(psycopg.Error) as err, conn.transaction():
            conn.execute("SELECT * FROM cronbox.start_runs(%s, %s)", args)
        assert err.value.sqlstate == code, err.value


def test_start_runs_answers_every_run_as_start_run_would_one_after_another(conn):
    """start_runs decides the batch in one statement: each run's answer is the one start_run's
    work (start_run_try) gives when called run by run in the same order: a finished run, one
    asked to cancel, one running here already, one of another worker, an unknown id, duplicates;
    a started run's lease is its job's timeout from now."""
    ids = {name: one_run(conn, name, timeout=f"{60 + i} seconds")
           for i, name in enumerate(["fresh", "done", "cancelled", "mine", "theirs", "delivered"])}
    assert complete(conn, ids["done"], 5) == "succeeded"
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', now())", (ids["mine"],))
    conn.execute("SELECT cronbox.start_run_at(%s, 'w2', now())", (ids["theirs"],))
    # asked to cancel while a relay held its message (cancel() flags such a run)
    conn.execute("UPDATE cronbox.outbox SET cancel_requested = true WHERE outbox_id = %s", (ids["cancelled"],))
    conn.execute("UPDATE cronbox.outbox SET state = 'delivered' WHERE outbox_id = %s", (ids["delivered"],))
    batch = [ids["fresh"], 42, ids["done"], ids["cancelled"], ids["mine"], ids["theirs"], ids["fresh"],
             ids["delivered"], 42]
    with pytest.raises(RuntimeError), conn.transaction():  # the run-by-run answers, undone
        expected = [conn.execute("SELECT deadline - now(), code, error FROM cronbox.start_run_try(%s, 'w1', now())",
                                 (i,)).fetchone() for i in batch]
        raise RuntimeError
    got = conn.execute("SELECT run_id, deadline - now(), code, error FROM cronbox.start_runs(%s, 'w1')",
                       (batch,)).fetchall()
    assert [g[0] for g in got] == batch
    assert [g[2:] for g in got] == [e[1:] for e in expected]
    assert [g[1] for g in got][:2] == [expected[0][0], None]  # the lease: the job's timeout from now
    assert expected[0][0].total_seconds() == 60 and expected[7][0].total_seconds() == 65
    assert [g[1] for g in got][6:8] == [expected[0][0], expected[7][0]]
    assert {(r["job"], r["state"], r["worker"]) for r in runs(conn) if r["job"] != "done"} == {
        ("fresh", "running", "w1"), ("cancelled", "dispatched", None), ("mine", "running", "w1"),
        ("theirs", "running", "w2"), ("delivered", "running", "w1")}


def test_calls_on_an_unknown_run_raise_no_data_found(conn):
    for sql in ("SELECT cronbox.start_run(42, 'w')", "SELECT cronbox.heartbeat(42)",
                "SELECT cronbox.complete_run(42)", "SELECT cronbox.fail_run(42, 'x')",
                "SELECT cronbox.cancel(42)"):
        with pytest.raises(psycopg.errors.NoDataFound, match="run_id: no run 42"), conn.transaction():
            conn.execute(sql)


def test_reports_on_a_skipped_run_are_refused(conn):
    job(conn, "s")
    future(conn, "s", 0)
    future(conn, "s", 1)
    dispatch(conn, 1)
    skipped = next(r["run_id"] for r in runs(conn, "s") if r["state"] == "skipped")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="skipped, it never ran"), conn.transaction():
        complete(conn, skipped, 2)
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="cannot be started"), conn.transaction():
        conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (skipped, at(2)))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="nothing to cancel"), conn.transaction():
        conn.execute("SELECT cronbox.cancel(%s)", (skipped,))


def test_heartbeat_answers_cancel_to_another_worker_and_after_the_run_finished(conn):
    rid = one_run(conn)
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(1)))
    assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w2', %s)", (rid, at(2))).fetchone()[0] == "cancel"
    complete(conn, rid, 3)
    assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (rid, at(4))).fetchone()[0] == "cancel"


def test_duplicate_completion_is_kept_as_a_late_report(conn):
    rid = one_run(conn)
    complete(conn, rid, 5, {"n": 1})
    assert fail(conn, rid, 6, "second delivery failed") == "succeeded"
    [r] = runs(conn, "w")
    assert (r["state"], r["result"]) == ("succeeded", {"n": 1})
    assert r["late_report"]["report"] == "failed" and r["late_report"]["error"] == "second delivery failed"
    assert jobrow(conn, "w")["active_runs"] == 0


def test_cancel_of_a_run_still_in_the_outbox_cancels_it_and_withdraws_the_message(conn):
    rid = one_run(conn)
    assert conn.execute("SELECT cronbox.cancel_at(%s, %s)", (rid, at(1))).fetchone()[0] == "cancelled"
    assert states(conn, "w") == ["cancelled"]
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE run_id = %s", (rid,)).fetchone()[0] == 0
    assert jobrow(conn, "w")["active_runs"] == 0
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="cancelled, it cannot be started"):
        conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (rid, at(2)))


def test_cancel_of_a_running_run_is_requested_then_acknowledged_by_the_worker(conn):
    rid = one_run(conn, max_attempts=3)
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(1)))
    assert conn.execute("SELECT cronbox.cancel_at(%s, %s)", (rid, at(2))).fetchone()[0] == "cancel_requested"
    assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (rid, at(3))).fetchone()[0] == "cancel"
    assert fail(conn, rid, 4, "interrupted") == "cancelled"
    assert states(conn, "w") == ["cancelled"]
    assert conn.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0] == 0  # no retry of a cancel


def test_claim_runs_gives_disjoint_runs_with_deadline_and_marks_them_running(conn):
    job(conn, "pull", queue="pg", overlap="allow", timeout="2 minutes")
    for t in range(5):
        future(conn, "pull", t)
    dispatch(conn, 10)
    cols = "run_id, job, attempt, deadline, idempotency_key, message"
    a = conn.execute(f"SELECT {cols} FROM cronbox.claim_runs_at('pg', 'wa', 3, p_now => %s)", (at(11),)).fetchall()
    b = conn.execute(f"SELECT {cols} FROM cronbox.claim_runs_at('pg', 'wb', 3, p_now => %s)", (at(11),)).fetchall()
    assert len(a) == 3 and len(b) == 2
    assert not {r[0] for r in a} & {r[0] for r in b}
    rid, name, attempt, deadline, key, msg = a[0]
    assert (name, attempt, deadline, key) == ("pull", 1, at(131), f"{rid}:1")
    assert msg["deadline"] is not None and msg["run_id"] == rid
    assert {r["worker"] for r in runs(conn, "pull")} == {"wa", "wb"}
    assert set(states(conn, "pull")) == {"running"}
    assert conn.execute("SELECT count(*) FROM cronbox.claim_runs_at('pg', 'wc', 3, p_now => %s)", (at(12),)).fetchone()[0] == 0


def test_claim_runs_without_message_returns_the_same_columns_and_no_message(conn):
    job(conn, "bare", queue="pg", overlap="allow", timeout="2 minutes")
    for t in range(4):
        future(conn, "bare", t)
    dispatch(conn, 10)
    cols = "run_id, job, payload, fire_at, attempt, deadline, idempotency_key"
    full = conn.execute(f"SELECT {cols}, message FROM cronbox.claim_runs_at('pg', 'wa', 2, p_now => %s)",
                        (at(11),)).fetchall()
    bare = conn.execute(f"SELECT {cols}, message FROM cronbox.claim_runs_at('pg', 'wb', 2, false, %s)",
                        (at(11),)).fetchall()
    assert len(full) == len(bare) == 2 and all(r[-1] is None for r in bare)
    # the columns beside the message are the message's own values, with or without it
    for r in full:
        msg = r[-1]
        assert (r[0], r[1], r[2], r[4], r[6]) == (msg["run_id"], msg["job"], msg["payload"], msg["attempt"],
                                                  msg["idempotency_key"])
    assert [(r[1], r[2], r[4], r[5], r[6]) for r in bare] == [(f[1], f[2], 1, at(131), f"{b[0]}:1")
                                                             for f, b in zip(full, bare)]
    # runs of one due time are claimed in no promised order: the two claims share the four runs
    assert sorted(r[3] for r in full + bare) == [at(0), at(1), at(2), at(3)]
    assert {x["worker"] for x in runs(conn, "bare")} == {"wa", "wb"}
    assert set(states(conn, "bare")) == {"running"}


def test_claim_runs_validates_its_arguments(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="n: must be between 1 and 1000"), conn.transaction():
        conn.execute("SELECT * FROM cronbox.claim_runs('q', 'w', 0)")
    with pytest.raises(psycopg.errors.NullValueNotAllowed, match="worker"), conn.transaction():
        conn.execute("SELECT * FROM cronbox.claim_runs('q', NULL, 1)")
    with pytest.raises(psycopg.errors.NullValueNotAllowed, match="with_message"), conn.transaction():
        conn.execute("SELECT * FROM cronbox.claim_runs('q', 'w', 1, NULL)")


def test_complete_runs_finishes_a_batch_and_reports_each_verdict(conn):
    job(conn, "batch", overlap="allow")
    for t in range(3):
        future(conn, "batch", t)
    dispatch(conn, 5)
    ids = active(conn, "batch")
    complete(conn, ids[0], 6)
    rows = conn.execute("SELECT run_id, state, verdict FROM cronbox.complete_runs_at(%s, NULL, %s)",
                        (ids + [7], at(7))).fetchall()
    assert rows == [(ids[0], "succeeded", "late"), (ids[1], "succeeded", "finished"),
                    (ids[2], "succeeded", "finished"), (7, None, "not_found")]
    assert jobrow(conn, "batch")["active_runs"] == 0


def last_run_state(conn, name):
    fold(conn)  # the poller's fold of statistics, as it runs every second
    return conn.execute("SELECT last_run_state FROM cronbox.schedules WHERE name = %s", (name,)).fetchone()[0]


def test_schedules_last_run_state_follows_the_newest_run_through_delivered_and_running(conn):
    # push: dispatched -> (relay ack) delivered -> (start_run) running -> succeeded
    rid = one_run(conn, "push")
    assert last_run_state(conn, "push") == "dispatched"
    [(oid,)] = conn.execute("SELECT outbox_id FROM cronbox.claim_outbox_at('r', 10, '30 seconds', p_now => %s)",
                            (at(1),)).fetchall()
    conn.execute("SELECT cronbox.ack_outbox_at('r', ARRAY[%s]::bigint[], p_now => %s)", (oid, at(1)))
    assert last_run_state(conn, "push") == "delivered"
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(2)))
    assert last_run_state(conn, "push") == "running"
    complete(conn, rid, 3)
    assert last_run_state(conn, "push") == "succeeded"
    # pull: claim_runs marks the run running at once
    job(conn, "pull", queue="pg")
    future(conn, "pull", 0)
    dispatch(conn, 0)
    conn.execute("SELECT * FROM cronbox.claim_runs_at('pg', 'w2', 1, p_now => %s)", (at(1),))
    assert last_run_state(conn, "pull") == "running"
    # the newest run decides: an older run still running does not hide a newer one's state
    job(conn, "two", overlap="allow")
    future(conn, "two", 0)
    future(conn, "two", 1)
    dispatch(conn, 0)
    dispatch(conn, 1)
    old, new = active(conn, "two")
    conn.execute("SELECT cronbox.start_run_at(%s, 'w3', %s)", (old, at(2)))
    assert last_run_state(conn, "two") == "dispatched"
    conn.execute("SELECT cronbox.start_run_at(%s, 'w3', %s)", (new, at(2)))
    assert last_run_state(conn, "two") == "running"
