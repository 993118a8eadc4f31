"""Early 'skip' runs (docs/runs.md, "Early dispatch"): a fire of an overlap 'skip' job decided
ahead of its time is claimable only from its due time (outbox.claim_at_due), so that it stays
withdrawable until then."""

from __future__ import annotations

from datetime import timedelta

from .runs_support import at, future, job

LEAD = timedelta(seconds=2)  # early skip runs: a lead longer than 1 second


def claim(conn, now: float, ahead_by: timedelta = timedelta(0), owner: str = "r1"):
    return conn.execute(
        "SELECT outbox_id FROM cronbox.claim_outbox_at(%s, 100, '30 seconds', "
        "p_now => %s, p_ahead => %s) ORDER BY outbox_id", (owner, at(now), ahead_by)).fetchall()


def test_a_row_claimable_only_at_its_due_time_is_never_claimed_ahead(conn):
    job(conn, "tick", overlap="allow")
    job(conn, "tock", overlap="allow")
    job(conn, "soon", overlap="allow")
    job(conn, "later", overlap="allow", queue="other")
    future(conn, "tick", 10)
    future(conn, "tock", 10)
    future(conn, "soon", 9.8)
    future(conn, "later", 10)
    conn.execute("SELECT * FROM cronbox.dispatch_ahead_at(10, '1 second', p_now => %s)", (at(9.2),))
    ids = dict(conn.execute("SELECT j.name, o.outbox_id FROM cronbox.outbox o JOIN cronbox.job j USING (job_id)"))
    conn.execute("UPDATE cronbox.outbox SET claim_at_due = true WHERE outbox_id = %s", (ids["tick"],))
    ahead_taken = {r[0] for r in claim(conn, 9.3, LEAD)}
    # held ahead: the queue's rows due before its first flagged row or at its time, and another
    # queue's; the queue's look ahead stops at the flagged row (tests below)
    assert ahead_taken == {ids["soon"], ids["tock"], ids["later"]}
    assert claim(conn, 9.99, LEAD, owner="r2") == []
    # pull mode never takes a row before it is due either
    assert conn.execute("SELECT count(*) FROM cronbox.claim_runs_at('default', 'w1', 10, p_now => %s)",
                        (at(9.99),)).fetchone()[0] == 0
    assert [r[0] for r in claim(conn, 10, LEAD, owner="r2")] == [ids["tick"]]


def test_a_claim_looking_ahead_stops_at_a_queue_s_first_flagged_row_and_walks_none_of_them(conn):
    """A burst of early 'skip' runs under one due time (flagged claim_at_due) is not walked by a
    claim looking ahead of it: the queue's first flagged row is found in outbox_flagged_idx and
    the look ahead stops before it. Neither the relay's question when the next is due nor the
    withdrawal's probe walks them (tests/test_relay_claim_at_due.py)."""
    from .plan_support import nodes, plans_of
    job(conn, "before", overlap="allow")
    for k in range(300):
        job(conn, f"burst{k}", overlap="allow")
        future(conn, f"burst{k}", 10)
    future(conn, "before", 9.5)
    conn.execute("SELECT * FROM cronbox.dispatch_ahead_at(1000, '2 seconds', p_now => %s)", (at(8.5),))
    conn.execute("UPDATE cronbox.outbox o SET claim_at_due = true FROM cronbox.job j "
                 "WHERE j.job_id = o.job_id AND j.name LIKE 'burst%%'")
    conn.execute("ANALYZE cronbox.outbox")
    sql = "SELECT * FROM cronbox.claim_outbox_at('r1', 100, '30 seconds', p_now => %s, p_ahead => %s)"
    plans = plans_of(conn, sql, (at(9), LEAD), analyze=True)
    walked = [n for p in plans for n in nodes(p["Plan"]) if n.get("Relation Name") == "outbox"]
    # the 300 flagged rows: at most the claim's limit (100) of them looked at, those due at the
    # time of the first (the rows due with it that are not flagged are held ahead too)
    passed = sum(n.get("Rows Removed by Filter", 0) * n.get("Actual Loops", 1) for n in walked)
    read = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in walked if n.get("Index Name") == "outbox_queue_idx")
    assert walked and passed <= 100 and read <= 110, (passed, read, walked)
    # (the plan's run leased the rows it took)
    [(taken,)] = conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE lease_owner = 'r1'").fetchall()
    assert taken == conn.execute("SELECT o.outbox_id FROM cronbox.outbox o JOIN cronbox.job j USING (job_id) "
                                    "WHERE j.name = 'before'").fetchone()[0]


