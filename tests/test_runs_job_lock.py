"""The job's lock is the row lock (FOR NO KEY UPDATE) on the job's cronbox.job_stat row
(cronbox.lock_job_id), not a lock on the job row, and no longer an advisory lock
(one shared lock-table entry per job per transaction: a batch of distinct jobs could fill the
server's table and fail every session with 'out of shared memory'). Dispatch takes it with SKIP
semantics, the finishing functions wait for it, and every writer of a job's definition,
futures or statistics takes it before anything else. The window this opens: a writer that
forgot it would change a job while dispatch decides on it. These tests hold each writer's
transaction open and check that dispatch leaves the job alone until it ends; that the hot path
writes nothing to the job table (job_stat gets the lock records, it is updated anyway); and
that a large batch takes no lock-table entry per job."""

from __future__ import annotations

import threading

import psycopg
import pytest

from cronbox import db

from .procs import wait_until
from .runs_support import ADD_JOB_ROWS

# Each writer, run in a transaction left open while dispatch is called (job 'w', upstream 'up').
WRITERS = {
    "pause": "SELECT cronbox.pause('w')",
    "resume": "SELECT cronbox.resume('w')",
    "schedule_update": "SELECT cronbox.schedule('w', every => '2 hours', overlap => 'allow')",
    "unschedule": "SELECT cronbox.unschedule('w')",
    "add_dependency": "SELECT cronbox.add_dependency('w', 'up')",
    "remove_dependency": "SELECT cronbox.remove_dependency('w', 'up')",
    "quarantine_job": "SELECT cronbox.quarantine_job(job_id, 'boom') FROM cronbox.job WHERE name = 'w'",
    "saturation": "SELECT count(*) FROM cronbox.claim_saturation(100, '1 day')",
    "complete_run": "SELECT cronbox.complete_run(run_id) FROM cronbox.runs WHERE job = 'w' AND state = 'dispatched'",
    "backfill": "SELECT cronbox.backfill('w', now() - interval '3 hours', now() - interval '1 hour')",
    # the backfill pass: claim_backfills takes the locks store_backfill relies on
    "backfill_pass": "SELECT count(*) FROM cronbox.claim_backfills(10)",
    "resume_paused": "SELECT cronbox.resume_paused(100)",
    "redrive": "SELECT cronbox.redrive(everything => true)",
    # trigger() decides its own fire in its transaction (dispatch_locked), under the job's lock
    "trigger": "SELECT cronbox.trigger('w')",
    # a calendar change recomputes the pending fires of the jobs that use it
    "create_calendar": "SELECT cronbox.create_calendar('cal', dates => '{2031-01-02}')",
}


def counts(conn: psycopg.Connection) -> tuple[int, int, int, int]:
    return conn.execute("SELECT dispatched, skipped, failed, held FROM cronbox.dispatch(100)").fetchone()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_dispatch_leaves_a_job_alone_while_any_writer_of_it_is_in_flight(fresh_dsn, writer):
    with db.connect(fresh_dsn) as setup:
        setup.execute("SELECT cronbox.schedule('up', every => '1 hour')")
        setup.execute("SELECT cronbox.schedule('w', every => '1 hour', overlap => 'allow')")
        if writer == "complete_run":  # an unfinished run to report on
            setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, "
                          "now() - interval '1 minute', now() - interval '1 minute' FROM cronbox.job WHERE name = 'w'")
            assert counts(setup)[0] == 1
        if writer == "resume":
            setup.execute("SELECT cronbox.pause('w')")
        if writer == "remove_dependency":  # a gate 'up' satisfies (a success of it), to remove
            setup.execute("SELECT cronbox.add_dependency('w', 'up')")
            setup.execute("UPDATE cronbox.job_stat SET last_success_at = now() "
                          "WHERE job_id = (SELECT job_id FROM cronbox.job WHERE name = 'up')")
        if writer == "resume_paused":  # a pause whose until has passed
            setup.execute("SELECT cronbox.pause('w', until => now() + interval '1 hour')")
            setup.execute("UPDATE cronbox.job SET paused_until = now() - interval '1 second' WHERE name = 'w'")
        if writer in ("backfill", "backfill_pass"):  # fire times in the past to backfill
            setup.execute("SELECT cronbox.schedule('w', every => '1 hour', overlap => 'allow', "
                          "starts_at => now() - interval '1 day')")
        if writer == "backfill_pass":
            setup.execute("SELECT cronbox.backfill('w', now() - interval '3 hours', now() - interval '1 hour')")
        if writer == "create_calendar":  # 'w' honours a calendar whose contents then change
            setup.execute("SELECT cronbox.create_calendar('cal', dates => '{2031-01-01}')")
            setup.execute("SELECT cronbox.schedule('w', every => '1 hour', overlap => 'allow', exclude => 'cal')")
        if writer == "redrive":  # a run of 'w' that could not be delivered
            setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, "
                          "now() - interval '1 minute', now() - interval '1 minute' FROM cronbox.job WHERE name = 'w'")
            assert counts(setup)[0] == 1
            setup.execute("SELECT cronbox.nack_outbox('r', array_agg(c.outbox_id), array_agg('HTTP 400'::text), "
                          "array_agg(false)) FROM cronbox.claim_outbox('r', 100) c")
        # a fire of 'w' due now (a manual one, so pause and schedule updates leave it in place)
        setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) SELECT job_id, bucket, "
                      "now() - interval '1 second', now() - interval '1 second', 'manual' "
                      "FROM cronbox.job WHERE name = 'w'")
    with db.connect(fresh_dsn, autocommit=False) as writing, db.connect(fresh_dsn) as poller:
        writing.execute(WRITERS[writer])  # holds the job's lock, not committed
        # busy: nothing is decided for the job (not even a hold), its fire stays due
        assert counts(poller) == (0, 0, 0, 0)
        assert poller.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (bucket, job_id) "
                              "WHERE j.name = 'w' AND f.origin = 'manual' AND f.hold IS NULL").fetchone()[0] == 1
        writing.rollback()
        # the lock went with the transaction: the fire is decided now (dispatched, or held: paused)
        assert sum(counts(poller)) == 1


