"""Early dispatch (CRONBOX_DISPATCH_LEAD): cronbox.dispatch_ahead writes the runs of fires due
within the lead whose decision cannot change before then, available at their due time;
claim_outbox(p_ahead) lets a relay take them early and hold them; release_outbox with the
lease never makes one claimable before its due time."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
import pytest

from cronbox import db

from .procs import Proc, wait_until
from .relay_support import ThreadedWorker, recording_answer
from .runs_support import at, dispatch, future, futures, job, jobrow, runs

LEAD = timedelta(seconds=1)


def ahead(conn, now: float, lead: timedelta = LEAD, limit: int = 1000) -> int:
    return conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead_at(%s, %s, p_now => %s)",
                        (limit, lead, at(now))).fetchone()[0]


def claim(conn, now: float, ahead_by: timedelta = timedelta(0), owner: str = "r1"):
    return conn.execute(
        "SELECT outbox_id, run_id, available_at, message FROM cronbox.claim_outbox_at(%s, 100, '30 seconds', "
        "p_now => %s, p_ahead => %s) ORDER BY outbox_id", (owner, at(now), ahead_by)).fetchall()


def test_a_fire_inside_the_lead_is_written_as_of_its_due_time(conn):
    job(conn, "tick", overlap="allow", timeout="90 seconds")
    future(conn, "tick", 10)
    assert ahead(conn, 9.5) == 1
    [run] = runs(conn, "tick")
    assert (run["state"], run["fire_at"], run["dispatched_at"]) == ("dispatched", at(10), at(10))
    assert conn.execute("SELECT available_at FROM cronbox.outbox WHERE run_id = %s",
                        (run["run_id"],)).fetchone()[0] == at(10)
    assert futures(conn, "tick") == []
    j = jobrow(conn, "tick")
    assert (j["active_runs"], j["last_run_state"], j["last_run_id"], j["last_fire_at"]) == (
        1, "dispatched", run["run_id"], at(10))
    # the normal dispatch finds nothing left to do for it at its due time
    assert dispatch(conn, 10)["dispatched"] == 0


def test_fires_beyond_the_lead_or_already_due_are_not_taken_early(conn):
    job(conn, "tick", overlap="allow")
    future(conn, "tick", 5)      # due already at 5.5: dispatch's
    future(conn, "tick", 7)      # beyond the lead at 5.5
    assert ahead(conn, 5.5) == 0
    assert [f["fire_at"] for f in futures(conn, "tick")] == [at(5), at(7)]


def test_a_burst_inside_the_lead_takes_its_share_and_another_queues_fire_goes_in_the_same_batch(conn):
    # 3,000 eligible fires of one queue inside the lead, due before the canary's: early
    # dispatch shares its batch between the queues as dispatch does, not in due order.
    job(conn, "burst", queue="bulk", overlap="allow")
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, queue) "
        "SELECT j.job_id, j.bucket, %s + make_interval(secs => g / 10000.0), %s + make_interval(secs => g / 10000.0), j.queue "
        "FROM cronbox.job j, generate_series(1, 3000) g WHERE j.name = 'burst'", (at(10), at(10)))
    job(conn, "canary", queue="canary", overlap="allow")
    future(conn, "canary", 10.5)
    assert ahead(conn, 9.8, limit=100) == 100  # what the canary left goes to the burst
    assert len(runs(conn, "canary")) == 1 and len(runs(conn, "burst")) == 99
    assert max(r["fire_at"] for r in runs(conn, "burst")) == at(10) + timedelta(seconds=99 / 10000)  # oldest first


@pytest.mark.parametrize("why", ["overlap", "paused", "dependency", "queue_limit", "manual", "retry"])
def test_fires_whose_decision_could_change_wait_for_their_due_time(conn, why):
    job(conn, "up", overlap="allow")
    job(conn, "late", overlap="skip" if why == "overlap" else "allow", queue="narrow")
    if why == "paused":
        conn.execute("SELECT cronbox.pause('late')")
    elif why == "dependency":
        conn.execute("SELECT cronbox.add_dependency('late', 'up', '1 hour', '1 hour')")
    elif why == "queue_limit":
        conn.execute("SELECT cronbox.set_queue_limit('narrow', 5)")
    future(conn, "late", 10, origin={"manual": "manual", "retry": "retry"}.get(why, "schedule"))
    assert ahead(conn, 9.5) == 0
    assert runs(conn, "late") == []
    assert len(futures(conn, "late")) == 1


def test_a_relay_claims_early_rows_only_when_asked_and_the_lease_runs_from_the_due_time(conn):
    job(conn, "tick", overlap="allow", timeout="90 seconds")
    future(conn, "tick", 10)
    assert ahead(conn, 9.2) == 1
    assert claim(conn, 9.3) == []                       # not due, not asked ahead
    [(oid, run_id, available, message)] = claim(conn, 9.3, LEAD)
    assert available == at(10)
    assert message["deadline"] == (at(10) + timedelta(seconds=90)).isoformat()
    leased = conn.execute("SELECT available_at, lease_until FROM cronbox.outbox WHERE outbox_id = %s",
                          (oid,)).fetchone()
    assert leased == (at(10), at(10) + timedelta(seconds=30))  # the claim leaves available_at alone
    assert claim(conn, 9.4, LEAD, owner="r2") == []     # leased to r1


def test_released_early_rows_come_back_at_their_due_time_not_before(conn):
    job(conn, "tick", overlap="allow")
    future(conn, "tick", 10)
    ahead(conn, 9.2)
    [(oid, *_)] = claim(conn, 9.3, LEAD)
    assert conn.execute("SELECT cronbox.release_outbox_at('r1', NULL, '30 seconds', p_now => %s)", (at(9.4),)).fetchone()[0] == 1
    assert conn.execute("SELECT available_at, lease_owner FROM cronbox.outbox WHERE outbox_id = %s",
                        (oid,)).fetchone() == (at(10), None)
    assert claim(conn, 9.5, owner="r2") == []
    assert [r[0] for r in claim(conn, 10, owner="r2")] == [oid]


@pytest.mark.parametrize("change", ["pause", "unschedule", "update", "dependency"])
def test_a_change_withdraws_early_runs_no_relay_holds_yet(conn, change):
    job(conn, "tick", overlap="allow")
    job(conn, "upstream")
    future(conn, "tick", 10)
    future(conn, "tick", 11)
    assert ahead(conn, 9.5, lead=timedelta(seconds=2)) == 2
    [(_held, held_run)] = conn.execute(  # a relay already holds the fire at 10
        "SELECT outbox_id, run_id FROM cronbox.claim_outbox_at('r1', 1, '30 seconds', p_now => %s, "
        "p_ahead => '2 seconds')", (at(9.6),)).fetchall()
    if change == "pause":
        conn.execute("SELECT cronbox.pause_at('tick', p_now => %s)", (at(9.7),))
    elif change == "unschedule":
        conn.execute("SELECT cronbox.unschedule_at('tick', p_now => %s)", (at(9.7),))
    elif change == "update":
        conn.execute("SELECT cronbox.schedule_at('tick', every => '2 hours', overlap => 'allow', p_now => %s)", (at(9.7),))
    else:  # a gate added after the fire was decided early
        conn.execute("SELECT cronbox.add_dependency_at('tick', 'upstream', p_now => %s)", (at(9.7),))
    rows = dict(conn.execute(
        "SELECT fire_at, (state, error) FROM cronbox.runs WHERE job = 'tick'").fetchall())
    assert rows[at(10)] == ("dispatched", None)  # held by a relay: sent at its time
    state, error = rows[at(11)]
    assert state == "cancelled" and error.startswith("cancelled: ") and "before its fire time" in error
    assert [r[0] for r in conn.execute("SELECT run_id FROM cronbox.outbox WHERE kind = 'run'").fetchall()] == [held_run]
    if change != "unschedule":
        assert jobrow(conn, "tick")["active_runs"] == 1


def test_dispatch_ahead_validates_its_arguments(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_lead: must be between 0 and 1 hour"):
        conn.execute("SELECT * FROM cronbox.dispatch_ahead(10, '-1 second')")
    conn.rollback()
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_lead: must be between 0 and 1 hour"):
        conn.execute("SELECT * FROM cronbox.dispatch_ahead(10, '178000000 years')")  # once: 22008
    conn.rollback()
    with pytest.raises(psycopg.errors.NullValueNotAllowed, match="p_lead: must not be NULL"):
        conn.execute("SELECT * FROM cronbox.dispatch_ahead(10, NULL)")
    conn.rollback()
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_limit: must be between 1 and 100000"):
        conn.execute("SELECT * FROM cronbox.dispatch_ahead(0, '1 second')")


def test_poller_and_relay_with_a_lead_send_each_fire_once_and_never_before_its_time(fresh_dsn, tmp_path):
    """Real processes: 20 schedules firing every second, CRONBOX_DISPATCH_LEAD=800ms. Runs are
    written before their fire time (the run id's time < fire_at), yet every message reaches the worker
    at or after its fire time (same machine, same clock), once per fire."""
    arrivals: list[tuple[float, dict]] = []
    answer = recording_answer(arrivals)

    with db.connect(fresh_dsn) as conn:
        for i in range(20):
            conn.execute("SELECT cronbox.schedule(%s, cron => '* * * * * *', overlap => 'allow')", (f"early-{i}",))
    with ThreadedWorker(answer) as worker:
        env = {"CRONBOX_SINKS": f"*={worker.url} batch=50", "CRONBOX_DISPATCH_LEAD": "800ms",
               "CRONBOX_POLL_INTERVAL": "200ms"}
        with Proc("poller", fresh_dsn, tmp_path, **env) as poller, Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            wait_until(lambda: len(arrivals) >= 100, timeout=30, what="100 fires delivered")
            assert relay.terminate() == 0, relay.output
            assert poller.terminate() == 0, poller.output

    keys = [m["idempotency_key"] for _, m in arrivals]
    assert len(keys) == len(set(keys))  # none sent twice
    early = [(t, m) for t, m in arrivals if t < datetime.fromisoformat(m["fire_at"]).timestamp() - 0.005]
    assert early == [], early[:3]
    with db.connect(fresh_dsn) as conn:
        ahead_of_time, doubled = conn.execute(
            "SELECT count(*) FILTER (WHERE cronbox.run_id_time(run_id) < fire_at AND dispatched_at = due_at), "
            "       (SELECT count(*) FROM (SELECT 1 FROM cronbox.runs GROUP BY job_id, fire_at, attempt "
            "                              HAVING count(*) > 1) d) "
            "FROM cronbox.runs").fetchone()
    assert ahead_of_time > 0 and doubled == 0


def test_an_eligible_fire_whose_job_is_locked_elsewhere_is_reported_busy(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        job(conn, "tick", overlap="allow")
        future(conn, "tick", 10)
    with db.connect(fresh_dsn) as saturating, db.connect(fresh_dsn) as poller:
        with saturating.transaction():
            # the job's lock as a saturation pass holds it (cronbox.claim_saturation)
            saturating.execute("SELECT cronbox.lock_job_id(job_id, bucket) FROM cronbox.job WHERE name = 'tick'")
            assert poller.execute("SELECT dispatched, busy FROM cronbox.dispatch_ahead_at(10, '1 second', p_now => %s)",
                                  (at(9.5),)).fetchone() == (0, 1)
        assert poller.execute("SELECT dispatched, busy FROM cronbox.dispatch_ahead_at(10, '1 second', p_now => %s)",
                              (at(9.5),)).fetchone() == (1, 0)


def test_early_rows_of_a_relay_that_died_holding_them_are_sent_by_another_after_the_lease(fresh_dsn, tmp_path):
    """Early dispatch is on by default: a relay that claimed rows ahead of their time and died
    before sending them (here: a claim by a relay that never sends) leaves them to the lease,
    which runs from the due time (lease_until, not available_at: the claim is a HOT update).
    A real relay then sends each exactly once, never before the lease ends: none lost."""
    arrivals: list[tuple[float, dict]] = []
    answer = recording_answer(arrivals)

    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('held', cron => '0 0 1 1 *', overlap => 'allow')")
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, now() + interval '300 ms' + n * interval '1 ms', now() + interval '300 ms' "
                     "FROM cronbox.job, generate_series(1, 5) AS n WHERE name = 'held'")
        assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(100, '1 second')").fetchone()[0] == 5
        conn.execute("SELECT * FROM cronbox.claim_outbox('dead-relay', 100, '1 second', p_ahead => '1 second')")
        claimed, lease_ends = conn.execute(
            "SELECT count(*), max(extract(epoch FROM lease_until)) FROM cronbox.outbox "
            "WHERE lease_owner = 'dead-relay' AND lease_until >= available_at + interval '1 second'").fetchone()
    assert claimed == 5 and lease_ends is not None
    with ThreadedWorker(answer) as worker:
        env = {"CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_RELAY_LEASE": "1s", "CRONBOX_POLL_INTERVAL": "100ms"}
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            wait_until(lambda: len(arrivals) >= 5, timeout=20, what="the dead relay's rows delivered")
            wait_until(lambda: one(fresh_dsn, "SELECT count(*) FROM cronbox.outbox "
                                              "WHERE state IS DISTINCT FROM 'delivered'") == 0, timeout=10,
                       what="acked")  # a delivered run's row stays the run until its report
            assert relay.terminate() == 0, relay.output
    keys = sorted(m["idempotency_key"] for _, m in arrivals)
    assert len(keys) == 5 and len(set(keys)) == 5  # each once
    assert min(t for t, _ in arrivals) >= float(lease_ends) - 0.005  # not before the lease ended
    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT state, count(*) FROM cronbox.runs WHERE job = 'held' GROUP BY state"
                            ).fetchall() == [("delivered", 5)]


def one(dsn: str, sql: str) -> object:
    with db.connect(dsn) as conn:
        return conn.execute(sql).fetchone()[0]



# The walk resumes (p_walked_to, p_walked_id): docs/architecture.md, "Early dispatch's walk".

def walk(conn, now: float, walked=None, lead: timedelta = timedelta(seconds=5), limit: int = 1000):
    """One early-dispatch call resuming at `walked`: (dispatched, busy, (walked_to, walked_id))."""
    to, wid = walked or (None, None)
    d, busy, walked_to, walked_id = conn.execute(
        "SELECT dispatched, busy, walked_to, walked_id FROM cronbox.dispatch_ahead_at("
        "%s, %s, p_walked_to => %s, p_walked_id => %s, p_now => %s)", (limit, lead, to, wid, at(now))).fetchone()
    return d, busy, (None if walked_to is None else (walked_to, walked_id))


def test_a_walk_of_the_whole_lead_resumes_where_it_stopped_and_reads_an_ineligible_jobs_fires_once(conn):
    from .test_runs_guards import job_future_rows_read
    job(conn, "skipper", overlap="buffer_one")  # a policy never taken early
    for k in range(300):
        future(conn, "skipper", 1 + k / 100)  # due within the next 5 seconds
    last = conn.execute("SELECT max(future_id) FROM cronbox.job_future").fetchone()[0]
    dispatched, busy, walked = walk(conn, 0)
    assert (dispatched, busy, walked) == (0, 0, (at(5), last))
    sql = ("SELECT * FROM cronbox.dispatch_ahead_at(1000, '5 seconds', p_walked_to => %s, p_walked_id => %s, "
           "p_now => %s)")
    # the old walk read every one of them again; the resumed one reads only past at(5)
    assert job_future_rows_read(conn, sql, (None, None, at(0.5))) >= 300
    assert job_future_rows_read(conn, sql, (*walked, at(0.5))) < 10
    # and moves on with the lead: what comes into it is read, once
    future(conn, "skipper", 5.2)
    assert walk(conn, 0.5, walked) == (0, 0, (at(5.5), last + 1))
    assert len(futures(conn, "skipper")) == 301
    # futures written since are read by key, each once, wherever they are due
    for k in range(50):
        future(conn, "skipper", 60 + k)
    assert job_future_rows_read(conn, sql, (at(5.5), last + 1, at(0.6))) < 60


def test_a_fire_written_into_the_walked_part_of_the_lead_is_still_taken_early(conn):
    job(conn, "skipper", overlap="buffer_one")
    job(conn, "newcomer", overlap="allow")
    future(conn, "skipper", 3)
    _, _, walked = walk(conn, 0)
    future(conn, "newcomer", 2)  # a new schedule's first fire, inside what was walked
    assert walk(conn, 0.5, walked)[0] == 1
    [run] = runs(conn, "newcomer")
    assert (run["state"], run["dispatched_at"]) == ("dispatched", at(2))
    assert len(futures(conn, "skipper")) == 1


def test_a_fire_made_eligible_in_the_walked_part_of_the_lead_goes_at_its_due_time(conn):
    # The price of resuming: a fire made eligible without being rewritten (a queue limit or a
    # dependency dropped; here the job's row changed directly: schedule() would rewrite its
    # futures, new ids) is not taken early in the part already walked; dispatch takes it at its
    # due time, as it would without early dispatch.
    job(conn, "changed", overlap="buffer_one")
    future(conn, "changed", 2)
    _, _, walked = walk(conn, 0)
    conn.execute("UPDATE cronbox.job SET overlap = 'allow' WHERE name = 'changed'")
    assert walk(conn, 0.5, walked)[0] == 0
    assert walk(conn, 0.5)[0] == 1  # a whole walk takes it
    assert dispatch(conn, 2)["dispatched"] == 0 and len(runs(conn, "changed")) == 1


def test_a_walk_cut_short_or_meeting_a_busy_job_says_where_to_resume_nowhere(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        job(conn, "many", overlap="allow")
        for k in range(5):
            future(conn, "many", 1 + k / 10)
        assert walk(conn, 0, limit=3) == (3, 0, None)  # cut short: more may be waiting
        dispatched, busy, walked = walk(conn, 0, limit=3)
        assert (dispatched, busy) == (2, 0) and walked is not None
    with db.connect(fresh_dsn) as conn, db.connect(fresh_dsn) as saturating:
        job(conn, "locked", overlap="allow")
        future(conn, "locked", 2)
        with saturating.transaction():
            saturating.execute("SELECT cronbox.lock_job_id(job_id, bucket) FROM cronbox.job WHERE name = 'locked'")
            assert walk(conn, 0) == (0, 1, None)  # busy: worth another whole walk soon
        dispatched, busy, walked = walk(conn, 0)
        assert (dispatched, busy) == (1, 0) and walked is not None


@pytest.mark.parametrize("commit", ["before the walk", "after the walk"])
def test_a_fire_committed_after_a_walk_that_passed_its_id_is_dispatched_once_at_its_time(fresh_dsn, commit):
    """A future whose id was taken before the walk's newest id but committed after the walk: the
    resumed walk passes over it (not new by id, not due after walked_to), so dispatch decides it
    at its due time; committed before the walk, early dispatch takes it. Once either way."""
    with db.connect(fresh_dsn) as conn, db.connect(fresh_dsn) as writer:
        job(conn, "slow", overlap="allow")
        job(conn, "fast", overlap="allow")
        job(conn, "skipper", overlap="skip")
        future(conn, "skipper", 3)
        _, _, walked = walk(conn, 0)
        with writer.transaction():
            future(writer, "slow", 2)               # its id first
            fast = future(conn, "fast", 2.5)        # a later id, committed first
            if commit == "after the walk":
                early, _, walked = walk(conn, 0.5, walked)
                assert (early, walked) == (1, (at(5.5), fast))
        if commit == "before the walk":
            assert walk(conn, 0.5, walked)[0] == 2
        else:
            assert walk(conn, 1, walked)[0] == 0    # passed over: its id is below walked_id
        # decided at its due time by dispatch when early dispatch passed over it
        assert dispatch(conn, 2)["dispatched"] == (1 if commit == "after the walk" else 0)
        got = [(r["job"], r["fire_at"], r["dispatched_at"]) for r in runs(conn) if r["job"] != "skipper"]
        assert sorted(got) == [("fast", at(2.5), at(2.5)), ("slow", at(2), at(2))]