import threading  # noqa: E402

import pytest  # noqa: E402

from cronbox import db  # noqa: E402

from .runs_support import complete, dispatch, futures, jobrow, runs  # noqa: E402


def ahead(conn, now: float, lead: timedelta = LEAD) -> int:
    return conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead_at(1000, %s, p_now => %s)",
                        (lead, at(now))).fetchone()[0]


def finished_run(conn, name: str) -> int:
    """A run of the job at 1, succeeded at 2: its statistics are not empty before the early run."""
    future(conn, name, 1)
    dispatch(conn, 1)
    [run] = [r for r in runs(conn, name) if r["fire_at"] == at(1)]
    complete(conn, run["run_id"], 2)
    return run["run_id"]


def outcome(conn, name: str):
    """What a job's runs, statistics and futures are, by fire and origin (not by run id)."""
    rows = runs(conn, name)
    by_id = {r["run_id"]: (r["fire_at"], r["origin"]) for r in rows}
    s = jobrow(conn, name)
    return ([(r["fire_at"], r["origin"], r["state"], r["attempt"]) for r in sorted(rows, key=lambda r: (r["fire_at"], r["origin"]))],
            (s["active_runs"], s["last_fire_at"], by_id.get(s["last_run_id"]), s["last_run_state"]),
            [(f["fire_at"], f["due_at"], f["origin"]) for f in futures(conn, name)])


def early_run(conn, name: str) -> int:
    [(run_id,)] = conn.execute("SELECT o.outbox_id FROM cronbox.outbox o JOIN cronbox.job j USING (job_id) "
                               "WHERE j.name = %s AND o.available_at > o.created_at", (name,)).fetchall()
    return run_id


def test_a_skip_jobs_first_fire_is_decided_early_and_claimable_only_from_its_time(conn):
    job(conn, "tick", overlap="skip", timeout="90 seconds")
    before = finished_run(conn, "tick")
    future(conn, "tick", 10)
    future(conn, "tick", 10.5)          # a second fire within the lead: decided at its time
    assert ahead(conn, 9.2, timedelta(seconds=2)) == 1
    run_id = early_run(conn, "tick")
    [run] = [r for r in runs(conn, "tick") if r["run_id"] == run_id]
    # shown as what it is: dispatched as of its time, not delivered, not running
    assert (run["state"], run["fire_at"], run["dispatched_at"]) == ("dispatched", at(10), at(10))
    assert [f["fire_at"] for f in futures(conn, "tick")] == [at(10.5)]
    marker = conn.execute("SELECT s.early_due_at, s.early_prev_run_id, s.early_prev_state, o.claim_at_due "
                          "FROM cronbox.job_stat s JOIN cronbox.outbox o ON o.outbox_id = s.last_run_id "
                          "JOIN cronbox.job j ON j.job_id = s.job_id WHERE j.name = 'tick'").fetchone()
    assert marker == (at(10), before, "succeeded", True)
    assert claim(conn, 9.3, LEAD) == []
    assert claim(conn, 9.99, LEAD) == []
    assert [r[0] for r in claim(conn, 10, LEAD)] == [run_id]
    # at 10.5, the second fire is skipped against it, as at its time
    assert dispatch(conn, 10.5)["skipped"] == 1


def test_a_steady_lead_of_a_second_or_less_leaves_skip_fires_to_their_time(conn):
    job(conn, "tick", overlap="skip")
    future(conn, "tick", 10)
    assert ahead(conn, 9.5, timedelta(seconds=1)) == 0
    assert dispatch(conn, 10)["dispatched"] == 1


def test_a_skip_job_with_a_run_unfinished_is_not_decided_early(conn):
    job(conn, "tick", overlap="skip")
    future(conn, "tick", 5)
    dispatch(conn, 5)
    future(conn, "tick", 10)
    assert ahead(conn, 9.5) == 0
    assert dispatch(conn, 10)["skipped"] == 1