def test_futures_of_jobs_locked_elsewhere_do_not_fill_the_batch_ahead_of_a_free_jobs_fire(fresh_dsn):
    """A bulk pause or resume (or a saturation pass) holds thousands of jobs' locks while their
    fires are due first: dispatch passes over them without counting them against its limit, so
    another queue's fire due after them goes out in the same call."""
    with db.connect(fresh_dsn) as setup:
        setup.execute("SELECT cronbox.schedule('bulk-' || i, every => '1 hour', queue => 'bulk', overlap => 'allow') "
                      "FROM generate_series(1, 30) i")
        setup.execute("SELECT cronbox.schedule('canary', every => '1 hour', queue => 'canary', overlap => 'allow')")
        # every bulk job has a fire due before the canary's (same priority: the walk meets them first)
        setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) SELECT job_id, bucket, "
                      "now() - interval '2 seconds', now() - interval '2 seconds', 'manual' "
                      "FROM cronbox.job WHERE queue = 'bulk'")
        setup.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, origin) SELECT job_id, "
                      "now() - interval '1 second', now() - interval '1 second', 'manual' "
                      "FROM cronbox.job WHERE name = 'canary'")
    with db.connect(fresh_dsn, autocommit=False) as bulk, db.connect(fresh_dsn) as poller:
        assert bulk.execute("SELECT cronbox.pause_schedules(queue => 'bulk')").fetchone()[0] == 30  # open
        assert poller.execute("SELECT dispatched, skipped, failed, held FROM cronbox.dispatch(10)").fetchone() == (1, 0, 0, 0)
        assert poller.execute("SELECT job FROM cronbox.runs").fetchall() == [("canary",)]
        bulk.rollback()
        # the locks went with the transaction: the bulk fires are decided now, ten at a time
        assert poller.execute("SELECT dispatched FROM cronbox.dispatch(10)").fetchone()[0] == 10


def test_a_report_waits_for_a_dispatch_deciding_on_its_job(fresh_dsn):
    """The other direction: the finishing functions wait for the job's lock (no SKIP), so a
    run's end is never counted while a dispatch is deciding with the old count."""
    with db.connect(fresh_dsn) as setup:
        setup.execute("SELECT cronbox.schedule('w', every => '1 hour', overlap => 'skip')")
        setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, "
                      "now() - interval '1 minute', now() - interval '1 minute' FROM cronbox.job WHERE name = 'w'")
        assert counts(setup)[0] == 1
        run_id = setup.execute("SELECT run_id FROM cronbox.runs WHERE job = 'w'").fetchone()[0]
    with db.connect(fresh_dsn, autocommit=False) as poller, db.connect(fresh_dsn) as worker, \
            db.connect(fresh_dsn) as watch:
        poller.execute("SELECT cronbox.lock_job_id(job_id, bucket) FROM cronbox.job WHERE name = 'w'")  # as dispatch holds it
        pid = worker.execute("SELECT pg_backend_pid()").fetchone()[0]
        worker.execute("SELECT set_config('statement_timeout', '20s', false)")
        done: list[str] = []
        t = threading.Thread(target=lambda: done.append(
            worker.execute("SELECT cronbox.complete_run(%s)", (run_id,)).fetchone()[0]))
        t.start()
        wait_until(lambda: watch.execute(
            "SELECT wait_event_type = 'Lock' AND wait_event IN ('transactionid', 'tuple') "
            "FROM pg_stat_activity WHERE pid = %s",
            (pid,)).fetchone()[0], timeout=20, what="the report waiting for the job's lock")
        assert done == []
        poller.commit()
        t.join(20)
        assert done == ["succeeded"]


