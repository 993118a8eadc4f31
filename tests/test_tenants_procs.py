"""Tenants against the real processes: a tenant at its quota beside another tenant's canary,
and a bulk pause and resume of many schedules while the poller dispatches them
(docs/operations.md, "Tenants")."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from cronbox import db

from .procs import Proc, wait_until
from .roles import logins  # noqa: F401  (fixture)

SEC = timedelta(seconds=1)


def _lags(dsn: str, job: str, since) -> list[float]:
    """Fire time -> dispatch of the job's runs fired after `since` (not dispatched yet: until now)."""
    with db.connect(dsn) as c:
        return [r[0] for r in c.execute(
            "SELECT extract(epoch FROM coalesce(dispatched_at, clock_timestamp()) - fire_at)::float8 "
            "FROM cronbox.runs WHERE job = %s AND fire_at > %s AND state <> 'skipped' "
            "AND fire_at < now() - interval '1 second' ORDER BY fire_at", (job, since))]


@pytest.mark.slow
def test_a_tenant_at_its_quota_leaves_another_tenants_canary_within_a_second(fresh_dsn, logins, tmp_path):  # noqa: F811
    """DESIGN's figure: an every-second canary keeps fire -> dispatch under 1 s while another
    tenant floods up to its quota (schedules at its rate, and manual fires past it)."""
    alice = logins.name("alice")
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.set_quota(%s, max_schedules => 100, max_fires_per_second => 100, "
                   "top_priority => 32767)", (alice,))
    with logins.connect(fresh_dsn, "alice") as c:
        # up to its quota: 100 every-second schedules at the least urgent priority
        c.execute("SELECT cronbox.schedule('flood-' || i, every => '1 second', queue => 'flood', "
                  "priority => 32767, overlap => 'allow') FROM generate_series(1, 100) i")
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded):
            c.execute("SELECT cronbox.schedule('flood-more', every => '1 second', priority => 32767)")
    with logins.connect(fresh_dsn, "bob") as c:
        c.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_HORIZON="5s") as poller:
        with db.connect(fresh_dsn) as su:
            start = su.execute("SELECT now() + interval '3 seconds'").fetchone()[0]  # past the start-up
        with logins.connect(fresh_dsn, "alice") as c:
            # and a flood of manual fires: past a second's worth they wait their turn
            c.execute("SELECT cronbox.trigger('flood-' || (i % 100 + 1)) FROM generate_series(1, 500) i")
        wait_until(lambda: len(_lags(fresh_dsn, "canary", start)) >= 6, timeout=90,
                   what=f"6 canary fires; poller: {poller.output[-1500:]}")
        lags = _lags(fresh_dsn, "canary", start)
        with db.connect(fresh_dsn) as su:
            # the tenant really was at its quota meanwhile: its fire times passed (dispatched, or
            # waiting their turn: past its rate a fire's due time moves later)
            flood = su.execute(
                "SELECT (SELECT count(*) FROM cronbox.runs WHERE queue = 'flood' AND fire_at > %(t)s) "
                "+ (SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                "   WHERE j.queue = 'flood' AND f.fire_at > %(t)s AND f.fire_at <= now())", {"t": start}).fetchone()[0]
    assert flood >= 6 * 100 // 2, flood  # at least half its rate came due, whatever the machine
    assert max(lags) < 1.0, lags