@pytest.mark.parametrize("kind", [{"at": "x"}, {"max_runs": 5}, {"every_mode": "fixed_delay"}])
def test_skip_jobs_that_may_finish_or_fire_after_their_runs_are_decided_at_their_time(conn, kind):
    opts = dict(kind)
    if "at" in opts:
        opts = {"at": at(10), "every": None}
    job(conn, "tick", overlap="skip", **opts)
    conn.execute("DELETE FROM cronbox.job_future")
    future(conn, "tick", 10)
    assert ahead(conn, 9.5) == 0


def act(conn, name: str, action: str, finished: int) -> None:
    if action == "trigger":
        conn.execute("SELECT cronbox.trigger_at(%s, p_now => %s)", (name, at(9.5)))
    elif action == "rerun":
        conn.execute("SELECT cronbox.rerun_at(%s, p_now => %s)", (finished, at(9.5)))
    else:  # a retry, a backfilled fire, an after-job's fire: a future of its own, due before the early run
        future(conn, name, 3, due=9.5, origin=action)


@pytest.mark.parametrize("action", ["trigger", "rerun", "retry", "backfill", "dependency"])
def test_a_run_made_before_the_early_skip_run_is_due_takes_it_back_without_a_trace(conn, action):
    """The same steps on a job whose fire was decided early and on one whose fire was not: the
    same runs, statistics and futures (the early run leaves no history row, no trace)."""
    job(conn, "tick", overlap="skip")
    job(conn, "ref", overlap="skip")
    done = {name: finished_run(conn, name) for name in ("tick", "ref")}
    future(conn, "tick", 10)
    assert ahead(conn, 9.2) == 1
    early = early_run(conn, "tick")
    future(conn, "ref", 10)
    for name in ("tick", "ref"):
        act(conn, name, action, done[name])
    if action not in ("trigger", "rerun"):
        dispatch(conn, 9.5)
    assert conn.execute("SELECT count(*) FROM cronbox.run WHERE run_id = %s", (early,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE outbox_id = %s", (early,)).fetchone()[0] == 0
    assert conn.execute("SELECT early_due_at FROM cronbox.job_stat s JOIN cronbox.job j USING (job_id) "
                        "WHERE j.name = 'tick'").fetchone()[0] is None
    assert outcome(conn, "tick") == outcome(conn, "ref")
    dispatch(conn, 10)   # the fire at 10, at its time: skipped against the run made at 9.5
    assert outcome(conn, "tick") == outcome(conn, "ref")
    assert [r["state"] for r in runs(conn, "tick") if r["fire_at"] == at(10)] == ["skipped"]


def test_a_cancelled_early_skip_run_is_not_taken_back_again(conn):
    job(conn, "tick", overlap="skip")
    future(conn, "tick", 10)
    assert ahead(conn, 9.2) == 1
    early = early_run(conn, "tick")
    conn.execute("SELECT cronbox.cancel_at(%s, p_now => %s)", (early, at(9.3)))
    conn.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.5),))
    assert futures(conn, "tick") == []        # no future written back for a run that ended
    states = sorted((r["origin"], r["state"]) for r in runs(conn, "tick"))
    assert states == [("manual", "dispatched"), ("schedule", "cancelled")]
    assert jobrow(conn, "tick")["active_runs"] == 1
    # the marker is left set (no early 'skip' run waited at the trigger); once another job's
    # early 'skip' run waits, the next run of tick looks at it, and takes no run back for it
    [manual] = [r["run_id"] for r in runs(conn, "tick") if r["origin"] == "manual"]
    complete(conn, manual, 9.6)
    job(conn, "tock", overlap="skip")
    future(conn, "tock", 11)
    assert ahead(conn, 9.7) == 1
    tock = early_run(conn, "tock")
    conn.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.8),))
    assert sorted((r["origin"], r["state"]) for r in runs(conn, "tick")) == [
        ("manual", "dispatched"), ("manual", "succeeded"), ("schedule", "cancelled")]
    assert jobrow(conn, "tick")["active_runs"] == 1
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE outbox_id = %s", (tock,)).fetchone()[0] == 1


def test_an_early_skip_run_behind_many_waiting_rows_is_still_taken_back(conn):
    """The withdrawal looks at job markers once a short walk of the rows waiting for a later
    time finds an early 'skip' run; with more waiting rows before it than that walk reads (early
    'allow' runs due sooner), it looks all the same."""
    job(conn, "tick", overlap="skip")
    future(conn, "tick", 10)
    for k in range(40):
        job(conn, f"many{k}", overlap="allow")
        future(conn, f"many{k}", 9.6)
    assert ahead(conn, 9.2) == 41
    early = early_run(conn, "tick")
    conn.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.5),))
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE outbox_id = %s", (early,)).fetchone()[0] == 0
    assert [f["fire_at"] for f in futures(conn, "tick")] == [at(10)]
    assert dispatch(conn, 10)["skipped"] == 1


