"""The relay and early 'skip' runs (docs/runs.md, "Early dispatch"): a row claimable only from its
due time (outbox.claim_at_due) is claimed at that time, the database telling the relay when
(cronbox.next_claim_at_due), not at the relay's next wake-up."""

from __future__ import annotations

from cronbox import db

from .procs import Proc, wait_until
from .relay_support import ThreadedWorker, recording_answer


def test_the_database_says_when_the_first_early_skip_run_becomes_claimable(conn):
    for name, overlap in (("held", "allow"), ("skipper", "skip")):
        conn.execute("SELECT cronbox.schedule(%s, cron => '0 0 1 1 *', overlap => %s)", (name, overlap))
    conn.execute("DELETE FROM cronbox.job_future")

    def wait(ahead: str):
        return conn.execute("SELECT extract(epoch FROM cronbox.next_claim_at_due(%s))::float8", (ahead,)).fetchone()[0]

    assert wait("1 minute") is None   # nothing waits
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, now() + interval '3 seconds', "
                 "now() + interval '3 seconds' + CASE WHEN name = 'skipper' THEN interval '5 seconds' ELSE '0' END "
                 "FROM cronbox.job")
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(100, '10 seconds')").fetchone()[0] == 2
    # the early 'allow' run due sooner is not one: a relay holds it and sends it at its time
    assert 5 < wait("1 minute") <= 8
    assert wait("4 seconds") is None  # not within p_ahead
    conn.execute("UPDATE cronbox.outbox SET lease_owner = 'r1', lease_until = now() + interval '1 minute' WHERE claim_at_due")
    assert wait("1 minute") is None   # claimed already


def test_a_real_relay_claims_an_early_skip_run_at_its_time_not_at_its_next_wake_up(fresh_dsn, tmp_path):
    """A relay whose lead is long naps for half of it between claims (no NOTIFY comes when a
    held row's time comes); it asks the database when the next early 'skip' run is claimable
    and wakes then: the run is sent at its time, not up to 20 s later."""
    arrivals: list[tuple[float, dict]] = []
    answer = recording_answer(arrivals)

    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('skipper', cron => '0 0 1 1 *', overlap => 'skip')")
        conn.execute("DELETE FROM cronbox.job_future")
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, now() + interval '10 seconds', now() + interval '10 seconds' FROM cronbox.job")
        assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(100, '11 seconds')").fetchone()[0] == 1
        due = conn.execute("SELECT extract(epoch FROM available_at)::float8 FROM cronbox.outbox WHERE claim_at_due").fetchone()[0]
    with ThreadedWorker(answer) as worker:
        # the relay's first claim (at its start) passes over the row; its next wake-up by
        # lead or poll interval would be 20 s later
        env = {"CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_DISPATCH_LEAD": "40s", "CRONBOX_POLL_INTERVAL": "60s",
               "CRONBOX_RELAY_LEASE": "90s"}
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            wait_until(lambda: len(arrivals) >= 1, timeout=40, what="the skip run delivered")
            assert relay.terminate() == 0, relay.output
    [(arrived, message)] = arrivals
    assert message["job"] == "skipper"
    assert due - 0.005 <= arrived < due + 5, arrived - due   # at its time (or at the relay's start, if later)