@pytest.mark.slow
def test_bulk_pause_and_resume_of_many_schedules_while_the_poller_runs(fresh_dsn, tmp_path):
    n = 500
    with db.connect(fresh_dsn) as c:
        c.execute("SELECT cronbox.schedule('bulk-' || i, every => '1 second', queue => 'bulk', overlap => 'allow') "
                  "FROM generate_series(1, %s) i", (n,))
        c.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_POLL_INTERVAL="100ms", CRONBOX_HORIZON="5s") as poller:
        def runs_since(t, queue: str) -> int:
            with db.connect(fresh_dsn) as c:
                return c.execute("SELECT count(*) FROM cronbox.runs WHERE queue = %s AND fire_at > %s "
                                 "AND state = 'dispatched'", (queue, t)).fetchone()[0]
        with db.connect(fresh_dsn) as c:
            t0 = c.execute("SELECT now()").fetchone()[0]
        wait_until(lambda: runs_since(t0, "bulk") >= 2 * n, timeout=90,
                   what=f"bulk jobs firing; poller: {poller.output[-1500:]}")
        with db.connect(fresh_dsn) as c:
            paused = c.execute("SELECT cronbox.pause_schedules(queue => 'bulk', reason => 'bulk test')").fetchone()[0]
            paused_at = c.execute("SELECT now()").fetchone()[0]
        assert paused == n
        with db.connect(fresh_dsn) as c:
            assert c.execute("SELECT count(*) FROM cronbox.schedule_changes WHERE action = 'paused' "
                             "AND reason = 'bulk test'").fetchone()[0] == n
        # the canary goes on; no paused job fires after the pause (early runs were withdrawn)
        wait_until(lambda: runs_since(paused_at + 2 * SEC, "canary") >= 1, timeout=30, what="canary after the pause")
        assert runs_since(paused_at, "bulk") == 0
        with db.connect(fresh_dsn) as c:
            resumed = c.execute("SELECT cronbox.resume_schedules(name_like => 'bulk-%%')").fetchone()[0]
            resumed_at = c.execute("SELECT now()").fetchone()[0]
        assert resumed == n
        def jobs_firing_again() -> bool:
            with db.connect(fresh_dsn) as c:
                return c.execute("SELECT count(DISTINCT job_id) FROM cronbox.runs WHERE queue = 'bulk' "
                                 "AND fire_at > %s", (resumed_at,)).fetchone()[0] == n
        wait_until(jobs_firing_again, timeout=60, what="every bulk job firing again")


@pytest.mark.slow
def test_a_canary_keeps_its_second_while_many_due_jobs_are_locked_elsewhere(fresh_dsn, tmp_path):
    """A bulk pause or resume, or a saturation pass, holds the locks of many jobs whose fires
    are due ahead of another queue's canary (same priority): dispatch passes over them without
    counting them against its batch, so the canary is dispatched within its second all along."""
    n = 600  # six times the batch below: the locked jobs' due fires alone would fill every batch
    with db.connect(fresh_dsn) as c:
        base = c.execute("SELECT date_trunc('second', now()) + interval '2 seconds'").fetchone()[0]
        # the bulk jobs fire 100 ms before the canary each second, so their fires come first in
        # the due order of both dispatch and early dispatch
        c.execute("SELECT cronbox.schedule('bulk-' || i, every => '1 second', queue => 'bulk', overlap => 'allow', "
                  "starts_at => %s::timestamptz + interval '400 milliseconds') FROM generate_series(1, %s) i", (base, n))
        c.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow', "
                  "starts_at => %s::timestamptz + interval '500 milliseconds')", (base,))
        # a queue limit (never reached here) keeps the canary out of early dispatch: its fires
        # are dispatch's at their due time, behind the bulk jobs' in the walk
        c.execute("SELECT cronbox.set_queue_limit('canary', 1000)")
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_DISPATCH_BATCH="100", CRONBOX_HORIZON="10s") as poller:
        with db.connect(fresh_dsn) as c:
            t0 = c.execute("SELECT now()").fetchone()[0]
        wait_until(lambda: len(_lags(fresh_dsn, "canary", t0)) >= 2, timeout=90,
                   what=f"the canary firing; poller: {poller.output[-1500:]}")
        with db.connect(fresh_dsn, autocommit=False) as bulk:
            # as resume_schedules holds them: every bulk job's lock, until this transaction ends
            assert bulk.execute("SELECT count(*) FROM (SELECT cronbox.lock_job_id(job_id, bucket) FROM cronbox.job "
                                "WHERE queue = 'bulk') x").fetchone()[0] == n
            held = bulk.execute("SELECT now()").fetchone()[0]
            wait_until(lambda: len(_lags(fresh_dsn, "canary", held)) >= 5, timeout=60,
                       what=f"five canary fires under the locks; poller: {poller.output[-1500:]}")
            lags = _lags(fresh_dsn, "canary", held)
            with db.connect(fresh_dsn) as c:  # the bulk jobs' fires really were due and waiting
                waiting = c.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                                    "WHERE j.queue = 'bulk' AND f.due_at < now()").fetchone()[0]
            bulk.rollback()
        assert poller.popen.poll() is None, poller.output[-2000:]
    assert waiting >= n, waiting
    assert max(lags) < 1.0, lags