def test_runs_made_with_no_early_skip_run_waiting_leave_the_early_allow_runs_alone(conn):
    job(conn, "tick", overlap="skip")
    job(conn, "tock", overlap="allow")
    future(conn, "tock", 10)
    assert ahead(conn, 9.2) == 1
    conn.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.5),))
    conn.execute("SELECT cronbox.trigger_at('tock', p_now => %s)", (at(9.5),))
    assert sorted((r["origin"], r["state"]) for r in runs(conn, "tock")) == [("manual", "dispatched"), ("schedule", "dispatched")]
    assert jobrow(conn, "tick")["active_runs"] == 1


@pytest.mark.parametrize("change", ["pause", "unschedule", "update"])
def test_a_change_withdraws_an_early_skip_run_as_an_early_allow_run(conn, change):
    job(conn, "tick", overlap="skip")
    future(conn, "tick", 10)
    assert ahead(conn, 9.2) == 1
    if change == "pause":
        conn.execute("SELECT cronbox.pause_at('tick', p_now => %s)", (at(9.5),))
    elif change == "unschedule":
        conn.execute("SELECT cronbox.unschedule_at('tick', p_now => %s)", (at(9.5),))
    else:
        conn.execute("SELECT cronbox.schedule_at('tick', every => '2 hours', overlap => 'skip', p_now => %s)", (at(9.5),))
    [(state, error)] = conn.execute("SELECT state, error FROM cronbox.runs WHERE job = 'tick'").fetchall()
    assert state == "cancelled" and "before its fire time" in error
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0] == 0
    if change != "unschedule":
        assert jobrow(conn, "tick")["active_runs"] == 0
        conn.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.6),))  # the stale marker: harmless
        assert jobrow(conn, "tick")["active_runs"] == 1


def _ref_and_tick(dsn: str) -> None:
    with db.connect(dsn) as c:
        job(c, "tick", overlap="skip")
        future(c, "tick", 10)


def test_an_early_skip_decision_then_a_trigger_waiting_for_its_lock(fresh_dsn):
    """Early dispatch holds the job's lock; trigger() waits for it, then takes the early run back."""
    _ref_and_tick(fresh_dsn)
    with db.connect(fresh_dsn) as poller, db.connect(fresh_dsn) as user, db.connect(fresh_dsn) as look:
        pid = user.execute("SELECT pg_backend_pid()").fetchone()[0]
        with poller.transaction():
            assert ahead(poller, 9.2) == 1
            t = threading.Thread(target=lambda: user.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.5),)))
            t.start()
            while look.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] != "Lock":
                pass
        t.join(10)
        assert not t.is_alive()
        assert [(r["origin"], r["state"]) for r in runs(look, "tick")] == [("manual", "dispatched")]
        assert [f["fire_at"] for f in futures(look, "tick")] == [at(10)]
        assert dispatch(look, 10)["skipped"] == 1


def test_a_trigger_then_early_dispatch_finds_the_job_busy_then_not_eligible(fresh_dsn):
    _ref_and_tick(fresh_dsn)
    with db.connect(fresh_dsn) as poller, db.connect(fresh_dsn) as user:
        with user.transaction():
            user.execute("SELECT cronbox.trigger_at('tick', p_now => %s)", (at(9.1),))
            assert poller.execute("SELECT dispatched, busy FROM cronbox.dispatch_ahead_at(10, '2 seconds', p_now => %s)",
                                  (at(9.2),)).fetchone() == (0, 1)
        assert ahead(poller, 9.3) == 0      # the trigger's run is unfinished: decided at its time
        assert dispatch(poller, 10)["skipped"] == 1