def test_dispatch_and_the_reports_write_nothing_to_the_job_table(fresh_dsn):
    """Why the job row's lock went: FOR NO KEY UPDATE on the job row wrote a WAL
    record per run and a full-page image per job page after each checkpoint. Dispatch, claim,
    ack with the answer, ack then complete_runs, claim_runs: none writes a heap record for
    cronbox.job. The job's lock is now on its job_stat row: its lock records go to job_stat,
    whose row (and page) these functions update anyway."""
    with db.connect(fresh_dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public")
        conn.execute("INSERT INTO cronbox.job (name, kind, at, finished_at, overlap, queue) "
                     "SELECT 'wal-' || i, 'at', now(), now(), 'allow', "
                     "       CASE WHEN i % 3 = 0 THEN 'pull' ELSE 'default' END "
                     "FROM generate_series(1, 60) AS i")
        conn.execute(ADD_JOB_ROWS)
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, at, now() - interval '1 second' FROM cronbox.job WHERE name LIKE 'wal-%'")
        start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        assert counts(conn)[0] == 60
        rows = conn.execute("SELECT outbox_id, run_id FROM cronbox.claim_outbox('r', 100, p_exclude => ARRAY['pull'])"
                            ).fetchall()
        assert len(rows) == 40
        answered = [o for o, _ in rows[:20]]
        conn.execute("SELECT cronbox.ack_outbox('r', %s, %s)", (
            answered, db.Jsonb([{"outbox_id": o, "state": "succeeded"} for o in answered])))
        conn.execute("SELECT cronbox.ack_outbox('r', %s)", ([o for o, _ in rows[20:]],))
        conn.execute("SELECT count(*) FROM cronbox.complete_runs(%s::bigint[])", ([r for _, r in rows[20:]],))
        pulled = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.claim_runs('pull', 'w1', 100)")]
        assert len(pulled) == 20
        conn.execute("SELECT count(*) FROM cronbox.complete_runs(%s::bigint[])", (pulled,))
        assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'succeeded'").fetchone()[0] == 60
        end = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        wait_until(lambda: conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (end,)).fetchone()[0],
                   timeout=20, what="the WAL flushed")
        job_file, stat_file = conn.execute(
            "SELECT pg_relation_filenode('cronbox.job'), pg_relation_filenode('cronbox.job_stat')").fetchone()
        touched = dict(conn.execute(
            "SELECT m[1]::oid, count(*) FROM public.pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) w, "
            "LATERAL regexp_matches(w.block_ref, 'rel \\d+/\\d+/(\\d+)', 'g') m "
            "WHERE w.resource_manager = 'Heap' GROUP BY 1", (start, end)).fetchall())
    assert touched.get(stat_file, 0) > 0  # the statistics row is written (the check sees relations)
    assert touched.get(job_file, 0) == 0


def test_early_skip_runs_write_nothing_to_the_job_table(fresh_dsn):
    """Early dispatch of 'skip' jobs' fires marks each job's statistics row (early_due_at and the
    statistics before the run) in the same update as its statistics: a second update of a
    job_stat row in one transaction has its foreign key to cronbox.job checked again, a
    FOR KEY SHARE lock written on the job row (a heap record and a dirtied job page per run)."""
    with db.connect(fresh_dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public")
        conn.execute("INSERT INTO cronbox.job (name, kind, cron, cron_normalized, overlap) "
                     "SELECT 'early-' || i, 'cron', '* * * * *', cronbox.normalize_cron('* * * * *'), 'skip' "
                     "FROM generate_series(1, 40) AS i")
        conn.execute(ADD_JOB_ROWS)
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, now() + interval '5 seconds', now() + interval '5 seconds' "
                     "FROM cronbox.job WHERE name LIKE 'early-%'")
        start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        assert conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(100, '9 seconds')").fetchone()[0] == 40
        end = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        wait_until(lambda: conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (end,)).fetchone()[0],
                   timeout=20, what="the WAL flushed")
        assert conn.execute("SELECT count(*) FROM cronbox.job_stat WHERE early_due_at IS NOT NULL").fetchone()[0] == 40
        job_file, stat_file = conn.execute(
            "SELECT pg_relation_filenode('cronbox.job'), pg_relation_filenode('cronbox.job_stat')").fetchone()
        touched = dict(conn.execute(
            "SELECT m[1]::oid, count(*) FROM public.pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) w, "
            "LATERAL regexp_matches(w.block_ref, 'rel \\d+/\\d+/(\\d+)', 'g') m "
            "WHERE w.resource_manager = 'Heap' GROUP BY 1", (start, end)).fetchall())
    assert touched.get(stat_file, 0) > 0
    assert touched.get(job_file, 0) == 0

