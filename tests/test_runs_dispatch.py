"""cronbox.dispatch: what happens to a due fire (priority order, paused, overlap, queue limits)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from .plan_support import run_partitions_planned
from .runs_support import (active, at, complete, end_quietly, dispatch, fail, future, futures, job, jobrow,
                           runs, states)


def test_dispatch_writes_run_and_outbox_message_and_removes_the_future(conn):
    job(conn, "nightly", payload=psycopg.types.json.Jsonb({"k": 1}), queue="etl", timeout="90 seconds")
    future(conn, "nightly", 0)
    assert dispatch(conn, 1)["dispatched"] == 1
    [run] = runs(conn, "nightly")
    assert (run["state"], run["attempt"], run["queue"], run["fire_at"]) == ("dispatched", 1, "etl", at(0))
    assert run["dispatched_at"] == at(1)
    stored, timeout = conn.execute(
        "SELECT message, timeout FROM cronbox.outbox WHERE run_id = %s AND kind = 'run'", (run["run_id"],)).fetchone()
    assert stored is None  # a run's row carries no copy of its message: the claim builds it
    [msg] = [r[0] for r in conn.execute(
        "SELECT message FROM cronbox.claim_outbox_at('r1', 10, '30 seconds', p_now => %s)", (at(1),))]
    assert msg["deadline"] == (at(1) + timedelta(seconds=90)).isoformat()
    assert msg["run_id"] == run["run_id"] and msg["fire_at"] == at(0).isoformat()
    assert msg["idempotency_key"] == f"{run['run_id']}:1"
    assert (msg["job"], msg["queue"], msg["payload"], msg["attempt"]) == ("nightly", "etl", {"k": 1}, 1)
    assert timeout.total_seconds() == 90
    assert futures(conn, "nightly") == []
    j = jobrow(conn, "nightly")
    assert (j["active_runs"], j["last_run_state"], j["last_run_id"]) == (1, "dispatched", run["run_id"])


def test_fire_is_not_dispatched_before_it_is_due(conn):
    job(conn, "later")
    future(conn, "later", 60)
    out = dispatch(conn, 59)
    assert out["dispatched"] == 0 and out["next_due"] == at(60)
    assert dispatch(conn, 60)["dispatched"] == 1


def test_lower_priority_goes_first_when_more_are_due_than_the_batch(conn):
    for name, prio in (("urgent", 1), ("normal", 5), ("bulk", 9)):
        job(conn, name, priority=prio, overlap="allow")
    # the bulk fires are the oldest, the urgent ones the newest
    for i in range(3):
        future(conn, "bulk", i)
        future(conn, "normal", 10 + i)
        future(conn, "urgent", 20 + i)
    assert dispatch(conn, 100, limit=4)["dispatched"] == 4
    assert len(active(conn, "urgent")) == 3 and len(active(conn, "normal")) == 1
    assert [r["fire_at"] for r in runs(conn, "normal")] == [at(10)]  # oldest first within a priority
    assert active(conn, "bulk") == []
    assert dispatch(conn, 100, limit=4)["dispatched"] == 4
    assert len(active(conn, "normal")) == 3 and len(active(conn, "bulk")) == 2


def due_burst(conn, name: str, n: int, *, queue: str, due: float = 0) -> None:
    """Job `name` (overlap allow) in `queue` with n fires, one a second up to at(due)."""
    job(conn, name, queue=queue, overlap="allow")
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, fire_at, due_at, queue, bucket) "
        "SELECT j.job_id, %s - make_interval(secs => g), %s - make_interval(secs => g), j.queue, j.bucket "
        "FROM cronbox.job j, generate_series(0, %s - 1) g WHERE j.name = %s", (at(due), at(due), n, name))


def test_a_burst_due_in_one_queue_takes_its_share_and_another_queues_fire_goes_in_the_same_batch(conn):
    # 3,000 fires of one queue due before the canary's: the batch is shared between the queues
    # with due work, not filled in due order with the burst.
    due_burst(conn, "burst", 3000, queue="bulk")
    job(conn, "canary", queue="canary", overlap="allow")
    future(conn, "canary", 5)
    assert dispatch(conn, 10, limit=100)["dispatched"] == 100  # what the canary left goes to the burst
    assert len(active(conn, "canary")) == 1 and len(active(conn, "burst")) == 99
    # the burst's oldest first
    assert max(r["fire_at"] for r in runs(conn, "burst")) == at(0) - timedelta(seconds=3000 - 99)
    assert min(r["fire_at"] for r in runs(conn, "burst")) == at(0) - timedelta(seconds=2999)


def test_the_jobs_a_failed_batch_is_bisected_over_include_every_queues_share(conn):
    # cronbox.due_jobs (the poller's isolation of a job that makes a batch fail) lists the jobs
    # a batch may take: the canary's, though 3,000 fires of another queue are due before it.
    due_burst(conn, "burst", 3000, queue="bulk", due=-10)
    canary = job(conn, "canary", queue="canary", overlap="allow")
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, queue) "
                 "SELECT job_id, bucket, now() - interval '1 second', now() - interval '1 second', 'canary' "
                 "FROM cronbox.job WHERE job_id = %s", (canary,))
    conn.execute("UPDATE cronbox.job_future f SET due_at = now() - interval '1 hour' FROM cronbox.job j "
                 "WHERE j.job_id = f.job_id AND j.name = 'burst'")
    jobs = [r[0] for r in conn.execute("SELECT cronbox.due_jobs(100)")]
    assert canary in jobs and len(jobs) == 2


def test_queues_with_due_work_share_a_batch_evenly(conn):
    for q in ("a", "b", "c"):
        due_burst(conn, f"burst-{q}", 10, queue=q)
    assert dispatch(conn, 1, limit=6)["dispatched"] == 6
    assert [len(active(conn, f"burst-{q}")) for q in ("a", "b", "c")] == [2, 2, 2]
    assert dispatch(conn, 2, limit=30)["dispatched"] == 24


def test_dispatch_and_early_dispatch_take_a_bucket_and_refuse_a_negative_one(conn):
    """p_bucket (a poller's leased bucket, or Citus delegating the call): only the futures of the
    jobs in that bucket (plain PostgreSQL keeps every job in bucket 0; a database migrated with
    --citus, the bucket of the job's name); another bucket has nothing due; a negative bucket is
    refused with 22023 naming it, nothing written."""
    due_burst(conn, "bucketed", 3, queue="b")
    bucket = conn.execute("SELECT bucket FROM cronbox.job WHERE name = 'bucketed'").fetchone()[0]
    for call in ("SELECT * FROM cronbox.dispatch(10, p_bucket => -1)",
                 "SELECT * FROM cronbox.dispatch_ahead(10, '1 minute', p_bucket => -1)"):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="^p_bucket: must be NULL or a bucket"):
            with conn.transaction():
                conn.execute(call)
    got = conn.execute("SELECT dispatched, next_due FROM cronbox.dispatch_at(10, p_now => %s, p_bucket => %s)",
                       (at(1), bucket + 1)).fetchone()
    assert got == (0, None)  # nothing in that bucket, nothing due there
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch_at(10, p_now => %s, p_bucket => %s)",
                        (at(1), bucket)).fetchone()[0] == 3
    assert len(active(conn, "bucketed")) == 3


def test_priority_order_holds_within_each_queues_share(conn):
    job(conn, "bulk-low", queue="bulk", priority=9, overlap="allow")
    due_burst(conn, "bulk-high", 50, queue="bulk")
    conn.execute("UPDATE cronbox.job_future f SET priority = 1 FROM cronbox.job j "
                 "WHERE j.job_id = f.job_id AND j.name = 'bulk-high'")
    future(conn, "bulk-low", -100)
    job(conn, "other", queue="other", overlap="allow")
    future(conn, "other", 0)
    assert dispatch(conn, 1, limit=10)["dispatched"] == 10
    assert (len(active(conn, "bulk-high")), len(active(conn, "bulk-low")), len(active(conn, "other"))) == (9, 0, 1)


def test_a_job_moved_to_another_queue_takes_its_waiting_fires_with_it(conn):
    job(conn, "mover", queue="old")
    future(conn, "mover", 0, origin="manual")  # a fire schedule() keeps (not the definition's)
    conn.execute("SELECT cronbox.schedule_at('mover', every => '1 hour', queue => 'new', p_now => %s)", (at(0),))
    assert [f["queue"] for f in futures(conn, "mover")] == ["new"]


def test_futures_written_by_the_api_and_the_poller_carry_their_jobs_queue(conn):
    job(conn, "flaky", queue="etl", max_attempts=3)
    conn.execute("SELECT cronbox.trigger_at('flaky', p_now => %s)", (at(0),))  # dispatched at once
    [run] = runs(conn, "flaky")
    fail(conn, run["run_id"], 1)  # a retry: a new future
    jid = conn.execute("SELECT job_id FROM cronbox.job WHERE name = 'flaky'").fetchone()[0]
    conn.execute("SELECT cronbox.store_fires_at(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, p_now => %s)",
                 ([jid], [at(3600)], [False], [jid], [at(3600)], [at(7200)], [False], [None], None, None, None, at(2)))
    stored = futures(conn, "flaky")
    assert {f["origin"] for f in stored} == {"retry", "schedule"}
    assert {f["queue"] for f in stored} == {"etl"}


def test_a_saturation_pass_whose_jobs_are_not_in_id_order_is_refused_with_nothing_written(conn):
    """cronbox.store_fires writes each job's state at its place in p_job found by binary search:
    the poller sends its jobs in ascending id order and a pass that is not (or lists a job twice)
    is refused with 22023 naming p_job, before anything is written."""
    ids = [job(conn, name) for name in ("first", "second")]
    before = conn.execute("SELECT job_id, frontier, next_fire FROM cronbox.job_fire ORDER BY job_id").fetchall()
    call = "SELECT cronbox.store_fires_at(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, p_now => %s)"
    for order in (ids[::-1], [ids[0], ids[0]]):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="^p_job must list each job once, in ascending order"):
            with conn.transaction():
                conn.execute(call, (order, [at(3600)] * 2, [False] * 2, order, [at(3600)] * 2, [at(7200)] * 2,
                                    [False] * 2, None, None, None, None, at(2)))
    assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE origin = 'schedule' AND fire_at = %s",
                        (at(3600),)).fetchone()[0] == 0
    assert conn.execute("SELECT job_id, frontier, next_fire FROM cronbox.job_fire ORDER BY job_id").fetchall() == before
    conn.execute(call, (ids, [at(3600)] * 2, [False] * 2, ids, [at(3600)] * 2, [at(7200)] * 2,
                        [False] * 2, None, None, None, None, at(2)))  # in order: stored
    assert conn.execute("SELECT array_agg(job_id ORDER BY job_id) FROM cronbox.job_fire WHERE next_fire = %s",
                        (at(7200),)).fetchone()[0] == ids


def test_paused_job_fire_is_held_and_goes_once_released(conn):
    jid = job(conn, "p")
    conn.execute("UPDATE cronbox.job SET paused = true WHERE name = 'p'")
    future(conn, "p", 0)
    out = dispatch(conn, 1)
    assert (out["dispatched"], out["held"]) == (0, 1)
    [f] = futures(conn, "p")
    assert f["hold"] == "paused" and f["held_since"] == at(1)
    assert dispatch(conn, 2)["held"] == 0  # a held fire is not read again
    conn.execute("UPDATE cronbox.job SET paused = false WHERE name = 'p'")
    assert conn.execute("SELECT cronbox.release_job_holds(%s)", (jid,)).fetchone()[0] == 1
    assert dispatch(conn, 3)["dispatched"] == 1


def test_held_fire_gets_a_second_look_from_the_backstop(conn):
    job(conn, "p")
    conn.execute("UPDATE cronbox.job SET paused = true WHERE name = 'p'")
    future(conn, "p", 0)
    dispatch(conn, 1)
    conn.execute("UPDATE cronbox.job SET paused = false WHERE name = 'p'")
    assert conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(30),)).fetchone()[0] == 0
    assert conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(31),)).fetchone()[0] == 1
    assert dispatch(conn, 32)["dispatched"] == 1


# --- overlap ---------------------------------------------------------------------------


def test_overlap_skip_records_fires_that_come_while_a_run_is_unfinished(conn):
    job(conn, "s", overlap="skip")
    future(conn, "s", 0)
    dispatch(conn, 0)
    future(conn, "s", 60)
    future(conn, "s", 120)
    assert dispatch(conn, 120)["skipped"] == 2
    assert states(conn, "s") == ["dispatched", "skipped", "skipped"]
    assert "unfinished" in runs(conn, "s")[1]["error"]
    complete(conn, active(conn, "s")[0], 130)
    future(conn, "s", 180)
    assert dispatch(conn, 180)["dispatched"] == 1


def test_overlap_skip_runs_only_the_first_of_fires_due_together(conn):
    job(conn, "s", overlap="skip")
    for t in (0, 60, 120):
        future(conn, "s", t)
    dispatch(conn, 200)
    assert sorted(states(conn, "s")) == ["dispatched", "skipped", "skipped"]
    assert [r["fire_at"] for r in runs(conn, "s") if r["state"] == "dispatched"] == [at(0)]


def test_overlap_buffer_one_holds_one_fire_and_skips_the_rest(conn):
    job(conn, "b1", overlap="buffer_one")
    future(conn, "b1", 0)
    dispatch(conn, 0)
    [first] = active(conn, "b1")
    future(conn, "b1", 60)
    future(conn, "b1", 120)
    dispatch(conn, 120)
    assert [f["fire_at"] for f in futures(conn, "b1") if f["hold"] == "overlap"] == [at(60)]
    future(conn, "b1", 180)
    dispatch(conn, 180)
    assert states(conn, "b1") == ["dispatched", "skipped", "skipped"]
    complete(conn, first, 200)
    assert dispatch(conn, 200)["dispatched"] == 1
    assert [r["fire_at"] for r in runs(conn, "b1") if r["state"] == "dispatched"] == [at(60)]


def test_overlap_buffer_all_runs_every_held_fire_in_order(conn):
    job(conn, "ba", overlap="buffer_all")
    for t in (0, 60, 120, 180):
        future(conn, "ba", t)
    dispatch(conn, 200)
    assert len(active(conn, "ba")) == 1
    order = []
    for step in range(4):
        [rid] = active(conn, "ba")
        order.append(next(r["fire_at"] for r in runs(conn, "ba") if r["run_id"] == rid))
        complete(conn, rid, 300 + step)
        dispatch(conn, 300 + step)
    assert order == [at(0), at(60), at(120), at(180)]
    assert states(conn, "ba") == ["succeeded"] * 4


def test_the_backstop_releases_only_the_earliest_fire_of_an_overlap_buffer(conn):
    """The others would be held again by dispatch: released by the thousand (a buffered
    backfill) they stood in dispatch's walk ahead of other jobs' due fires."""
    job(conn, "ba", overlap="buffer_all")
    job(conn, "other", overlap="buffer_all")
    for t in (0, 60, 120, 180):
        future(conn, "ba", t)
    future(conn, "other", 0)
    future(conn, "other", 60)
    dispatch(conn, 200)
    [rid] = active(conn, "ba")
    # the run's end is finished without its precise wake-up: only the backstop looks again
    end_quietly(conn, [rid], "succeeded", at(210))
    conn.execute("UPDATE cronbox.job_stat SET active_runs = 0 WHERE job_id = (SELECT job_id FROM cronbox.job WHERE name = 'ba')")
    assert conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(231),)).fetchone()[0] == 2  # one per job
    held = {f["fire_at"]: f["hold"] for f in futures(conn, "ba")}
    assert held == {at(60): None, at(120): "overlap", at(180): "overlap"}
    assert dispatch(conn, 232)["dispatched"] == 1 and len(active(conn, "ba")) == 1
    # the later ones get their next look 30 s on, not at every backstop round
    assert conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(250),)).fetchone()[0] == 0
    assert conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(261),)).fetchone()[0] == 1


def test_overlap_allow_dispatches_while_another_run_is_unfinished(conn):
    job(conn, "al", overlap="allow")
    for t in (0, 60, 120):
        future(conn, "al", t)
    dispatch(conn, 10)
    assert dispatch(conn, 200)["dispatched"] == 2
    assert len(active(conn, "al")) == 3
    assert jobrow(conn, "al")["active_runs"] == 3


def test_overlap_cancel_other_asks_the_running_one_to_stop_and_dispatches_the_new(conn):
    job(conn, "co", overlap="cancel_other")
    future(conn, "co", 0)
    dispatch(conn, 0)
    [old] = active(conn, "co")
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (old, at(1)))
    future(conn, "co", 60)
    assert dispatch(conn, 60)["dispatched"] == 1
    assert conn.execute("SELECT cronbox.heartbeat_at(%s, 'w1', %s)", (old, at(61))).fetchone()[0] == "cancel"
    assert fail(conn, old, 62, "stopped on request", retryable=False) == "cancelled"
    assert states(conn, "co") == ["cancelled", "dispatched"]


def test_cancel_other_withdraws_a_predecessor_still_in_the_outbox(conn):
    job(conn, "cw", overlap="cancel_other", queue="cwq")
    future(conn, "cw", 0)
    dispatch(conn, 0)
    [old] = active(conn, "cw")  # dispatched, its message not yet claimed by any relay
    future(conn, "cw", 60)
    assert dispatch(conn, 60)["dispatched"] == 1
    [r_old, r_new] = runs(conn, "cw")
    assert (r_old["run_id"], r_old["state"], r_old["finished_at"]) == (old, "cancelled", at(60))
    assert "superseded" in r_old["error"]
    outbox = conn.execute("SELECT run_id FROM cronbox.outbox WHERE kind = 'run' AND queue = 'cwq'").fetchall()
    assert outbox == [(r_new["run_id"],)]  # only the new run's message is left to deliver
    j = jobrow(conn, "cw")
    assert (j["active_runs"], j["last_run_state"], j["consecutive_failures"]) == (1, "dispatched", 0)


def test_cancel_other_leaves_a_message_a_relay_holds_and_flags_its_run(conn):
    job(conn, "ch", overlap="cancel_other", queue="chq")
    future(conn, "ch", 0)
    dispatch(conn, 0)
    [old] = active(conn, "ch")
    conn.execute("SELECT * FROM cronbox.claim_outbox_at('r1', 10, '30 seconds', p_now => %s)", (at(1),))
    future(conn, "ch", 5)
    assert dispatch(conn, 5)["dispatched"] == 1
    assert states(conn, "ch") == ["dispatched", "dispatched"]  # the relay may be sending it right now
    assert conn.execute("SELECT cancel_requested FROM cronbox.runs WHERE run_id = %s", (old,)).fetchone()[0]
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="asked to cancel"):
        conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (old, at(6)))


# --- queue limits ----------------------------------------------------------------------


def test_queue_limit_of_two_never_has_three_running(conn):
    assert conn.execute("SELECT cronbox.set_queue_limit('narrow', 2)").fetchone()[0] == 0
    for i in range(6):
        job(conn, f"q{i}", queue="narrow", priority=i)
        future(conn, f"q{i}", 0)
    now, started = 1, []

    def running() -> list[int]:
        return [r[0] for r in conn.execute(
            "SELECT run_id FROM cronbox.runs WHERE queue = 'narrow' "
            "AND state IN ('dispatched', 'delivered', 'running') ORDER BY run_id")]

    out = dispatch(conn, now)
    assert (out["dispatched"], out["held"]) == (2, 4)
    while True:
        current = running()
        assert len(current) <= 2
        if not current:
            break
        started += [r for r in current if r not in started]
        now += 1
        complete(conn, current[0], now)
        dispatch(conn, now)
    names = [conn.execute("SELECT job FROM cronbox.runs WHERE run_id = %s", (r,)).fetchone()[0]
             for r in started]
    assert names == [f"q{i}" for i in range(6)]  # held fires went in priority order
    assert conn.execute("SELECT running FROM cronbox.queue_limit WHERE queue = 'narrow'").fetchone()[0] == 0


def test_queue_limit_counts_runs_already_unfinished_when_it_is_set(conn):
    job(conn, "a", queue="q", overlap="allow")
    for t in (0, 1, 2):
        future(conn, "a", t)
    dispatch(conn, 5)
    assert conn.execute("SELECT cronbox.set_queue_limit('q', 2)").fetchone()[0] == 3
    future(conn, "a", 10)
    assert dispatch(conn, 10)["held"] == 1
    complete(conn, active(conn, "a")[0], 11)
    assert dispatch(conn, 11)["dispatched"] == 0  # still 2 unfinished: at the cap
    complete(conn, active(conn, "a")[0], 12)
    assert dispatch(conn, 12)["dispatched"] == 1


def test_removing_a_queue_limit_releases_held_fires(conn):
    conn.execute("SELECT cronbox.set_queue_limit('q', 1)")
    job(conn, "a", queue="q", overlap="allow")
    future(conn, "a", 0)
    future(conn, "a", 1)
    assert dispatch(conn, 2)["held"] == 1
    conn.execute("SELECT cronbox.set_queue_limit('q', NULL)")
    assert dispatch(conn, 3)["dispatched"] == 1


@pytest.mark.parametrize("value", [0, -3])
def test_set_queue_limit_rejects_a_cap_below_one(conn, value):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_running"):
        conn.execute("SELECT cronbox.set_queue_limit('q', %s)", (value,))


def test_dispatch_rejects_a_batch_below_one(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_limit"):
        conn.execute("SELECT * FROM cronbox.dispatch(0)")


def test_skip_dispatches_only_after_the_previous_run_committed_its_end_timestamps_are_transaction_starts(fresh_dsn):
    """overlap 'skip': the next run is dispatched only once the previous run's end has
    committed (dispatch decides under the job's lock, SKIP semantics). Timestamps are each
    transaction's start (now()): a dispatch transaction that began before the finishing one
    records a dispatched_at before the previous finished_at (docs/runs.md, Overlap)."""
    import psycopg

    with psycopg.connect(fresh_dsn, autocommit=True) as setup:
        setup.execute("SELECT cronbox.schedule_at('sk', every => '1 hour', overlap => 'skip', "
                      "p_now => now() - interval '1 day')")
        setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, now() - interval '2 seconds', "
                      "now() - interval '2 seconds' FROM cronbox.job WHERE name = 'sk'")
        assert setup.execute("SELECT dispatched FROM cronbox.dispatch(10)").fetchone()[0] == 1
        first = setup.execute("SELECT run_id FROM cronbox.runs WHERE state = 'dispatched'").fetchone()[0]
        setup.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) SELECT job_id, now() - interval '1 second', "
                      "now() - interval '1 second' FROM cronbox.job WHERE name = 'sk'")
    with psycopg.connect(fresh_dsn) as poller, psycopg.connect(fresh_dsn) as worker:
        poller_started = poller.execute("SELECT now()").fetchone()[0]  # the poller's transaction begins
        worker.execute("SELECT cronbox.complete_run(%s)", (first,))  # holds the job's lock, not committed
        # the job is busy (locked): nothing is decided, the fire waits
        assert poller.execute("SELECT dispatched, skipped FROM cronbox.dispatch(10)").fetchone() == (0, 0)
        worker.commit()
        # same poller transaction, after the end committed: the fire runs, not skipped
        assert poller.execute("SELECT dispatched, skipped FROM cronbox.dispatch(10)").fetchone() == (1, 0)
        poller.commit()
    with psycopg.connect(fresh_dsn) as conn:
        f1 = conn.execute("SELECT finished_at FROM cronbox.runs WHERE run_id = %s", (first,)).fetchone()[0]
        d2 = conn.execute("SELECT dispatched_at FROM cronbox.runs WHERE state = 'dispatched'").fetchone()[0]
    assert d2 == poller_started < f1  # the documented order of timestamps, not of events


def test_dispatch_opens_only_the_run_partitions_it_writes_however_much_history_is_kept(conn):
    # Thirty days of history kept (the default retention), a partition a day. A kept plan that
    # named cronbox.run with no bounds known at its start (cancel_other's walk of the job's
    # unfinished runs and their update, inside dispatch's one statement) started a scan of
    # every partition on every call, whether or not any job cancels another.
    for day in range(2, 32):
        conn.execute("SELECT cronbox.ensure_run_partitions_at(0, now() - make_interval(days => %s))", (day,))
    assert conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'cronbox.run'::regclass"
                        ).fetchone()[0] >= 39
    conn.execute("SELECT cronbox.schedule('hist', at => now() + interval '1 day', overlap => 'allow')")
    due = ("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) "
           "SELECT j.job_id, j.bucket, timestamptz '2020-01-01 00:00Z' + g * interval '1 second', now() - interval '1 second', 'manual' "
           "FROM cronbox.job j, generate_series(1, 20) g WHERE j.name = 'hist'")
    for _ in range(6):  # past the custom plans: the kept plan is the one that runs from then on
        conn.execute("SAVEPOINT s")
        conn.execute(due)
        assert conn.execute("SELECT dispatched FROM cronbox.dispatch(100)").fetchone()[0] == 20
        conn.execute("ROLLBACK TO SAVEPOINT s")
    conn.execute(due)
    assert len(run_partitions_planned(conn, "SELECT * FROM cronbox.dispatch(100)")) <= 2
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'dispatched'").fetchone()[0] == 20


@pytest.mark.parametrize("overlap, fires", [("skip", (0,)), ("allow", (0, 30))],
                         ids=["one-fire-per-job", "allow-fires"])
def test_the_jobs_a_batch_finishes_show_finished_once_from_their_state_and_dispatch_writes_no_row(conn, overlap, fires):
    """A job whose last scheduled fire a batch decided (nothing left to schedule, no scheduled
    fire left) shows 'finished' in cronbox.schedule_changes from that commit, once per finish,
    read from its state (cronbox.job_finishes): neither the plain path (cronbox.dispatch_plain)
    nor the general one (cronbox.dispatch_locked, the batch made not plain by a paused job's
    fire) writes a change row for it; a job with a scheduled fire left is not finished, one
    whose finish a row logs already shows that row alone."""
    ids: dict[str, list[int]] = {"p": [], "g": []}
    for group in ("p", "g"):
        conn.execute("SELECT cronbox.schedule_at(%s, at => %s, overlap => %s, p_now => %s)",
                     (f"{group}-once", at(0), overlap, at(-86400)))
        job(conn, f"{group}-ends", overlap=overlap, ends_at=at(40))
        job(conn, f"{group}-left", overlap=overlap, ends_at=at(200))
        job(conn, f"{group}-max", overlap=overlap, max_runs=2)
        job(conn, f"{group}-logged", overlap=overlap, ends_at=at(40))
        for kind in ("once", "ends", "left", "max", "logged"):
            ids[group] += [future(conn, f"{group}-{kind}", t, due=0) for t in fires]
        future(conn, f"{group}-left", 100)  # a scheduled fire left
        # nothing left to schedule (as saturation found: the frontier at the last fire), the
        # max_runs job at its count
        conn.execute("UPDATE cronbox.job SET finished_at = %s WHERE name LIKE %s", (at(-3600), f"{group}-%"))
        conn.execute("UPDATE cronbox.job_fire f SET frontier = %s FROM cronbox.job j "
                     "WHERE j.job_id = f.job_id AND j.name LIKE %s", (at(fires[-1]), f"{group}-%"))
        conn.execute("UPDATE cronbox.job_fire f SET fires_made = 2 FROM cronbox.job j "
                     "WHERE j.job_id = f.job_id AND j.name = %s", (f"{group}-max",))
        conn.execute("INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_at) "
                     "SELECT job_id, name, 'finished', 'logged before', %s FROM cronbox.job WHERE name = %s",
                     (at(-60), f"{group}-logged"))
    job(conn, "paused")
    conn.execute("SELECT cronbox.pause_at('paused', 'test', p_now => %s)", (at(-1),))
    held = future(conn, "paused", 0)
    jobs = [r[0] for r in conn.execute("SELECT DISTINCT job_id FROM cronbox.job_future WHERE future_id = ANY (%s)",
                                       (ids["g"] + [held],))]

    def finished(group: str) -> list[tuple[str, str, Any, str]]:
        return [(name.split("-", 1)[1], reason, changed_at, by) for name, reason, changed_at, by in conn.execute(
            "SELECT job, reason, changed_at, changed_by FROM cronbox.schedule_changes WHERE action = 'finished' "
            "AND job LIKE %s ORDER BY job, change_id", (f"{group}-%",))]

    logged = [("logged", "logged before", at(-60), conn.execute("SELECT cronbox.caller()").fetchone()[0])]
    assert finished("p") == finished("g") == logged  # each fire still pending
    rows = conn.execute("SELECT count(*) FROM cronbox.job_change").fetchone()[0]
    n = 5 * len(fires)
    assert conn.execute("SELECT * FROM cronbox.dispatch_plain(%s, NULL, %s)", (ids["p"], at(0))).fetchall() == [
        (n, 0, 0, 0)]
    assert conn.execute("SELECT * FROM cronbox.dispatch_locked(%s, %s, NULL, %s)",
                        (ids["g"] + [held], jobs, at(0))).fetchall() == [(n, 0, 0, 1)]
    assert conn.execute("SELECT count(*) FROM cronbox.job_change").fetchone()[0] == rows  # no row written
    last = at(fires[-1])  # the time of the job's last fire
    assert finished("p") == [("ends", "ends_at passed", last, "cronbox"), logged[0],
                             ("max", "max_runs reached: 2 fires", last, "cronbox"),
                             ("once", "one-off fire handled", last, "cronbox")]
    assert finished("g") == finished("p")


def test_a_finish_read_from_the_jobs_state_is_logged_before_unschedule_or_a_reopening_schedule(conn):
    """A finish shown from the job's state survives what takes that state away: unschedule()
    deletes the job, schedule() reopens a finished one-off (a new `at`); each writes the finish
    the view showed (its time, reason) as a row first, once, and a second finish shows again."""
    for name in ("gone", "again"):
        conn.execute("SELECT cronbox.schedule_at(%s, at => %s, overlap => 'allow', p_now => %s)",
                     (name, at(0), at(-3600)))
        future(conn, name, 0, due=0)
        conn.execute("UPDATE cronbox.job SET finished_at = %s WHERE name = %s", (at(-60), name))
        conn.execute("UPDATE cronbox.job_fire f SET frontier = %s FROM cronbox.job j "
                     "WHERE j.job_id = f.job_id AND j.name = %s", (at(0), name))
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", (at(0),)).fetchone()[0] == 2
    shown = "SELECT action, reason, changed_at, changed_by, change_id IS NULL FROM cronbox.schedule_changes " \
            "WHERE job = %s AND action IN ('finished', 'unscheduled') ORDER BY change_id"
    assert conn.execute(shown, ("gone",)).fetchall() == [("finished", "one-off fire handled", at(0), "cronbox", True)]
    assert conn.execute("SELECT cronbox.unschedule_at('gone', p_now => %s)", (at(10),)).fetchone()[0] is True
    assert [r[:5] for r in conn.execute(shown, ("gone",)).fetchall()] == [
        ("finished", "one-off fire handled", at(0), "cronbox", False),
        ("unscheduled", "unscheduled by operator", at(10), conn.execute("SELECT cronbox.caller()").fetchone()[0], False)]
    # reopened with a later fire: the first finish logged, the job active (no finish shown) ...
    conn.execute("SELECT cronbox.schedule_at('again', at => %s, overlap => 'allow', p_now => %s)", (at(600), at(20)))
    assert conn.execute(shown, ("again",)).fetchall() == [("finished", "one-off fire handled", at(0), "cronbox", False)]
    assert conn.execute("SELECT finished_at FROM cronbox.job WHERE name = 'again'").fetchone()[0] is None
    # ... until its new fire is decided: a second finish, shown from the state again
    conn.execute("UPDATE cronbox.job SET finished_at = %s WHERE name = 'again'", (at(500),))
    conn.execute("UPDATE cronbox.job_fire f SET frontier = %s FROM cronbox.job j "
                 "WHERE j.job_id = f.job_id AND j.name = 'again'", (at(600),))
    future(conn, "again", 600, due=600)
    assert [r[2] for r in conn.execute(shown, ("again",)).fetchall()] == [at(0)]
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", (at(600),)).fetchone()[0] == 1
    assert [(r[2], r[4]) for r in conn.execute(shown, ("again",)).fetchall()] == [(at(0), False), (at(600), True)]


PLAIN_KINDS = {
    "allow": {"overlap": "allow", "payload": psycopg.types.json.Jsonb({"k": 1}), "queue": "etl",
              "timeout": "90 seconds", "priority": 3},
    "skip-free": {"overlap": "skip"},           # no run in flight: runs
    "skip-busy": {"overlap": "skip"},           # a run in flight: skipped
    "buffer": {"overlap": "buffer_one"},        # no run in flight: runs
    "cancel": {"overlap": "cancel_other"},      # no run in flight: runs
    "upstream": {"overlap": "allow"},           # an after-job lists it: statistics written in place
}


@pytest.mark.parametrize("kinds, fires, counts", [
    (PLAIN_KINDS, (0,), (5, 1)),
    # several fires of a job: plain only when every fire is 'allow' (early dispatch's batches)
    ({k: v for k, v in PLAIN_KINDS.items() if k in ("allow", "upstream")}, (0, 30, 60), (6, 0)),
], ids=["one-fire-per-job", "allow-fires"])
def test_a_plain_batch_is_decided_and_written_as_the_general_path_decides_and_writes_it(conn, kinds, fires, counts):
    """cronbox.dispatch_plain (dispatch's short path for a plain batch) writes what the general
    path of cronbox.dispatch_locked writes for the same fires: two identical sets of jobs, one
    dispatched as a plain batch, the other with a paused job's fire in its batch (not plain:
    dispatch_plain declines it, writing nothing), give the same outbox rows, skipped history
    rows, futures left and job statistics."""
    ids: dict[str, list[int]] = {"p": [], "g": []}
    for group in ("p", "g"):
        for kind, opts in kinds.items():
            job(conn, f"{group}-{kind}", **opts)
        conn.execute("SELECT cronbox.schedule_at(%s, after => ARRAY[%s], p_now => %s)",
                     (f"{group}-after", f"{group}-upstream", at(-86400)))
        if "skip-busy" in kinds:
            future(conn, f"{group}-skip-busy", -60)
    assert dispatch(conn, -60)["dispatched"] == (2 if "skip-busy" in kinds else 0)  # left in flight
    job(conn, "paused")
    conn.execute("SELECT cronbox.pause_at('paused', 'test', p_now => %s)", (at(-1),))
    for group in ("p", "g"):
        for kind in kinds:
            for t in fires:
                ids[group].append(future(conn, f"{group}-{kind}", t, due=0))
    held = future(conn, "paused", 0)
    jobs = {g: [r[0] for r in conn.execute("SELECT DISTINCT job_id FROM cronbox.job_future WHERE future_id = ANY (%s)",
                                            (ids[g],))] for g in ids}
    paused = conn.execute("SELECT job_id FROM cronbox.job WHERE name = 'paused'").fetchone()[0]
    assert conn.execute("SELECT * FROM cronbox.dispatch_plain(%s, NULL, %s)",
                        (ids["g"] + [held], at(0))).fetchall() == []  # not plain: nothing written
    plain = conn.execute("SELECT * FROM cronbox.dispatch_plain(%s, NULL, %s)", (ids["p"], at(0))).fetchall()
    general = conn.execute("SELECT * FROM cronbox.dispatch_locked(%s, %s, NULL, %s)",
                           (ids["g"] + [held], jobs["g"] + [paused], at(0))).fetchall()
    assert plain == [(*counts, 0, 0)] and general == [(*counts, 0, 1)]

    def written(group: str) -> dict[str, Any]:
        out = {}
        for kind in (*kinds, "after"):
            name = f"{group}-{kind}"
            rows = conn.execute(
                "SELECT queue, fire_at, due_at, attempt, origin, priority, payload, state, available_at, "
                "dispatched_at, timeout, needs FROM cronbox.outbox WHERE job_name = %s ORDER BY fire_at", (name,)).fetchall()
            history = [{k: v for k, v in r.items() if k not in ("run_id", "job", "job_id", "idempotency_key")}
                       for r in runs(conn, name)]
            stat = {k: v for k, v in jobrow(conn, name).items()
                    if k in ("active_runs", "last_fire_at", "last_run_state", "consecutive_failures", "missed_count")}
            out[kind] = (rows, history, [f["fire_at"] for f in futures(conn, name)], stat)
        return out

    assert written("p") == written("g")
    assert [f["hold"] for f in futures(conn, "paused")] == ["paused"]