def test_a_redriven_run_takes_back_the_early_skip_run(conn):
    job(conn, "tick", overlap="skip")
    future(conn, "tick", 1)
    dispatch(conn, 1)
    [dead] = [r["run_id"] for r in runs(conn, "tick")]
    conn.execute("SELECT cronbox.finish_runs(ARRAY[%s]::bigint[], 'failed', NULL, ARRAY['undeliverable: gone'], false, %s)",
                 (dead, at(2)))
    conn.execute("INSERT INTO cronbox.dead_letter (outbox_id, queue, kind, run_id, message, timeout, attempts, last_error, "
                 "created_at, dead_at) VALUES (-1, 'default', 'run', %s, '{}', '5 minutes', 3, 'gone', %s, %s)",
                 (dead, at(1), at(2)))
    future(conn, "tick", 10)
    assert ahead(conn, 9.2) == 1
    early = early_run(conn, "tick")
    conn.execute("SELECT cronbox.redrive_at(NULL, 'default', false, %s)", (at(9.5),))
    assert [(r["run_id"], r["state"]) for r in runs(conn, "tick")] == [(dead, "dispatched")]
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE outbox_id = %s", (early,)).fetchone()[0] == 0
    s = jobrow(conn, "tick")
    assert (s["active_runs"], s["last_run_id"]) == (1, dead)
    assert dispatch(conn, 10)["skipped"] == 1


def test_a_real_relay_with_a_lead_holds_early_allow_runs_but_takes_an_early_skip_run_only_at_its_time(fresh_dsn, tmp_path):
    import time

    from .procs import Proc, wait_until
    from .relay_support import ThreadedWorker, recording_answer

    arrivals: list[tuple[float, dict]] = []
    answer = recording_answer(arrivals)

    with db.connect(fresh_dsn) as conn:
        for name, overlap in (("held", "allow"), ("skipper", "skip")):
            conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *', overlap => %s)", (name, overlap))
        conn.execute("DELETE FROM cronbox.job_future")
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, now() + interval '8 seconds', now() + interval '8 seconds' FROM cronbox.job")
        assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(100, '9 seconds')").fetchone()[0] == 2
        due = conn.execute("SELECT extract(epoch FROM min(available_at))::float8 FROM cronbox.outbox").fetchone()[0]
    with ThreadedWorker(answer) as worker:
        env = {"CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_DISPATCH_LEAD": "4s", "CRONBOX_POLL_INTERVAL": "100ms"}
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay, db.connect(fresh_dsn) as look:
            held_early = False
            while time.time() < due - 0.05:   # before its time: the skip run is never leased
                leased = dict(look.execute("SELECT job_name, lease_owner IS NOT NULL FROM cronbox.outbox").fetchall())
                assert not leased.get("skipper"), "an early skip run was claimed before its time"
                held_early = held_early or leased.get("held", False)
                time.sleep(0.02)
            wait_until(lambda: len(arrivals) >= 2, timeout=20, what="both runs delivered")
            assert relay.terminate() == 0, relay.output
    assert held_early   # the allow run was held ahead, as before (the relay started well before its time)
    assert sorted(m["job"] for _, m in arrivals) == ["held", "skipper"]
    assert min(t for t, _ in arrivals) >= due - 0.005   # neither sent before its time



@pytest.mark.parametrize("overlap", ["skip", "allow"])
def test_early_dispatch_reads_each_job_row_twice_a_fire_walk_and_check_and_writes_without_reading_it(conn, overlap):
    """Early dispatch reads each fire's job row twice: in its walk, and in its check under the
    locks (step 2), whose one probe per fire (evaluated once, not per aggregate filter) also
    decides the plain batch that the write then takes as read (cronbox.dispatch_plain_fires):
    the write does not read the job row again (three job rows a fire before, six before that).
    A row read and removed by a filter counts as read."""
    from .plan_support import nodes, plans_of
    names = [f"early{k}" for k in range(20)]
    for name in names:
        job(conn, name, overlap=overlap)
        future(conn, name, 10)
    conn.execute("ANALYZE cronbox.job")
    plans = plans_of(conn, "SELECT dispatched FROM cronbox.dispatch_ahead_at(1000, %s, p_now => %s)",
                     (LEAD, at(9)), analyze=True)
    scans = [n for p in plans if not p["Query Text"].startswith("SELECT 1 FROM ONLY")
             for n in nodes(p["Plan"]) if n["Node Type"].endswith("Scan")]
    job_rows = sum((n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)
                   for n in scans if n.get("Relation Name") == "job")
    assert job_rows <= 2 * len(names), job_rows
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE claim_at_due").fetchone()[0] == \
        (len(names) if overlap == "skip" else 0)