def own_locks(conn: psycopg.Connection) -> tuple[int, int]:
    """(advisory, all) entries this backend holds in the server's lock table right now."""
    return conn.execute("SELECT count(*) FILTER (WHERE locktype = 'advisory'), count(*) FROM pg_locks "
                        "WHERE pid = pg_backend_pid()").fetchone()


@pytest.mark.slow
def test_a_batch_of_20000_distinct_jobs_takes_no_lock_table_entry_per_job(fresh_dsn):
    """Why the advisory lock went: it took one entry of the server's shared lock
    table per job until commit (max_locks_per_transaction x max_connections entries for the
    whole server, 6,400 by default), so big batches of distinct jobs could fill it and fail
    every session of the database with 'out of shared memory'. Row locks on job_stat live in the
    rows: dispatching 20,000 jobs in one transaction, then finishing them all in another,
    holds a few relation locks, not thousands of entries."""
    n = 20000
    with db.connect(fresh_dsn) as conn:
        conn.execute("INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) "
                     "SELECT 'many-' || i, 'at', now(), now(), 'allow' FROM generate_series(1, %s) AS i",
                     (n,))
        conn.execute(ADD_JOB_ROWS)
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                     "SELECT job_id, bucket, at, now() - interval '1 second' FROM cronbox.job WHERE name LIKE 'many-%'")
    with db.connect(fresh_dsn, autocommit=False) as conn:
        assert conn.execute("SELECT sum(dispatched) FROM cronbox.dispatch(%s)", (n,)).fetchone()[0] == n
        advisory, held = own_locks(conn)  # before commit: the jobs' locks are still held
        assert advisory == 0 and held < 500, (advisory, held)
        conn.commit()
        runs = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.runs WHERE job LIKE 'many-%'")]
        assert len(runs) == n
        conn.commit()
        finished = 0
        for half in (runs[: n // 2], runs[n // 2:]):  # complete_runs takes at most 10,000 ids a call
            finished += conn.execute("SELECT count(*) FILTER (WHERE verdict = 'finished') "
                                     "FROM cronbox.complete_runs(%s::bigint[])", (half,)).fetchone()[0]
        assert finished == n
        advisory, held = own_locks(conn)
        assert advisory == 0 and held < 500, (advisory, held)
        conn.commit()


def test_job_rows_fill_their_pages_leaving_room_for_a_rare_update(fresh_dsn):
    """No job row is written per run (above), so cronbox.job keeps only a tenth of each page
    free (fillfactor 90, migration 0473; 60 before, from when the job row held its statistics):
    a default cron job's row, ~335 bytes, 21 a page, so that a batch's jobs, one page each,
    take a third less memory. The room left keeps an occasional update of a row heap-only."""
    with db.connect(fresh_dsn) as conn:
        conn.execute("INSERT INTO cronbox.job (name, kind, cron, cron_normalized) "
                     "SELECT 'pack-' || i, 'cron', '* * * * *', cronbox.normalize_cron('* * * * *') "
                     "FROM generate_series(1, 2100) AS i")
        conn.execute("VACUUM cronbox.job")
        pages = conn.execute("SELECT pg_relation_size('cronbox.job') / current_setting('block_size')::int"
                             ).fetchone()[0]
        assert pages <= 2100 // 20 + 1, pages  # 150 at fillfactor 60
        before = conn.execute("SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'cronbox.job'::regclass"
                              ).fetchone()[0]
        conn.execute("UPDATE cronbox.job SET anchor = now() WHERE name = 'pack-7'")  # a fixed delay's next anchor
        wait_until(lambda: conn.execute(
            "SELECT pg_stat_force_next_flush(), n_tup_hot_upd > %s FROM pg_stat_user_tables "
            "WHERE relid = 'cronbox.job'::regclass", (before,)).fetchone()[1] is True, 10, what="a HOT update counted")
