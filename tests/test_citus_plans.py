"""The hot statements' plans on a distributed table group (docs/citus.md, "Every hot statement a
single-shard query"): on a clone migrated with `cronbox migrate --citus`, the table a family of
hot statements reads is distributed by `bucket` into the buckets' colocation group the way the
Citus layer will distribute it (keys with the bucket first, policies without subqueries), and
the product's own functions are run against it with Citus told to refuse any statement that is
not a single task (`citus.multi_task_query_log_level = error`), then registered for function
call delegation on their bucket argument, whose plan must be one task on the node holding the
bucket. Marker `citus`; each test's clone is its own (the rest of its schema does not work on a
half-distributed database, which is why `--citus` does not distribute these tables yet)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from cronbox import db

from .conftest import CitusServer, Server

pytestmark = pytest.mark.citus

# The outbox, as the Citus layer will distribute it: its key with the bucket first, its row
# security without subqueries (Citus refuses a policy with one on a distributed table; the
# owner's check by a function call, as docs/citus.md plans), colocated with the buckets; the
# claim planned with its bucket bound (Citus cannot route a generic plan of a statement this
# shape: `could not create distributed plan`, parameters unresolved).
DISTRIBUTE_OUTBOX = """
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE cronbox.outbox DROP CONSTRAINT outbox_pkey;
ALTER TABLE cronbox.outbox ADD CONSTRAINT outbox_pkey PRIMARY KEY (bucket, outbox_id);
DROP POLICY outbox_read ON cronbox.outbox;
DROP POLICY outbox_update ON cronbox.outbox;
DROP POLICY outbox_delete ON cronbox.outbox;
CREATE POLICY outbox_read ON cronbox.outbox FOR SELECT USING (cronbox.caller_reads_all());
CREATE POLICY outbox_update ON cronbox.outbox FOR UPDATE USING (cronbox.caller_writes_all());
CREATE POLICY outbox_delete ON cronbox.outbox FOR DELETE USING (cronbox.caller_writes_all());
SELECT pg_catalog.create_distributed_table('cronbox.outbox', 'bucket', colocate_with => 'cronbox.bucket_shard');
ALTER FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, integer, boolean, timestamptz)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.ack_outbox_at(text, bigint[], jsonb, integer, timestamptz)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamptz)
    SET plan_cache_mode = force_custom_plan;
"""

# The relay's functions, each registered for delegation on its bucket argument (the layer will).
RELAY_FUNCTIONS = (
    "cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean)",
    "cronbox.ack_outbox(text, bigint[], jsonb, integer)",
    "cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer)",
    "cronbox.release_outbox(text, bigint[], interval, integer)",
)


@pytest.fixture
def citus_clone(pg: Server, fresh_dsn: str) -> str:
    if not isinstance(pg, CitusServer):
        pytest.skip("needs the Citus session (pytest -m citus, or CRONBOX_TEST_CITUS=1)")
    return fresh_dsn


def explain(conn: psycopg.Connection, statement: str, args: tuple = ()) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + statement, args))


def distribute_outbox(conn: psycopg.Connection) -> list[int]:
    """Distributes the clone's outbox by bucket (DISTRIBUTE_OUTBOX); returns the buckets in order."""
    conn.execute(DISTRIBUTE_OUTBOX)
    return [r[0] for r in conn.execute("SELECT bucket FROM cronbox.bucket ORDER BY bucket_index")]


def node_port(conn: psycopg.Connection, table: str, bucket: int) -> int:
    return conn.execute("SELECT nodeport FROM pg_catalog.citus_shards WHERE table_name = %s::regclass"
                        " AND shardid = pg_catalog.get_shard_id_for_distribution_column(%s, %s)",
                        (table, table, bucket)).fetchone()[0]


# The finishing calls' and dispatch's inserts in their two forms: as written for one primary
# (an insert reads another step's result, a CTE or a delete's RETURNING) and broadcast-free
# (cronbox.distributed = on, as sql/citus/distributed_plans.sql sets it where the hot tables are
# distributed: Citus sends such a result to every worker node; docs/citus.md, "A worker node
# stopped"). Each is one task per statement.
BROADCAST_FREE = """
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'cronbox'::regnamespace
               AND p.proname IN ('finish_runs', 'dispatch_plain_fires') LOOP
        EXECUTE format('ALTER FUNCTION %s SET cronbox.distributed = on', f);
    END LOOP;
END
$$;
"""
both_forms = pytest.mark.parametrize("form", ["one_statement", "broadcast_free"])


def use_form(conn: psycopg.Connection, form: str) -> None:
    if form == "broadcast_free":
        conn.execute(BROADCAST_FREE)


def test_citus_the_relay_s_claim_is_one_task_per_bucket_and_runs_on_the_bucket_s_node(citus_clone):
    """cronbox.claim_outbox on an outbox distributed by bucket: with a bucket, every statement it
    runs is one task on that bucket's shard and takes only that bucket's rows; without one, it
    visits every bucket, one single-task statement each, and takes the rows of all of them;
    registered for delegation on p_bucket, the whole call is one task on the node holding the
    bucket (its statements run there against the local shard)."""
    with db.connect(citus_clone) as conn:
        buckets = distribute_outbox(conn)
        ports = {node_port(conn, "cronbox.outbox", b) for b in buckets}
        assert len(ports) == 2  # the buckets are spread over both worker nodes
        mine = [buckets[0], buckets[-1]]
        # notifications, one queue each of two, three rows per bucket in the two buckets
        conn.execute("INSERT INTO cronbox.outbox (bucket, queue, kind, message, available_at)"
                     " SELECT b, 'q' || (n %% 2), 'notification', jsonb_build_object('n', n), now() - interval '1 minute'"
                     " FROM unnest(%s::integer[]) b, generate_series(1, 3) n", (mine,))
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        claim = "SELECT bucket, message->>'n' FROM cronbox.claim_outbox('r1', 10, p_bucket => %s)"
        got = conn.execute(claim, (mine[0],)).fetchall()
        assert sorted(got) == [(mine[0], "1"), (mine[0], "2"), (mine[0], "3")]
        assert conn.execute(claim, (mine[0],)).fetchall() == []  # leased: nothing left there
        assert conn.execute(claim, (buckets[1],)).fetchall() == []  # a bucket with no rows
        # every bucket in turn (the relay today): the other bucket's rows, within the limit
        got = conn.execute("SELECT bucket FROM cronbox.claim_outbox('r2', 2)").fetchall()
        assert got == [(mine[1],), (mine[1],)]
        got = conn.execute("SELECT bucket FROM cronbox.claim_outbox('r2', 10)").fetchall()
        assert got == [(mine[1],)]
        conn.execute("RESET citus.multi_task_query_log_level")

        conn.execute("SELECT pg_catalog.create_distributed_function("
                     "'cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean)',"
                     " 'p_bucket', colocate_with => 'cronbox.outbox')")
        plan = explain(conn, "SELECT * FROM cronbox.claim_outbox('r3', 10, p_bucket => %s)", (mine[0],))
        port = node_port(conn, "cronbox.outbox", mine[0])
        assert "Task Count: 1" in plan and f"port={port}" in plan and "claim_outbox" in plan, plan
        # delegated: the rows come back from the bucket's node (lease of r1 still live: none)
        conn.execute("UPDATE cronbox.outbox SET lease_until = NULL WHERE bucket = %s", (mine[0],))
        got = conn.execute("SELECT * FROM cronbox.claim_outbox('r3', 10, p_bucket => %s)", (mine[0],)).fetchall()
        assert len(got) == 3 and {g[7] for g in got} == {mine[0]}, got  # its bucket
        assert conn.execute("SELECT array_agg(DISTINCT lease_owner) FROM cronbox.outbox WHERE bucket = %s",
                            (mine[0],)).fetchone()[0] == ["r3"]


def test_citus_the_relay_s_look_ahead_and_its_wake_up_stop_at_flagged_rows_one_task_per_bucket(citus_clone):
    """The relay's look ahead on an outbox distributed by bucket, with rows flagged claim_at_due
    (early 'skip' runs, claimable only from their due time): claim_outbox with p_ahead and
    cronbox.next_claim_at_due, with a bucket, run single-task statements on that bucket's shard
    (the queue's first flagged row by a probe of outbox_flagged_idx there) and answer for that
    bucket alone; without one, a statement per bucket, the earliest of them."""
    with db.connect(citus_clone) as conn:
        buckets = distribute_outbox(conn)
        first, last = buckets[0], buckets[-1]
        # per bucket: an unflagged row due in 20 s, a flagged one at 30 s (first) or 60 s (last),
        # and an unflagged row after it
        conn.execute("INSERT INTO cronbox.outbox (bucket, queue, kind, message, available_at, claim_at_due)"
                     " SELECT b.b, 'q', 'notification', jsonb_build_object('n', r.n), now() + r.due, r.flag"
                     " FROM (VALUES (%s, 30), (%s, 60)) b(b, at),"
                     " LATERAL (VALUES (1, interval '20 seconds', false), (2, b.at * interval '1 second', true),"
                     "                 (3, b.at * interval '1 second' + interval '5 seconds', false)) r(n, due, flag)",
                     (first, last))
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        wait = "SELECT extract(epoch FROM cronbox.next_claim_at_due('10 minutes', %s))"
        assert 25 < conn.execute(wait, (first,)).fetchone()[0] <= 30
        assert 55 < conn.execute(wait, (last,)).fetchone()[0] <= 60
        assert conn.execute(wait, (buckets[1],)).fetchone()[0] is None  # a bucket with no rows
        assert 25 < conn.execute(wait, (None,)).fetchone()[0] <= 30  # every bucket: the earliest
        # looking ahead 10 minutes: the row due before the flagged one, not the flagged one or after it
        claim = "SELECT bucket, message->>'n' FROM cronbox.claim_outbox('r1', 10, p_ahead => '10 minutes', p_bucket => %s)"
        assert conn.execute(claim, (first,)).fetchall() == [(first, "1")]
        got = conn.execute("SELECT bucket, message->>'n' FROM cronbox.claim_outbox('r2', 10, p_ahead => '10 minutes')")
        assert got.fetchall() == [(last, "1")]


def test_citus_the_relay_s_ack_nack_and_release_are_one_task_on_the_bucket_s_node(citus_clone):
    """cronbox.ack_outbox, nack_outbox and release_outbox with the rows' bucket, on an outbox
    distributed by bucket: every statement they run is one task on that bucket's shard (a run
    acked delivered with its run lease, a notification acked away, a send retried with its
    backoff, a notification given up into the dead letters, leases handed back), an id of another
    bucket is left alone; registered for delegation on p_bucket, each call is one task on the
    node holding the bucket and its writes are made there."""
    with db.connect(citus_clone) as conn:
        buckets = distribute_outbox(conn)
        mine, other = buckets[0], buckets[-1]
        conn.execute("INSERT INTO cronbox.outbox (bucket, queue, kind, run_id, state, job_name, fire_at, attempt,"
                     " timeout, available_at, dispatched_at)"
                     " SELECT b, 'q', 'run', n, 'dispatched', 'j', now(), 1, '1 minute', now() - interval '1 minute', now()"
                     " FROM unnest(%s::integer[]) b, generate_series(1, 2) n", ([mine, other],))
        conn.execute("INSERT INTO cronbox.outbox (bucket, queue, kind, message, available_at)"
                     " SELECT b, 'q', 'notification', jsonb_build_object('n', n), now() - interval '1 minute'"
                     " FROM unnest(%s::integer[]) b, generate_series(1, 4) n", ([mine, other],))

        def claim(owner: str, bucket: int) -> tuple[list[int], list[int]]:
            rows = conn.execute("SELECT outbox_id, kind FROM cronbox.claim_outbox(%s, 10, p_bucket => %s)"
                                " ORDER BY outbox_id", (owner, bucket)).fetchall()
            return [r[0] for r in rows if r[1] == "run"], [r[0] for r in rows if r[1] != "run"]

        def rows_of(bucket: int) -> dict[int, tuple]:
            return {r[0]: r[1:] for r in conn.execute(
                "SELECT outbox_id, state, run_lease_until IS NOT NULL, lease_owner FROM cronbox.outbox"
                " WHERE bucket = %s", (bucket,))}

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        runs, notes = claim("r1", mine)
        other_runs, other_notes = claim("r1", other)
        assert len(runs) == 2 and len(notes) == 4 and len(other_runs) == 2
        # ack: a run delivered in place with its lease, a notification gone; the other bucket's id untouched
        assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, p_bucket => %s)",
                            ([runs[0], notes[0], other_runs[0]], mine)).fetchone()[0] == 2
        got = rows_of(mine)
        assert got[runs[0]] == ("delivered", True, None) and notes[0] not in got
        assert rows_of(other)[other_runs[0]] == ("dispatched", False, "r1")
        # nack: one retried (lease off, later), one given up (a notification: into the dead letters)
        retried, dead, dead_ids = conn.execute(
            "SELECT * FROM cronbox.nack_outbox('r1', %s, %s, p_retryable => %s, p_bucket => %s)",
            ([notes[1], notes[2]], ["busy", "gone"], [True, False], mine)).fetchone()
        assert (retried, dead, dead_ids) == (1, 1, [notes[2]])
        got = rows_of(mine)
        assert got[notes[1]][2] is None and notes[2] not in got
        assert conn.execute("SELECT last_error FROM cronbox.dead_letter WHERE outbox_id = %s",
                            (notes[2],)).fetchone()[0] == "gone"
        # release: by id, then the rest of the bucket; the other bucket keeps its leases
        assert conn.execute("SELECT cronbox.release_outbox('r1', %s, p_bucket => %s)",
                            ([runs[1]], mine)).fetchone()[0] == 1
        assert conn.execute("SELECT cronbox.release_outbox('r1', p_bucket => %s)", (mine,)).fetchone()[0] == 1
        assert all(r[2] is None for r in rows_of(mine).values())
        assert all(r[2] == "r1" for r in rows_of(other).values())
        conn.execute("RESET citus.multi_task_query_log_level")

        for function in RELAY_FUNCTIONS:
            conn.execute("SELECT pg_catalog.create_distributed_function(%s, 'p_bucket', colocate_with => 'cronbox.outbox')",
                         (function,))
        port = node_port(conn, "cronbox.outbox", other)
        # the call itself is the one task (a call run on the coordinator has no Citus scan)
        for call in ("SELECT cronbox.ack_outbox('r1', %s, p_bucket => %s)",
                     "SELECT * FROM cronbox.nack_outbox('r1', %s, '{busy}', p_bucket => %s)",
                     "SELECT cronbox.release_outbox('r1', %s, p_bucket => %s)"):
            plan = explain(conn, call, ([other_runs[1]], other))
            assert "Citus Adaptive" in plan and "Task Count: 1" in plan and f"port={port}" in plan, plan
        # delegated: the writes are made on the bucket's node
        assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, p_bucket => %s)",
                            ([other_runs[0]], other)).fetchone()[0] == 1
        assert conn.execute("SELECT * FROM cronbox.nack_outbox('r1', %s, '{busy}', p_bucket => %s)",
                            ([other_notes[0]], other)).fetchone()[:2] == (1, 0)
        assert conn.execute("SELECT cronbox.release_outbox('r1', p_bucket => %s)", (other,)).fetchone()[0] == 4
        got = rows_of(other)
        assert got[other_runs[0]] == ("delivered", True, None)
        assert all(r[2] is None for r in got.values())


def test_citus_the_pull_claim_takes_a_queue_s_runs_bucket_by_bucket_one_task_each(citus_clone):
    """cronbox.claim_runs (a pull worker asks for a queue, not a bucket) on an outbox distributed
    by bucket: it visits the buckets in turn, every statement one task on one bucket's shard,
    until it has n runs; the runs of every bucket are taken, each once, running on the worker
    under the run's lease."""
    with db.connect(citus_clone) as conn:
        buckets = distribute_outbox(conn)
        mine = [buckets[0], buckets[len(buckets) // 2], buckets[-1]]
        conn.execute("INSERT INTO cronbox.outbox (bucket, queue, kind, run_id, state, job_name, fire_at, attempt,"
                     " timeout, available_at, dispatched_at)"
                     " SELECT b, 'pq', 'run', n, 'dispatched', 'j', now(), 1, '1 minute', now() - interval '1 minute', now()"
                     " FROM unnest(%s::integer[]) b, generate_series(1, 2) n", (mine,))
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        claim = "SELECT run_id, job, deadline - now() FROM cronbox.claim_runs_at('pq', 'w1', %s)"
        first = conn.execute(claim, (4,)).fetchall()
        rest = conn.execute(claim, (4,)).fetchall()
        assert len(first) == 4 and len(rest) == 2 and conn.execute(claim, (4,)).fetchall() == []
        assert {r[1] for r in first + rest} == {"j"} and {r[2].total_seconds() for r in first + rest} == {60.0}
        conn.execute("RESET citus.multi_task_query_log_level")
        got = conn.execute("SELECT bucket, count(*) FILTER (WHERE state = 'running' AND worker = 'w1'"
                           " AND run_lease_until IS NOT NULL) FROM cronbox.outbox GROUP BY bucket").fetchall()
        assert sorted(got) == sorted((b, 2) for b in mine)
        assert len({r[0] for r in first + rest}) == 6


# The jobs, their futures, statistics and saturation state, as the Citus layer will distribute them: keys with
# the bucket first, no foreign key between them and the coordinator's local tables (Citus
# refuses one from a distributed table to a local one), row security by function calls without
# subqueries (the test runs as a superuser: it does not look at policies), colocated with the
# buckets; the dependencies and queue limits early dispatch reads and the after-job edges the
# finishing calls read as reference tables; the
# walks planned with their bucket bound (as the claim above).
DISTRIBUTE_JOBS = """
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
DO $$
DECLARE
    c record;
    v_tables regclass[] := ARRAY['cronbox.job', 'cronbox.job_future', 'cronbox.job_stat', 'cronbox.job_fire',
                                 'cronbox.job_dependency', 'cronbox.queue_limit']::regclass[];
BEGIN
    FOR c IN SELECT conrelid::regclass AS t, conname FROM pg_catalog.pg_constraint
             WHERE contype = 'f' AND (conrelid = ANY (v_tables) OR confrelid = ANY (v_tables)) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.t, c.conname);
    END LOOP;
    FOR c IN SELECT conrelid::regclass AS t, conname FROM pg_catalog.pg_constraint
             WHERE contype IN ('p', 'u') AND conrelid = ANY (v_tables[1:4]) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.t, c.conname);
    END LOOP;
    FOR c IN SELECT polrelid::regclass AS t, polname FROM pg_catalog.pg_policy WHERE polrelid = ANY (v_tables) LOOP
        EXECUTE format('DROP POLICY %I ON %s', c.polname, c.t);
    END LOOP;
    FOR i IN 1 .. cardinality(v_tables) LOOP
        EXECUTE format('CREATE POLICY everyone ON %s USING (cronbox.caller_reads_all()) WITH CHECK (true)', v_tables[i]);
    END LOOP;
END
$$;
ALTER TABLE cronbox.job ADD PRIMARY KEY (bucket, job_id);
ALTER TABLE cronbox.job ADD UNIQUE (bucket, name);
ALTER TABLE cronbox.job_future ADD PRIMARY KEY (bucket, future_id);
ALTER TABLE cronbox.job_future ADD CONSTRAINT job_future_fire_unique UNIQUE (bucket, job_id, fire_at, attempt, origin);
ALTER TABLE cronbox.job_stat ADD PRIMARY KEY (bucket, job_id);
ALTER TABLE cronbox.job_fire ADD PRIMARY KEY (bucket, job_id);
SELECT pg_catalog.create_distributed_table('cronbox.job', 'bucket', colocate_with => 'cronbox.bucket_shard');
SELECT pg_catalog.create_distributed_table('cronbox.job_future', 'bucket', colocate_with => 'cronbox.bucket_shard');
SELECT pg_catalog.create_distributed_table('cronbox.job_stat', 'bucket', colocate_with => 'cronbox.bucket_shard');
SELECT pg_catalog.create_distributed_table('cronbox.job_fire', 'bucket', colocate_with => 'cronbox.bucket_shard');
SELECT pg_catalog.create_reference_table('cronbox.job_dependency');
SELECT pg_catalog.create_reference_table('cronbox.queue_limit');
SELECT pg_catalog.create_reference_table('cronbox.job_after_edge');
ALTER FUNCTION cronbox.dispatch_at(integer, bigint[], interval, integer, timestamptz)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.dispatch_ahead_at(integer, interval, integer, timestamptz, bigint, timestamptz)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.ready_lanes(integer[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamptz, integer[], bigint[])
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamptz, integer[], bigint[])
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.dispatch_plain_fires(cronbox.dispatch_fire[], timestamptz, integer[], bigint[])
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.record_finished(bigint[], integer[]) SET plan_cache_mode = force_custom_plan;
"""


def test_citus_dispatch_and_early_dispatch_walk_due_futures_bucket_by_bucket_one_task_each(citus_clone):
    """cronbox.dispatch and cronbox.dispatch_ahead on job futures and job statistics distributed
    by bucket, every job locked elsewhere (a report or a saturation pass holds it): with a
    bucket, every statement of their walk (the lanes with due work, the futures walked with
    their jobs' locks, the next due time) is one task (a statement over several shards fails)
    and reads only that bucket; without one, they visit the buckets in turn within the batch.
    The fires are passed over, not lost: early dispatch reports them busy, the futures stay
    ready, and the next due time is the bucket's own (or the earliest of all)."""
    with db.connect(citus_clone) as conn, db.connect(citus_clone) as other:
        # jobs in three buckets, each with a fire due and one due within the next ten minutes
        names: dict[int, list[str]] = {}
        for n in range(500):
            name = f"job{n}"
            bucket = conn.execute("SELECT cronbox.bucket_of(%s)", (name,)).fetchone()[0]
            if len(names) < 3 or bucket in names:
                names.setdefault(bucket, []).append(name)
            if len(names) == 3 and all(len(v) >= 2 for v in names.values()):
                break
        buckets = sorted(names)
        for i, bucket in enumerate(buckets):
            for name in names[bucket][:2]:
                conn.execute("SELECT cronbox.schedule(%s, '0 0 1 1 *', overlap => 'allow')", (name,))
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, t, t, j.priority, 'schedule', j.bucket, j.queue FROM cronbox.job j,"
                     " unnest(ARRAY[now() - interval '1 minute' - j.job_id * interval '1 second',"
                     "              now() + interval '5 minutes']) t")
        conn.execute(DISTRIBUTE_JOBS)
        due = dict(conn.execute("SELECT bucket, min(due_at) FROM cronbox.job_future GROUP BY bucket").fetchall())
        assert sorted(due) == buckets
        other.execute("BEGIN")
        for bucket in buckets:  # one bucket per statement (as every lock on a distributed table)
            other.execute("SELECT job_id FROM cronbox.job_stat WHERE bucket = %s FOR NO KEY UPDATE", (bucket,))
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails

        dispatch = "SELECT dispatched, skipped, failed, held, next_due FROM cronbox.dispatch(100, p_bucket => %s)"
        for bucket in buckets:
            assert conn.execute(dispatch, (bucket,)).fetchone() == (0, 0, 0, 0, due[bucket])
        assert conn.execute("SELECT dispatched, next_due FROM cronbox.dispatch(100)").fetchone() == (0, min(due.values()))
        ahead = "SELECT dispatched, busy FROM cronbox.dispatch_ahead(%s, '10 minutes', p_bucket => %s)"
        assert conn.execute(ahead, (100, buckets[1])).fetchone() == (0, 2)
        assert conn.execute(ahead, (1, buckets[1])).fetchone() == (0, 1)
        # every bucket in turn, within the batch
        assert conn.execute("SELECT dispatched, busy FROM cronbox.dispatch_ahead(3, '10 minutes')").fetchone() == (0, 3)
        assert conn.execute("SELECT dispatched, busy FROM cronbox.dispatch_ahead(100, '10 minutes')").fetchone() == (0, 6)
        # resumed (the whole lead walked before): the futures written since, by key, bucket by bucket
        assert conn.execute("SELECT dispatched, busy, walked_to FROM cronbox.dispatch_ahead(100, '10 minutes', "
                            "p_walked_to => now() + interval '10 minutes', p_walked_id => 0)").fetchone() == (0, 6, None)
        conn.execute("RESET citus.multi_task_query_log_level")
        assert conn.execute("SELECT count(*), count(*) FILTER (WHERE hold IS NULL) FROM cronbox.job_future").fetchone() == (12, 12)
        other.execute("ROLLBACK")


@both_forms
def test_citus_dispatch_decides_and_writes_a_bucket_s_fires_one_task_per_statement(citus_clone, form):
    """cronbox.dispatch's write (cronbox.dispatch_locked) on jobs, job futures, statistics and
    saturation state distributed by bucket, with the dependencies and queue limits as reference
    tables and runs, outbox and the statistics to fold the coordinator's own: every statement
    of a real dispatch is one task (a statement over several shards fails), bucket by bucket,
    in a walk over all of them, and early dispatch's. The decisions are those of one primary:
    runs dispatched with their outbox rows, an overlap skip written to history, a queue limit
    holding the run over its slots, a fire gated by an upstream in another bucket held until
    that upstream's success (read in its own bucket) and then run, the statistics of a job an
    after-job in another bucket lists written in place while a plain job's are left to the
    fold, and a one-off job's last fire logged finished; every run id is drawn with its bucket's
    index, so that a report by run id finds the bucket in it."""
    with db.connect(citus_clone) as conn:
        by_bucket: dict[int, list[str]] = {}
        for n in range(2000):
            name = f"g{n}/job"
            by_bucket.setdefault(conn.execute("SELECT cronbox.bucket_of(%s)", (name,)).fetchone()[0], []).append(name)
            if len(by_bucket) >= 3 and sum(len(v) >= 3 for v in by_bucket.values()) >= 3:
                break
        a, b, c = [k for k, v in by_bucket.items() if len(v) >= 3][:3]
        plain, skipper, down = by_bucket[a][:3]
        limited1, limited2, listed = by_bucket[b][:3]
        up, after_job, once = by_bucket[c][:3]
        yearly = "'0 0 1 1 *'"
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow')", (plain,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'skip')", (skipper,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow')", (down,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow', queue => 'lq')", (limited1,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow', queue => 'lq')", (limited2,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow')", (listed,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow')", (up,))
        conn.execute("SELECT cronbox.schedule(%s, after => ARRAY[%s])", (after_job, listed))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow')", (once,))
        conn.execute("SELECT cronbox.add_dependency(%s, %s)", (down, up))
        conn.execute("SELECT cronbox.set_queue_limit('lq', 1)")
        conn.execute("UPDATE cronbox.job SET finished_at = now() WHERE name = %s", (once,))
        # one fire due for each job, two for the skipping one (one runs, one is skipped)
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, t, t, j.priority, 'schedule', j.bucket, j.queue"
                     " FROM cronbox.job j CROSS JOIN LATERAL unnest(CASE WHEN j.name = %s"
                     "   THEN ARRAY[now() - interval '2 minutes', now() - interval '1 minute']"
                     "   ELSE ARRAY[now() - interval '1 minute'] END) t"
                     " WHERE j.name <> %s", (skipper, after_job))
        conn.execute("DELETE FROM cronbox.job_future WHERE origin = 'schedule' AND due_at > now()")
        # and one due in five minutes for the plain job: early dispatch's to take
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, now() + interval '5 minutes', now() + interval '5 minutes', j.priority,"
                     " 'schedule', j.bucket, j.queue FROM cronbox.job j WHERE j.name = %s", (plain,))
        conn.execute(DISTRIBUTE_JOBS)
        # the change log's read policy without its subquery on jobs (as the layer will replace it)
        conn.execute("DROP POLICY job_change_read ON cronbox.job_change")
        conn.execute("CREATE POLICY job_change_read ON cronbox.job_change FOR SELECT USING (cronbox.caller_reads_all())")
        use_form(conn, form)
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails

        dispatch = "SELECT dispatched, skipped, failed, held FROM cronbox.dispatch(100, p_bucket => %s)"
        assert conn.execute(dispatch, (a,)).fetchone() == (2, 1, 0, 1)  # plain, skipper; skipped; down held
        assert conn.execute(dispatch, (b,)).fetchone() == (2, 0, 0, 1)  # one of lq, listed; the other lq held
        assert conn.execute("SELECT dispatched, skipped, failed, held FROM cronbox.dispatch(100)").fetchone() == (2, 0, 0, 0)
        # the upstream's success, in its own bucket: the gated fire runs at its next look
        conn.execute("UPDATE cronbox.job_stat SET last_success_at = now() WHERE bucket = %s"
                     " AND job_id = (SELECT job_id FROM cronbox.job WHERE bucket = %s AND name = %s)", (c, c, up))
        conn.execute("UPDATE cronbox.job_future SET hold = NULL, hold_queue = NULL WHERE bucket = %s AND hold = 'dependency'", (a,))
        assert conn.execute(dispatch, (a,)).fetchone() == (1, 0, 0, 0)
        # early dispatch: the same write, for the plain job's fire due within the lead
        assert conn.execute("SELECT dispatched, busy FROM cronbox.dispatch_ahead(100, '10 minutes', p_bucket => %s)",
                            (a,)).fetchone() == (1, 0)
        conn.execute("RESET citus.multi_task_query_log_level")

        runs = dict(conn.execute("SELECT job_name, count(*) FROM cronbox.outbox WHERE kind = 'run' GROUP BY job_name").fetchall())
        assert runs == {plain: 2, skipper: 1, down: 1, listed: 1, up: 1, once: 1, limited1: 1} or \
               runs == {plain: 2, skipper: 1, down: 1, listed: 1, up: 1, once: 1, limited2: 1}, runs
        # each bucket's runs and skips drawn with its index: the id carries the bucket (cronbox.run_bucket)
        carried = conn.execute("SELECT count(*) FILTER (WHERE cronbox.run_bucket(x.id) = x.bucket), count(*) FROM"
                               " (SELECT outbox_id, bucket FROM cronbox.outbox WHERE kind = 'run'"
                               "  UNION ALL SELECT run_id, bucket FROM cronbox.run) x(id, bucket)").fetchone()
        assert carried == (9, 9), carried
        assert conn.execute("SELECT job_name, state FROM cronbox.run").fetchall() == [(skipper, "skipped")]
        held = conn.execute("SELECT j.name, f.hold, f.hold_queue, f.hold_until > now() FROM cronbox.job_future f"
                            " JOIN cronbox.job j ON j.bucket = f.bucket AND j.job_id = f.job_id"
                            " WHERE f.bucket = %s", (b,)).fetchall()
        assert len(held) == 1 and held[0][0] in (limited1, limited2) and held[0][1:] == ("queue_limit", "lq", True), held
        assert conn.execute("SELECT running FROM cronbox.queue_limit WHERE queue = 'lq'").fetchone()[0] == 1
        # statistics: the listed job's (an after-job reads its success) in place, the plain job's to the fold
        stats = dict(conn.execute("SELECT j.name, s.active_runs FROM cronbox.job_stat s JOIN cronbox.job j"
                                  " ON j.bucket = s.bucket AND j.job_id = s.job_id WHERE j.name IN (%s, %s, %s)",
                                  (listed, plain, skipper)).fetchall())
        assert stats == {listed: 1, plain: 0, skipper: 1}, stats
        folded = conn.execute("SELECT array_agg(j.name ORDER BY j.name) FROM cronbox.job_stat_change c"
                              " CROSS JOIN LATERAL unnest(c.job_ids) AS i(job_id) JOIN cronbox.job j ON j.job_id = i.job_id"
                              ).fetchone()[0]
        assert plain in folded and listed not in folded and skipper not in folded, folded
        # the one-off's finish: no row written, read from its state in the change log
        assert conn.execute("SELECT count(*) FROM cronbox.job_change WHERE action = 'finished'").fetchone()[0] == 0
        assert conn.execute("SELECT job FROM cronbox.schedule_changes WHERE action = 'finished'").fetchall() == [(once,)]


# Saturation's functions on the distributed jobs (DISTRIBUTE_JOBS), planned with their bucket
# bound, as dispatch's.
SATURATION_PLANS = """
ALTER FUNCTION cronbox.claim_saturation_at(integer, interval, integer, timestamptz)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.relock_saturation(bigint[], integer) SET plan_cache_mode = force_custom_plan;
"""
STORE_PLANS = """
ALTER FUNCTION cronbox.store_fires_at(bigint[], timestamptz[], boolean[], bigint[], timestamptz[], timestamptz[],
    boolean[], text[], timestamptz[], bigint[], boolean[], integer, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.record_excluded(bigint[], timestamptz[], boolean[], text[], timestamptz, integer[])
    SET plan_cache_mode = force_custom_plan;
"""


def _names_in_buckets(conn: psycopg.Connection, buckets: int, per_bucket: int, pattern: str) -> dict[int, list[str]]:
    """Job names (pattern.format(n)) falling into `buckets` buckets, `per_bucket` names each."""
    found: dict[int, list[str]] = {}
    for n in range(5000):
        name = pattern.format(n)
        b = conn.execute("SELECT cronbox.bucket_of(%s)", (name,)).fetchone()[0]
        if len(found) < buckets or b in found:
            found.setdefault(b, []).append(name)
        if len(found) == buckets and all(len(v) >= per_bucket for v in found.values()):
            break
    return {b: v[:per_bucket] for b, v in found.items()}


def test_citus_saturation_claims_and_relocks_bucket_by_bucket_one_task_each(citus_clone):
    """cronbox.claim_saturation and cronbox.relock_saturation on jobs, statistics and saturation
    state distributed by bucket: with a bucket, every statement (the four walks taking the jobs'
    locks, the rows read under them) is one task and claims only that bucket's jobs, each row
    with its bucket; without one, the claim visits the buckets in turn within its limit; a job
    locked elsewhere is passed over; the relock takes back a bucket's jobs by id, one task per
    statement, and leaves another bucket's ids alone."""
    with db.connect(citus_clone) as conn, db.connect(citus_clone) as other:
        names = _names_in_buckets(conn, 3, 2, "sat{}/job")
        buckets = sorted(names)
        for bucket in buckets:
            for name in names[bucket]:
                conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (name,))
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(SATURATION_PLANS)
        ids = dict(conn.execute("SELECT job_id, bucket FROM cronbox.job").fetchall())
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        claim = ("SELECT job_id, bucket FROM cronbox.claim_saturation_at(%s, '2 minutes', p_bucket => %s,"
                 " p_now => now() + interval '1 second')")
        conn.execute("BEGIN")
        got = conn.execute(claim, (10, buckets[0])).fetchall()
        assert len(got) == 2 and {g[1] for g in got} == {buckets[0]}, got
        # another claimer: the first bucket's jobs are locked (passed over), the others taken
        other.execute("SET citus.multi_task_query_log_level = error")
        other.execute("BEGIN")
        assert other.execute(claim, (10, buckets[0])).fetchall() == []
        claim_all = claim.replace("p_bucket => %s", "p_bucket => NULL")
        rest = other.execute(claim_all, (3,)).fetchall()
        assert len(rest) == 3 and buckets[0] not in {r[1] for r in rest}, rest
        other.execute("ROLLBACK")
        other.execute("BEGIN")
        rest = other.execute(claim_all, (10,)).fetchall()
        assert sorted(r[1] for r in rest) == sorted([buckets[1]] * 2 + [buckets[2]] * 2), rest
        other.execute("ROLLBACK")
        conn.execute("ROLLBACK")
        # the relock: a bucket's jobs by id, another bucket's ids left alone
        relock = "SELECT job_id, bucket FROM cronbox.relock_saturation(%s, %s)"
        conn.execute("BEGIN")
        got = conn.execute(relock, (list(ids), buckets[1])).fetchall()
        assert sorted(got) == sorted((j, b) for j, b in ids.items() if b == buckets[1]), got
        other.execute("BEGIN")
        assert other.execute(relock, (list(ids), buckets[1])).fetchall() == []  # held by conn
        got = other.execute(relock, (list(ids), None)).fetchall()  # every bucket in turn
        assert sorted(got) == sorted((j, b) for j, b in ids.items() if b != buckets[1]), got
        other.execute("ROLLBACK")
        conn.execute("ROLLBACK")


async def test_citus_a_saturation_pass_stores_each_bucket_s_fires_one_task_per_statement(citus_clone):
    """A real saturation pass (poller.saturate) on jobs, statistics, saturation state and futures
    distributed by bucket, the history and change log the coordinator's own, with Citus refusing
    any statement of more than one task: the claim walks bucket by bucket, the store is called
    per bucket and every statement of it is one task (or none, on the coordinator's own tables).
    The decisions are those of one primary: futures in both buckets, a catch-up gap recorded as
    one missed row and counted, fires an exclusion calendar drops recorded skipped with the job's
    open stretch, a job reaching max_runs finished, no job quarantined."""
    from poller.saturate import saturate_pass

    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "s{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        conn.execute("SELECT cronbox.create_calendar('freeze', ranges => ARRAY[daterange(current_date - 1, current_date + 2)])")
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (f"{ga}/every",))
        conn.execute("SELECT cronbox.schedule(%s, '* * * * *', starts_at => now() - interval '1 day', catchup => 'latest')",
                     (f"{ga}/late",))
        conn.execute("SELECT cronbox.schedule(%s, every => '10 seconds', max_runs => 1)", (f"{ga}/once",))
        conn.execute("SELECT cronbox.schedule(%s, every => '10 seconds', exclude => 'freeze')", (f"{gb}/frozen",))
        conn.execute("SELECT cronbox.schedule(%s, every => '30 seconds')", (f"{gb}/plain",))
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(SATURATION_PLANS)
        conn.execute(STORE_PLANS)
        # the calendar links' policies without their subqueries on jobs (as the layer will replace them)
        conn.execute("DROP POLICY job_calendar_read ON cronbox.job_calendar")
        conn.execute("DROP POLICY job_calendar_write ON cronbox.job_calendar")
        conn.execute("CREATE POLICY job_calendar_read ON cronbox.job_calendar FOR SELECT USING (cronbox.caller_reads_all())")
        conn.execute("CREATE POLICY job_calendar_write ON cronbox.job_calendar FOR ALL USING (cronbox.caller_writes_all())"
                     " WITH CHECK (cronbox.caller_writes_all())")
        # and the history's (a stretch of excluded fires is extended in place)
        conn.execute("DROP POLICY run_read ON cronbox.run")
        conn.execute("DROP POLICY run_update ON cronbox.run")
        conn.execute("CREATE POLICY run_read ON cronbox.run FOR SELECT USING (cronbox.caller_reads_all())")
        conn.execute("CREATE POLICY run_update ON cronbox.run FOR UPDATE USING (cronbox.caller_writes_all())")

    aconn = await psycopg.AsyncConnection.connect(citus_clone, autocommit=True)
    try:
        await aconn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        p = await saturate_pass(aconn, batch=100, horizon=timedelta(minutes=2), grace=timedelta(seconds=30))
        assert (p.claimed, p.planned, p.missed) == (5, 5, 1), p
        # a later pass: the frozen job's stretch of excluded fires extended in place
        later = (await (await aconn.execute("SELECT now() + interval '90 seconds'")).fetchone())[0]
        p2 = await saturate_pass(aconn, batch=100, horizon=timedelta(minutes=2), grace=timedelta(seconds=30), now=later)
        assert p2.claimed >= 1 and p2.missed == 0, p2
    finally:
        await aconn.close()

    with db.connect(citus_clone) as conn:
        assert conn.execute("SELECT count(*) FROM cronbox.job WHERE paused").fetchone()[0] == 0  # none quarantined
        futures = dict(conn.execute("SELECT bucket, count(*) FROM cronbox.job_future GROUP BY bucket").fetchall())
        assert set(futures) == {a, b} and sum(futures.values()) == p.futures + p2.futures, futures
        assert conn.execute("SELECT missed_fires > 12 FROM cronbox.run WHERE state = 'skipped'").fetchone()[0]
        runs = conn.execute("SELECT job_name, state, bucket, missed_fires > 0 FROM cronbox.run ORDER BY job_name").fetchall()
        assert runs == [(f"{gb}/frozen", "skipped", b, True), (f"{ga}/late", "missed", a, True)], runs
        jobs = {r[0]: r[1:] for r in conn.execute(
            "SELECT j.name, j.finished_at IS NOT NULL, j.excluded_run_id IS NOT NULL, f.fires_made, f.frontier IS NOT NULL,"
            " s.missed_count FROM cronbox.job j JOIN cronbox.job_fire f ON f.bucket = j.bucket AND f.job_id = j.job_id"
            " JOIN cronbox.job_stat s ON s.bucket = j.bucket AND s.job_id = j.job_id")}
        assert jobs[f"{ga}/once"][:3] == (True, False, 1), jobs
        assert jobs[f"{gb}/frozen"][:3] == (False, True, 0), jobs
        assert jobs[f"{ga}/late"][4] > 0 and all(j[3] for j in jobs.values()), jobs


# The backfill requests distributed with their jobs (DISTRIBUTE_JOBS first): key with the bucket
# first, no foreign key to the jobs, row security without subqueries; the pass's functions
# planned with their bucket bound.
DISTRIBUTE_BACKFILL = """
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE cronbox.backfill DROP CONSTRAINT backfill_pkey;
ALTER TABLE cronbox.backfill ADD PRIMARY KEY (bucket, backfill_id);
DROP POLICY backfill_read ON cronbox.backfill;
DROP POLICY backfill_insert ON cronbox.backfill;
DROP POLICY backfill_change ON cronbox.backfill;
DROP POLICY backfill_delete ON cronbox.backfill;
CREATE POLICY everyone ON cronbox.backfill USING (cronbox.caller_reads_all()) WITH CHECK (true);
SELECT pg_catalog.create_distributed_table('cronbox.backfill', 'bucket', colocate_with => 'cronbox.bucket_shard');
ALTER FUNCTION cronbox.claim_backfills_at(integer, integer, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.store_backfill_at(bigint[], timestamptz[], boolean[], text[], bigint[], timestamptz[], integer,
    timestamptz) SET plan_cache_mode = force_custom_plan;
"""


async def test_citus_a_backfill_pass_claims_and_stores_each_bucket_s_requests_one_task_per_statement(citus_clone):
    """Backfill passes of the poller (poller.backfill, one per bucket as a poller leasing buckets
    runs them) on requests, jobs, statistics, saturation state and futures distributed by bucket,
    the history, outbox and calendars the coordinator's own, with Citus refusing any statement of
    more than one task: each pass claims and stores only its bucket's requests, every statement one
    task (or none, on the coordinator's own tables). The decisions are those of one primary: the
    fires made as backfill futures, a fire already pending counted a duplicate, fires an exclusion
    calendar drops counted excluded, each request done; and the pacing is per bucket: two
    buckets' passes at one time each start their fires 0.5 ms after it, neither after the
    other's."""
    from poller.backfill import backfill_once

    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "b{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        hourly, frozen = f"{ga}/hourly", f"{gb}/frozen"
        conn.execute("SELECT cronbox.create_calendar('freeze', ranges => ARRAY[daterange(current_date - 1, current_date)])")
        conn.execute("SELECT cronbox.schedule(%s, '0 * * * *', overlap => 'allow')", (hourly,))
        conn.execute("SELECT cronbox.schedule(%s, '0 * * * *', overlap => 'allow', exclude => 'freeze')", (frozen,))
        now, start = conn.execute("SELECT now(), date_trunc('hour', now()) - interval '48 hours'").fetchone()
        # the jobs' frontiers after the range (backfill handles only fires saturation has passed)
        conn.execute("UPDATE cronbox.job_fire SET frontier = %s", (now,))
        jobs = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
        # one fire of the first job already pending: a duplicate, not made again
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, bucket, queue) VALUES (%s, %s, %s, %s,"
                     " 'default')", (jobs[hourly], start + timedelta(hours=5), now + timedelta(days=1), a))
        for name in jobs:  # 48 hourly fires each
            conn.execute("SELECT cronbox.backfill(%s, %s, %s)", (name, start, start + timedelta(hours=47, minutes=30)))
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(DISTRIBUTE_BACKFILL)
        # the calendar links' policies without their subqueries on jobs (as the layer will replace them)
        conn.execute("DROP POLICY job_calendar_read ON cronbox.job_calendar")
        conn.execute("DROP POLICY job_calendar_write ON cronbox.job_calendar")
        conn.execute("CREATE POLICY job_calendar_read ON cronbox.job_calendar FOR SELECT USING (cronbox.caller_reads_all())")
        conn.execute("CREATE POLICY job_calendar_write ON cronbox.job_calendar FOR ALL USING (cronbox.caller_writes_all())"
                     " WITH CHECK (cronbox.caller_writes_all())")
        # and the history's and the runs in flight's (read for the fires that ran)
        conn.execute("DROP POLICY run_read ON cronbox.run")
        conn.execute("CREATE POLICY run_read ON cronbox.run FOR SELECT USING (cronbox.caller_reads_all())")
        conn.execute("DROP POLICY outbox_read ON cronbox.outbox")
        conn.execute("CREATE POLICY outbox_read ON cronbox.outbox FOR SELECT USING (cronbox.caller_reads_all())")

    at = now + timedelta(minutes=1)  # both buckets' passes at one time (the internal functions)
    aconn = await psycopg.AsyncConnection.connect(citus_clone, autocommit=True)
    try:
        await aconn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        got = {}
        for bucket in (a, b):
            got[bucket] = await backfill_once(aconn, now=at, bucket=bucket)
            assert await backfill_once(aconn, now=at, bucket=bucket) == (0, 0, 0)  # nothing left
    finally:
        await aconn.close()

    with db.connect(citus_clone) as conn:
        done = {r[0]: r[1:] for r in conn.execute("SELECT job, state, fires, duplicates, excluded FROM cronbox.backfills")}
        assert done[hourly] == ("done", 47, 1, 0), done
        excluded = done[frozen][3]
        assert excluded == 24 and done[frozen] == ("done", 24, 0, 24), done
        assert got == {a: (1, 47, 1), b: (1, 24, 0)}, got
        made = conn.execute("SELECT bucket, count(*), min(due_at), max(due_at) FROM cronbox.job_future"
                            " WHERE origin = 'backfill' GROUP BY bucket ORDER BY bucket").fetchall()
        assert [(m[0], m[1]) for m in made] == [(a, 47), (b, 24)], made
        half = timedelta(microseconds=500)
        for bucket, n, first, last in made:  # paced per bucket: from the pass's time, 0.5 ms apart
            assert at < first <= at + 48 * half and last - first >= (n - 1) * half, (bucket, n, first, last)
        assert conn.execute("SELECT count(*) FROM cronbox.job WHERE paused").fetchone()[0] == 0  # none quarantined


# A resume (by name: cronbox.resume; a pause whose until passed: cronbox.resume_paused) planned
# with its bucket bound, as the others.
RESUME_PLANS = """
ALTER FUNCTION cronbox.resume_at(text, text, timestamptz, integer, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.release_futures(bigint[], integer[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.resume_paused_at(integer, integer, timestamptz) SET plan_cache_mode = force_custom_plan;
"""


def test_citus_quarantine_reads_and_writes_only_the_job_s_bucket_one_task_per_statement(citus_clone):
    """cronbox.quarantine_job with the job's bucket on jobs, statistics, saturation state, futures
    and the outbox distributed by bucket, with Citus refusing any statement of more than one task:
    the job paused with its reason, its scheduled futures dropped and the others held, a
    schedule_paused notification and its copy to the job's own recipient in the job's bucket;
    resumed (cronbox.resume, in the job's bucket), then quarantined again within the notification
    window, the copy folds into the pending digest (count 2), every statement one task. A wrong bucket finds no job and writes
    nothing; the other bucket's job is untouched."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "q{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        bad, good = f"{ga}/bad", f"{gb}/good"
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute', notify => ARRAY['mailto:ops@example.com'])",
                     (bad,))
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (good,))
        jobs = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
        for name, bucket in ((bad, a), (good, b)):
            conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, bucket, queue, origin) VALUES"
                         " (%s, now() + interval '1 minute', now() + interval '1 minute', %s, 'default', 'schedule'),"
                         " (%s, now(), now(), %s, 'default', 'manual')", (jobs[name], bucket, jobs[name], bucket))
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(DISTRIBUTE_OUTBOX)
        conn.execute("ALTER FUNCTION cronbox.quarantine_job(bigint, text, integer) SET plan_cache_mode = force_custom_plan")
        conn.execute("ALTER FUNCTION cronbox.notify_stakeholders(bigint[], integer) SET plan_cache_mode = force_custom_plan")
        conn.execute(RESUME_PLANS)

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        quarantine = "SELECT cronbox.quarantine_job(%s, 'cannot compute fires', %s)"
        assert conn.execute(quarantine, (jobs[bad], b)).fetchone()[0] is False  # not in that bucket
        assert conn.execute(quarantine, (jobs[bad], a)).fetchone()[0] is True
        assert conn.execute(quarantine, (jobs[bad], a)).fetchone()[0] is False  # already paused
        assert conn.execute("SELECT cronbox.resume(%s)", (bad,)).fetchone()[0] is True  # in its bucket
        assert conn.execute(quarantine, (jobs[bad], a)).fetchone()[0] is True  # within the window: folded
        conn.execute("RESET citus.multi_task_query_log_level")

        paused = dict(conn.execute("SELECT name, paused_reason FROM cronbox.job WHERE paused").fetchall())
        assert paused == {bad: "quarantined: cannot compute fires"}, paused
        futures = conn.execute("SELECT j.name, f.origin, f.hold FROM cronbox.job_future f JOIN cronbox.job j"
                               " ON j.bucket = f.bucket AND j.job_id = f.job_id ORDER BY 1, 2").fetchall()
        assert sorted(futures) == sorted([(bad, "manual", "paused"), (good, "manual", None), (good, "schedule", None)])
        notes = conn.execute("SELECT bucket, queue, message ->> 'count' FROM cronbox.outbox"
                             " WHERE kind = 'notification' AND message ->> 'event' = 'schedule_paused'"
                             " ORDER BY queue, outbox_id").fetchall()
        assert notes == [(a, "cronbox.mail", "2"), (a, "cronbox.notifications", None),
                         (a, "cronbox.notifications", None)], notes
        assert conn.execute("SELECT count(*) FROM cronbox.job_change WHERE action = 'quarantined'").fetchone()[0] == 2


def test_citus_the_reaper_round_and_the_lead_s_profile_go_bucket_by_bucket_one_task_each(citus_clone):
    """What a poller leasing buckets runs beside dispatch, per held bucket, on jobs, futures and
    the outbox distributed by bucket, with Citus refusing any statement of more than one task:
    the jobs a failed batch would take (cronbox.due_jobs, to isolate the job at fault) and the
    fires coming due per second (cronbox.due_ahead, which sizes the early-dispatch lead) count
    only the bucket's; the hold backstop (cronbox.release_holds) releases the bucket's held
    futures whose second look has come and leaves the other bucket's; an idle reaper round
    (cronbox.reap_lost, cronbox.resume_paused with nothing to do in the bucket) reads one shard.
    A lost run's end is finish_runs' with the bucket (the finishing calls' test below)."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 2, "r{}")
        (a, names_a), (b, names_b) = sorted(groups.items())
        for name in names_a + names_b:
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (name,))
        jobs = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
        rows = [(jobs[n], bucket) for bucket, names in ((a, names_a), (b, names_b)) for n in names]
        # one due now, one due in 10 minutes (still ahead once the tables are distributed, however
        # loaded the machine), and one held whose second look has come
        for job_id, bucket in rows:
            conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, bucket, queue) VALUES"
                         " (%s, now() - interval '1 second', now() - interval '1 second', %s, 'default'),"
                         " (%s, now() + interval '10 minutes', now() + interval '10 minutes', %s, 'default')",
                         (job_id, bucket, job_id, bucket))
            conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, bucket, queue, origin, hold,"
                         " held_since, hold_until) VALUES (%s, now() - interval '1 hour', now() - interval '1 hour',"
                         " %s, 'default', 'manual', 'dependency', now() - interval '1 minute', now() - interval '1 second')",
                         (job_id, bucket))
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(DISTRIBUTE_OUTBOX)
        for f in ("cronbox.due_jobs(integer, integer)", "cronbox.due_ahead(interval, integer, integer)",
                  "cronbox.release_holds_at(integer, integer, timestamptz)",
                  "cronbox.release_futures(bigint[], integer[])",
                  "cronbox.reap_lost_at(integer, integer, timestamptz)",
                  "cronbox.resume_paused_at(integer, integer, timestamptz)"):
            conn.execute(f"ALTER FUNCTION {f} SET plan_cache_mode = force_custom_plan")

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        due = [r[0] for r in conn.execute("SELECT cronbox.due_jobs(100, %s)", (a,))]
        assert sorted(due) == sorted(jobs[n] for n in names_a), due
        ahead = conn.execute("SELECT sum(fires) FROM cronbox.due_ahead('1 hour', 1000, %s)", (b,)).fetchone()[0]
        assert ahead == len(names_b), ahead
        assert conn.execute("SELECT cronbox.release_holds(100, %s)", (a,)).fetchone()[0] == len(names_a)
        assert conn.execute("SELECT cronbox.release_holds(100, %s)", (a,)).fetchone()[0] == 0
        assert conn.execute("SELECT cronbox.reap_lost(100, %s)", (a,)).fetchone()[0] == 0
        assert conn.execute("SELECT cronbox.resume_paused(100, %s)", (b,)).fetchone()[0] == 0
        conn.execute("RESET citus.multi_task_query_log_level")
        held = dict(conn.execute("SELECT bucket, count(*) FROM cronbox.job_future WHERE hold IS NOT NULL"
                                 " GROUP BY bucket").fetchall())
        assert held == {b: len(names_b)}, held


def test_citus_resume_and_resume_paused_read_and_write_only_the_job_s_bucket_one_task_per_statement(citus_clone):
    """cronbox.resume (by name) and cronbox.resume_paused (a pause whose until passed, per bucket)
    on jobs, statistics, saturation state and futures distributed by bucket, with Citus refusing
    any statement of more than one task: a paused job resumed in its bucket, its frontier moved
    to the resume, its held retry released, the change log saying who; a fixed-delay job's pause
    ended by its until, anchored one interval after it; a job not paused left alone (false), an
    unknown name P0002 (after one read over every bucket); the other bucket's paused job
    untouched."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 2, "p{}")
        (a, [ga, ga2]), (b, [gb, _]) = sorted(groups.items())
        held, timed, other = f"{ga}/held", f"{ga2}/timed", f"{gb}/other"
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (held,))
        conn.execute("SELECT cronbox.schedule(%s, every => '10 minutes', every_mode => 'fixed_delay')", (timed,))
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (other,))
        jobs = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
        conn.execute("SELECT cronbox.pause(%s)", (held,))
        conn.execute("SELECT cronbox.pause(%s)", (other,))
        conn.execute("SELECT cronbox.pause(%s, until => now() + interval '1 minute')", (timed,))
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, bucket, queue, origin, attempt, hold,"
                     " held_since, hold_until) VALUES (%s, now(), now(), %s, 'default', 'retry', 2, 'paused', now(),"
                     " 'infinity')", (jobs[held], a))
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(RESUME_PLANS)

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.resume(%s, 'back')", (held,)).fetchone()[0] is True
        assert conn.execute("SELECT cronbox.resume(%s, 'back')", (held,)).fetchone()[0] is False  # not paused
        later = conn.execute("SELECT now() + interval '2 minutes'").fetchone()[0]
        assert conn.execute("SELECT cronbox.resume_paused_at(100, %s, p_now => %s)", (b, later)).fetchone()[0] == 0
        assert conn.execute("SELECT cronbox.resume_paused_at(100, %s, p_now => %s)", (a, later)).fetchone()[0] == 1
        conn.execute("RESET citus.multi_task_query_log_level")
        # an unknown name: not in its name's bucket, then looked for in every bucket (one read)
        with pytest.raises(psycopg.errors.NoDataFound):
            conn.execute("SELECT cronbox.resume(%s)", (f"{ga}/nobody",))

        paused = {r[0]: r[1:] for r in conn.execute(
            "SELECT j.name, j.paused, f.paused, f.frontier >= j.updated_at - interval '1 second' FROM cronbox.job j"
            " JOIN cronbox.job_fire f ON f.bucket = j.bucket AND f.job_id = j.job_id")}
        assert paused[held] == (False, False, True) and paused[other][:2] == (True, True), paused
        assert paused[timed][:2] == (False, False), paused
        anchor, until = conn.execute("SELECT j.anchor, f.next_fire FROM cronbox.job j JOIN cronbox.job_fire f"
                                     " ON f.bucket = j.bucket AND f.job_id = j.job_id WHERE j.name = %s",
                                     (timed,)).fetchone()
        assert anchor == until and anchor is not None, (anchor, until)
        assert conn.execute("SELECT hold FROM cronbox.job_future WHERE bucket = %s AND job_id = %s",
                            (a, jobs[held])).fetchall() == [(None,)]
        log = conn.execute("SELECT job_name, changed_by = 'cronbox', reason FROM cronbox.job_change"
                           " WHERE action = 'resumed' ORDER BY change_id").fetchall()
        assert [(r[0], r[1]) for r in log] == [(held, False), (timed, True)], log
        assert log[0][2] == "back" and log[1][2].startswith("resumed automatically"), log


# The reports by run id, planned with the bucket their id carries bound.
REPORT_PLANS = """
ALTER FUNCTION cronbox.start_run_at(bigint, text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.heartbeat_at(bigint, text, timestamptz) SET plan_cache_mode = force_custom_plan;
"""


def test_citus_start_run_and_heartbeat_find_the_run_in_the_bucket_its_id_carries_one_task_per_statement(citus_clone):
    """cronbox.start_run and cronbox.heartbeat (a report names a run id, not a bucket) on jobs and
    an outbox distributed by bucket, with Citus refusing any statement of more than one task: a
    run whose id was drawn with its bucket (cronbox.new_bucket_run_id(bucket_index)) is found, started
    (running on the worker, leased for its job's timeout) and kept alive in the bucket its id
    carries (cronbox.run_bucket), every statement one task; another worker's heartbeat is told to
    cancel. A run whose id was drawn without its bucket is found by key over every bucket, then
    started and kept alive in its own bucket; an unknown id is P0002."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "h{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        for name in (f"{ga}/job", f"{gb}/job"):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour', timeout => '7 minutes')", (name,))
        index = dict(conn.execute("SELECT bucket, bucket_index FROM cronbox.bucket").fetchall())
        ids = {}
        for name, bucket, drawn in ((f"{ga}/job", a, "cronbox.new_bucket_run_id(%s)"), (f"{gb}/job", b, "cronbox.new_bucket_run_id(%s)"),
                                    (f"{ga}/job", a, "cronbox.new_run_id() + 0 * %s")):
            ids.setdefault(bucket, []).append(conn.execute(
                f"WITH d AS (SELECT {drawn} AS id) INSERT INTO cronbox.outbox (outbox_id, run_id, bucket, queue, kind,"
                " job_id, job_name, state, fire_at, attempt, timeout, available_at, dispatched_at)"
                " SELECT d.id, d.id, j.bucket, 'q', 'run', j.job_id, j.name, 'dispatched', now(), 1, j.timeout, now(), now()"
                " FROM d, cronbox.job j WHERE j.name = %s RETURNING outbox_id", (index[bucket], name)).fetchone()[0])
        (mine, plain), [theirs] = ids[a], ids[b]
        assert conn.execute("SELECT cronbox.run_bucket(%s), cronbox.run_bucket(%s)", (mine, theirs)).fetchone() == (a, b)
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(DISTRIBUTE_OUTBOX)
        conn.execute(REPORT_PLANS)
        # the history's read policy without its subquery on jobs (as the layer will replace it)
        conn.execute("DROP POLICY run_read ON cronbox.run")
        conn.execute("CREATE POLICY run_read ON cronbox.run FOR SELECT USING (cronbox.caller_reads_all())")

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        for run_id in (mine, theirs):
            deadline, lease = conn.execute("SELECT d, d - now() FROM cronbox.start_run(%s, 'w1') d", (run_id,)).fetchone()
            assert lease == timedelta(minutes=7), lease
            assert conn.execute("SELECT cronbox.start_run(%s, 'w1')", (run_id,)).fetchone()[0] == deadline  # again
            assert conn.execute("SELECT cronbox.heartbeat(%s, 'w1')", (run_id,)).fetchone()[0] == "continue"
            assert conn.execute("SELECT cronbox.heartbeat(%s, 'w2')", (run_id,)).fetchone()[0] == "cancel"
        conn.execute("RESET citus.multi_task_query_log_level")
        # an id drawn without its bucket: looked up over every bucket, then in its own
        assert conn.execute("SELECT cronbox.start_run(%s, 'w1') - now()", (plain,)).fetchone()[0] == timedelta(minutes=7)
        assert conn.execute("SELECT cronbox.heartbeat(%s, 'w1')", (plain,)).fetchone()[0] == "continue"
        with pytest.raises(psycopg.errors.NoDataFound):
            conn.execute("SELECT cronbox.heartbeat(%s, 'w1')", (theirs + 1,))
        rows = conn.execute("SELECT outbox_id, bucket, state, worker FROM cronbox.outbox ORDER BY outbox_id").fetchall()
        assert sorted(rows) == sorted([(mine, a, "running", "w1"), (plain, a, "running", "w1"),
                                       (theirs, b, "running", "w1")]), rows


@pytest.fixture
def distributed_clone(citus_clone: str) -> str:
    """The clone with its hot tables distributed as `cronbox migrate --citus --distribute` does
    (the Citus layer's migration 0356, docs/citus.md, "Distributing the hot tables")."""
    from cronbox.citus import is_distributed, migrate_citus

    with db.connect(citus_clone) as conn:
        done = is_distributed(conn)
    if not done:  # (a session run with CRONBOX_TEST_CITUS_DISTRIBUTE=1 has it already)
        migrate_citus(citus_clone, distribute=True)
    return citus_clone


def test_citus_start_runs_starts_a_batch_of_several_buckets_one_task_per_statement(distributed_clone):
    """cronbox.start_runs (the worker kit's batch start) on the distributed tables, with Citus
    refusing any statement of more than one task: a batch of runs of two buckets is locked,
    decided and started bucket by bucket (the bucket each id carries), each run leased for its
    job's timeout; a run already running elsewhere is refused as start_run refuses it, an
    unknown id is P0002, and the batch's answers come back in the order given."""
    with db.connect(distributed_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "sr{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        for name, timeout in ((f"{ga}/job", "7 minutes"), (f"{gb}/job", "9 minutes")):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour', overlap => 'allow', timeout => %s)",
                         (name, timeout))
            for _ in range(2):
                conn.execute("SELECT cronbox.trigger(%s)", (name,))
        for bucket in (a, b):
            conn.execute("SELECT * FROM cronbox.dispatch(100, p_bucket => %s)", (bucket,))
        ids = dict(conn.execute("SELECT job_name, array_agg(outbox_id ORDER BY outbox_id) FROM cronbox.outbox"
                                " WHERE kind = 'run' GROUP BY 1").fetchall())
        (a1, a2), (b1, b2) = ids[f"{ga}/job"], ids[f"{gb}/job"]
        assert conn.execute("SELECT cronbox.run_bucket(%s), cronbox.run_bucket(%s)", (a1, b1)).fetchone() == (a, b)
        conn.execute("SELECT cronbox.start_run(%s, 'w2')", (a2,))
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        got = conn.execute("SELECT run_id, deadline - now(), code FROM cronbox.start_runs(%s, 'w1')",
                           ([b1, a1, a2, b2],)).fetchall()
        assert got == [(b1, timedelta(minutes=9), None), (a1, timedelta(minutes=7), None), (a2, None, "55000"),
                       (b2, timedelta(minutes=9), None)], got
        conn.execute("RESET citus.multi_task_query_log_level")
        # an id in no bucket's outbox: looked up by key over every bucket (the rare path)
        got = conn.execute("SELECT run_id, deadline - now(), code FROM cronbox.start_runs(%s, 'w1')",
                           ([a2, b2 + 1_000_000],)).fetchall()
        assert got == [(a2, None, "55000"), (b2 + 1_000_000, None, "P0002")], got
        rows = conn.execute("SELECT outbox_id, state, worker FROM cronbox.outbox WHERE kind = 'run'").fetchall()
        assert sorted(rows) == sorted([(a1, "running", "w1"), (a2, "running", "w2"), (b1, "running", "w1"),
                                       (b2, "running", "w1")]), rows


def test_citus_the_run_tally_counts_the_runs_of_every_bucket_on_the_distributed_history(distributed_clone):
    """cronbox.tally_runs (the poller's maintenance, the console's per-minute counts) on the
    distributed tables: the new runs of two buckets are counted per minute, queue and owner, those
    still in flight remembered, and counted once they have finished (their history rows and their
    jobs' owners read by key, a statement per bucket); each run counted once."""
    with db.connect(distributed_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "t{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        for name in (f"{ga}/job", f"{gb}/job"):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour', overlap => 'allow', queue => 'tq')", (name,))
            for _ in range(3):
                conn.execute("SELECT cronbox.trigger(%s)", (name,))
        runs = dict(conn.execute("SELECT job_name, array_agg(outbox_id ORDER BY outbox_id) FROM cronbox.outbox"
                                 " WHERE kind = 'run' GROUP BY 1").fetchall())
        first, second = [], []
        for name in (f"{ga}/job", f"{gb}/job"):
            x, y, z = runs[name]
            conn.execute("SELECT * FROM cronbox.complete_runs(%s)", ([x],))
            conn.execute("SELECT cronbox.fail_run(%s, 'boom', false)", (y,))
            first.append(x)
            second.append(z)

        def counts() -> tuple:
            return conn.execute("SELECT sum(succeeded), sum(failed), array_agg(DISTINCT owner) FROM cronbox.run_minute"
                                " WHERE queue = 'tq'").fetchone()

        later = "now() + interval '1 minute'"
        conn.execute(f"SELECT cronbox.tally_runs_at(1000, {later})")
        assert counts() == (2, 2, ["postgres"])
        assert conn.execute("SELECT count(*) FROM cronbox.run_tally_pending").fetchone()[0] == 2  # in flight
        conn.execute("SELECT * FROM cronbox.complete_runs(%s)", (second,))
        conn.execute(f"SELECT cronbox.tally_runs_at(1000, {later})")
        assert counts() == (4, 2, ["postgres"])
        assert conn.execute("SELECT count(*) FROM cronbox.run_tally_pending").fetchone()[0] == 0
        conn.execute(f"SELECT cronbox.tally_runs_at(1000, {later})")
        assert counts() == (4, 2, ["postgres"])  # each once


def test_citus_the_after_jobs_naming_finished_jobs_are_read_from_the_edges_in_one_task(citus_clone):
    """The after-job edges (cronbox.job_after_edge, kept by schedule) as a reference table: the
    after-jobs that name a finished job, with their buckets, are one task on a copy of the
    edges, whichever buckets the after-jobs are in; reading them from the distributed jobs'
    `after` lists instead walks every shard. An after-job made by a bare INSERT on the
    distributed jobs gets its edges from cronbox.add_job_rows."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 2, "e{}")
        (a, [up, other]), (b, [down, down2]) = sorted(groups.items())
        for name in (up, other):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (name,))
        conn.execute("SELECT cronbox.schedule(%s, after => %s)", (down, [up, other]))
        conn.execute(DISTRIBUTE_JOBS)
        [(jid,)] = conn.execute("INSERT INTO cronbox.job (name, bucket, kind, after, created_at, updated_at)"
                                " VALUES (%s, %s, 'after', %s, now(), now()) RETURNING job_id",
                                (down2, b, [up])).fetchall()
        conn.execute("SELECT cronbox.add_job_rows(ARRAY[%s]::bigint[])", (jid,))
        lookup = "SELECT e.job_id, e.bucket FROM cronbox.job_after_edge e WHERE e.upstream = ANY (%s::text[])"
        conn.execute("SET citus.multi_task_query_log_level = error")
        plan = explain(conn, lookup, ([up],))
        assert "Task Count: 1" in plan, plan
        found = conn.execute(lookup, ([up],)).fetchall()
        conn.execute("RESET citus.multi_task_query_log_level")
        jobs = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
        assert sorted(found) == sorted([(jobs[down], b), (jobs[down2], b)])
        plan = explain(conn, "SELECT j.job_id FROM cronbox.job j WHERE j.after && %s::text[]", ([up],))
        assert "Task Count: 1" not in plan, plan


# The finishing calls by run id, planned with their bucket bound (the bucket their ids carry).
FINISH_PLANS = """
ALTER FUNCTION cronbox.finish_runs(bigint[], text, jsonb[], text[], boolean, timestamptz, integer)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.release_futures(bigint[], integer[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.schedule_next_fixed_delay(bigint, timestamptz, integer) SET plan_cache_mode = force_custom_plan;
"""


def distribute_for_finishing(conn: psycopg.Connection, *, history_policy: bool = False) -> None:
    """The clone as the finishing calls' tests need it: the jobs' tables and the outbox
    distributed by bucket (FINISH_PLANS' policies beside them), and with `history_policy` the
    history's read policy without its subquery, as the layer will make it."""
    conn.execute(DISTRIBUTE_JOBS)
    conn.execute(DISTRIBUTE_OUTBOX)
    conn.execute(FINISH_PLANS)
    if history_policy:
        conn.execute("DROP POLICY run_read ON cronbox.run")
        conn.execute("CREATE POLICY run_read ON cronbox.run FOR SELECT USING (cronbox.caller_reads_all())")


@both_forms
def test_citus_the_finishing_calls_read_and_write_the_bucket_their_run_ids_carry_one_task_per_statement(citus_clone, form):
    """complete_run, complete_runs, fail_run and fail_runs on jobs, statistics, saturation state,
    futures and the outbox distributed by bucket, with the after-job edges a reference table and
    Citus refusing any statement of more than one task: each run is finished in the bucket its
    id carries (cronbox.run_bucket), with the decisions of one primary: a success of a plain job
    (one run, and a batch over two buckets), a failure retried as a new attempt in the job's
    bucket, a failure with no attempt left (a run_failed notification in the job's bucket), an
    upstream's success firing its after-job in another bucket (the after-job's list and the
    upstream's statistics each read in their own bucket), a late report kept aside; an id drawn
    without its bucket is found over every bucket and finished in its own."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 4, "f{}")
        (a, [a0, a1, a2, a3]), (b, [b0, b1, b2, _]) = sorted(groups.items())
        plain_a, retried, up, drawn = f"{a0}/plain", f"{a1}/retried", f"{a2}/up", f"{a3}/drawn"
        plain_b, once_b, after_b = f"{b0}/plain", f"{b1}/once", f"{b2}/after"
        yearly = "'0 0 1 1 *'"
        for name in (plain_a, up, drawn, plain_b):
            conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow')", (name,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow', max_attempts => 3)", (retried,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow', max_attempts => 1)", (once_b,))
        conn.execute("SELECT cronbox.schedule(%s, after => ARRAY[%s])", (after_b, up))
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, now() - interval '1 minute', now() - interval '1 minute', j.priority,"
                     " 'schedule', j.bucket, j.queue FROM cronbox.job j WHERE j.name <> ALL (%s)", ([after_b, drawn],))
        conn.execute("DELETE FROM cronbox.job_future WHERE origin = 'schedule' AND due_at > now()")
        dispatch = "SELECT dispatched FROM cronbox.dispatch(100, p_bucket => %s)"
        assert conn.execute(dispatch, (a,)).fetchone()[0] + conn.execute(dispatch, (b,)).fetchone()[0] == 5
        # one run drawn without its bucket (as before dispatch drew ids with theirs)
        conn.execute("INSERT INTO cronbox.outbox (outbox_id, run_id, bucket, queue, kind, job_id, job_name, state,"
                     " fire_at, attempt, timeout, available_at, dispatched_at, origin, priority)"
                     " SELECT d.id, d.id, j.bucket, j.queue, 'run', j.job_id, j.name, 'dispatched', now(), 1, j.timeout,"
                     " 'infinity', now(), 'manual', j.priority FROM (SELECT cronbox.new_run_id() AS id) d, cronbox.job j WHERE j.name = %s",
                     (drawn,))
        runs = dict(conn.execute("SELECT job_name, outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchall())
        carried = conn.execute("SELECT count(*) FILTER (WHERE cronbox.run_bucket(outbox_id) = bucket) FROM cronbox.outbox"
                               " WHERE kind = 'run'").fetchone()[0]
        assert carried == 5, carried
        distribute_for_finishing(conn, history_policy=True)

        use_form(conn, form)
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.complete_run(%s, '{\"ok\": 1}')", (runs[plain_a],)).fetchone()[0] == "succeeded"
        assert conn.execute("SELECT cronbox.fail_run(%s, 'boom')", (runs[retried],)).fetchone()[0] == "failed"
        assert conn.execute("SELECT cronbox.complete_run(%s)", (runs[up],)).fetchone()[0] == "succeeded"
        got = conn.execute("SELECT run_id, state, verdict FROM cronbox.fail_runs(%s, %s)",
                           ([runs[once_b]], ["gone"])).fetchall()
        assert got == [(runs[once_b], "failed", "finished")], got
        got = conn.execute("SELECT run_id, state, verdict FROM cronbox.complete_runs(%s)",
                           ([runs[plain_b], runs[up]],)).fetchall()
        assert got == [(runs[plain_b], "succeeded", "finished"), (runs[up], "succeeded", "late")], got
        conn.execute("RESET citus.multi_task_query_log_level")
        # an id drawn without its bucket: found over every bucket, finished in its own
        assert conn.execute("SELECT cronbox.complete_run(%s)", (runs[drawn],)).fetchone()[0] == "succeeded"

        history = dict(conn.execute("SELECT job_name, state FROM cronbox.run").fetchall())
        assert history == {plain_a: "succeeded", retried: "failed", up: "succeeded", once_b: "failed",
                           plain_b: "succeeded", drawn: "succeeded"}, history
        assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0] == 0
        futures = conn.execute("SELECT j.name, f.origin, f.attempt, f.bucket FROM cronbox.job_future f JOIN cronbox.job j"
                               " ON j.bucket = f.bucket AND j.job_id = f.job_id ORDER BY 1").fetchall()
        assert sorted(futures) == sorted([(retried, "retry", 2, a), (after_b, "dependency", 1, b)]), futures
        notes = conn.execute("SELECT bucket, message ->> 'job' FROM cronbox.outbox WHERE kind = 'notification'"
                             " AND message ->> 'event' = 'run_failed'").fetchall()
        assert notes == [(b, once_b)], notes
        assert conn.execute("SELECT count(*) FROM cronbox.run_late_report").fetchone()[0] == 1
        # the statistics' change rows, of dispatch per bucket and of each finish, carry their jobs' bucket
        changes = conn.execute("SELECT c.bucket, j.bucket FROM cronbox.job_stat_change c"
                               " CROSS JOIN LATERAL unnest(c.job_ids) AS u(job_id)"
                               " JOIN cronbox.job j ON j.job_id = u.job_id").fetchall()
        assert changes and all(c == j for c, j in changes), changes


@both_forms
def test_citus_cancel_and_the_reaper_end_runs_in_their_bucket_one_task_per_statement(citus_clone, form):
    """cronbox.cancel (by run id) and cronbox.reap_lost (per bucket) on jobs, statistics,
    saturation state, futures and the outbox distributed by bucket, with Citus refusing any
    statement of more than one task: a dispatched run cancelled at once in the bucket its id
    carries, a running one flagged (its heartbeat told to cancel), a run whose lease expired
    declared lost by the reaper of its bucket and retried there, the other bucket's expired run
    left to its own bucket's reaper; a cancel of a final run (looked for over every bucket) is
    55000."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 3, "c{}")
        (a, [a0, a1, a2]), (b, [b0, _, _]) = sorted(groups.items())
        pending, running, lost, other = f"{a0}/pending", f"{a1}/running", f"{a2}/lost", f"{b0}/other"
        for name in (pending, running, lost, other):
            conn.execute("SELECT cronbox.schedule(%s, '0 0 1 1 *', overlap => 'allow', max_attempts => 2)", (name,))
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, now() - interval '1 minute', now() - interval '1 minute', j.priority,"
                     " 'schedule', j.bucket, j.queue FROM cronbox.job j")
        conn.execute("DELETE FROM cronbox.job_future WHERE origin = 'schedule' AND due_at > now()")
        dispatch = "SELECT dispatched FROM cronbox.dispatch(100, p_bucket => %s)"
        assert conn.execute(dispatch, (a,)).fetchone()[0] + conn.execute(dispatch, (b,)).fetchone()[0] == 4
        runs = dict(conn.execute("SELECT job_name, outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchall())
        for name in (running, lost, other):
            conn.execute("SELECT cronbox.start_run(%s, 'w1')", (runs[name],))
        distribute_for_finishing(conn)
        for f in ("cronbox.cancel_at(bigint, timestamptz)", "cronbox.reap_lost_at(integer, integer, timestamptz)",
                  "cronbox.heartbeat_at(bigint, text, timestamptz)"):
            conn.execute(f"ALTER FUNCTION {f} SET plan_cache_mode = force_custom_plan")
        conn.execute("DROP POLICY run_read ON cronbox.run")
        conn.execute("CREATE POLICY run_read ON cronbox.run FOR SELECT USING (cronbox.caller_reads_all())")
        later = conn.execute("SELECT now() + interval '1 day'").fetchone()[0]

        use_form(conn, form)
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.cancel(%s)", (runs[pending],)).fetchone()[0] == "cancelled"
        assert conn.execute("SELECT cronbox.cancel(%s)", (runs[running],)).fetchone()[0] == "cancel_requested"
        assert conn.execute("SELECT cronbox.heartbeat(%s, 'w1')", (runs[running],)).fetchone()[0] == "cancel"
        # the reaper of bucket a: the run whose lease expired lost and retried, the cancelled one cancelled
        assert conn.execute("SELECT cronbox.reap_lost_at(100, %s, %s)", (a, later)).fetchone()[0] == 2
        conn.execute("RESET citus.multi_task_query_log_level")
        # a final run: not in flight in its bucket, then looked for over every bucket (the error path)
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            conn.execute("SELECT cronbox.cancel(%s)", (runs[pending],))

        history = dict(conn.execute("SELECT job_name, state FROM cronbox.run").fetchall())
        assert history == {pending: "cancelled", running: "cancelled", lost: "lost"}, history
        assert conn.execute("SELECT job_name, bucket FROM cronbox.outbox WHERE kind = 'run'").fetchall() == [(other, b)]
        retries = conn.execute("SELECT j.name, f.attempt, f.bucket FROM cronbox.job_future f JOIN cronbox.job j"
                               " ON j.bucket = f.bucket AND j.job_id = f.job_id WHERE f.origin = 'retry'").fetchall()
        assert retries == [(lost, 2, a)], retries


def test_citus_a_fixed_delay_job_s_next_fire_is_set_in_its_bucket_one_task_per_statement(citus_clone):
    """A run of a fixed-delay job completed (complete_run) on jobs, saturation state, futures and
    the outbox distributed by bucket, with Citus refusing any statement of more than one task:
    its job's next fire is one interval after the end (cronbox.schedule_next_fixed_delay, in the
    job's bucket); the other bucket's fixed-delay job, still running, keeps no next fire."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "d{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        mine, theirs = f"{ga}/delay", f"{gb}/delay"
        for name in (mine, theirs):
            conn.execute("SELECT cronbox.schedule(%s, every => '10 minutes', every_mode => 'fixed_delay')", (name,))
        conn.execute("DELETE FROM cronbox.job_future")
        conn.execute("UPDATE cronbox.job_fire SET next_fire = NULL")
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, now() - interval '1 minute', now() - interval '1 minute', j.priority,"
                     " 'schedule', j.bucket, j.queue FROM cronbox.job j")
        dispatch = "SELECT dispatched FROM cronbox.dispatch(100, p_bucket => %s)"
        assert conn.execute(dispatch, (a,)).fetchone()[0] + conn.execute(dispatch, (b,)).fetchone()[0] == 2
        runs = dict(conn.execute("SELECT job_name, outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchall())
        distribute_for_finishing(conn, history_policy=True)

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.complete_run(%s)", (runs[mine],)).fetchone()[0] == "succeeded"
        conn.execute("RESET citus.multi_task_query_log_level")
        got = dict(conn.execute("SELECT j.name, f.next_fire - r.finished_at FROM cronbox.job j"
                                " JOIN cronbox.job_fire f ON f.bucket = j.bucket AND f.job_id = j.job_id"
                                " LEFT JOIN cronbox.run r ON r.job_id = j.job_id").fetchall())
        assert got == {mine: timedelta(minutes=10), theirs: None}, got


def test_citus_an_upstream_s_success_releases_the_fires_gated_on_it_in_their_bucket_one_task_per_statement(citus_clone):
    """complete_run of an upstream (add_dependency) on jobs, futures and the outbox distributed
    by bucket, the dependencies a reference table carrying the gated job's bucket, with Citus
    refusing any statement of more than one task: the gated job's waiting fire, in another
    bucket, is released there (its futures read in that bucket alone)."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 1, "g{}")
        (a, [ga]), (b, [gb]) = sorted(groups.items())
        up, gated = f"{ga}/up", f"{gb}/gated"
        for name in (up, gated):
            conn.execute("SELECT cronbox.schedule(%s, '0 0 1 1 *', overlap => 'allow')", (name,))
        conn.execute("SELECT cronbox.add_dependency(%s, %s)", (gated, up))
        conn.execute("DELETE FROM cronbox.job_future")
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, now() - interval '1 minute', now() - interval '1 minute', j.priority,"
                     " 'schedule', j.bucket, j.queue FROM cronbox.job j WHERE j.name = %s", (up,))
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue, hold,"
                     " held_since, hold_until) SELECT j.job_id, now() - interval '1 hour', now() - interval '1 hour',"
                     " j.priority, 'manual', j.bucket, j.queue, 'dependency', now(), 'infinity'"
                     " FROM cronbox.job j WHERE j.name = %s", (gated,))
        assert conn.execute("SELECT dispatched FROM cronbox.dispatch(100, p_bucket => %s)", (a,)).fetchone()[0] == 1
        run = conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0]
        assert conn.execute("SELECT bucket FROM cronbox.job_dependency").fetchall() == [(b,)]
        distribute_for_finishing(conn, history_policy=True)

        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.complete_run(%s)", (run,)).fetchone()[0] == "succeeded"
        conn.execute("RESET citus.multi_task_query_log_level")
        held = conn.execute("SELECT bucket, hold FROM cronbox.job_future WHERE origin = 'manual'").fetchall()
        assert held == [(b, None)], held


# The statistics' change log as the layer will distribute it (its key with the bucket first),
# and the fold planned with its bucket bound.
DISTRIBUTE_STAT_CHANGES = """
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE cronbox.job_stat_change DROP CONSTRAINT job_stat_change_pkey;
ALTER TABLE cronbox.job_stat_change ADD PRIMARY KEY (bucket, change_id);
SELECT pg_catalog.create_distributed_table('cronbox.job_stat_change', 'bucket', colocate_with => 'cronbox.bucket_shard');
ALTER FUNCTION cronbox.fold_job_stats(integer, integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.apply_job_stat_changes(bigint[], bigint[], integer) SET plan_cache_mode = force_custom_plan;
"""


def test_citus_the_fold_of_job_statistics_goes_bucket_by_bucket_one_task_per_statement(citus_clone):
    """The poller's fold (cronbox.fold_job_stats) on jobs, statistics and the change log
    distributed by bucket, with Citus refusing any statement of more than one task: each change
    row, of a dispatch per bucket and of a batch of successes over two buckets, carries its jobs'
    bucket; a fold of one bucket folds that bucket's rows alone into its jobs' statistics, a fold
    without a bucket goes bucket by bucket; registered for delegation on p_bucket, the call is
    one task on the node holding the bucket."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 2, "s{}")
        (a, names_a), (b, names_b) = sorted(groups.items())
        for name in names_a + names_b:
            conn.execute("SELECT cronbox.schedule(%s, '0 0 1 1 *', overlap => 'allow')", (name,))
        conn.execute("DELETE FROM cronbox.job_future")
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
                     " SELECT j.job_id, now() - interval '1 minute', now() - interval '1 minute', j.priority,"
                     " 'schedule', j.bucket, j.queue FROM cronbox.job j")
        dispatch = "SELECT dispatched FROM cronbox.dispatch(100, p_bucket => %s)"
        assert conn.execute(dispatch, (a,)).fetchone()[0] + conn.execute(dispatch, (b,)).fetchone()[0] == 4
        runs = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run'")]
        got = conn.execute("SELECT state FROM cronbox.complete_runs(%s)", (runs,)).fetchall()
        assert got == [("succeeded",)] * 4, got
        rows = conn.execute("SELECT c.bucket, array_agg(DISTINCT j.bucket) FROM cronbox.job_stat_change c"
                            " CROSS JOIN LATERAL unnest(c.job_ids) AS u(job_id)"
                            " JOIN cronbox.job j ON j.job_id = u.job_id GROUP BY c.change_id, c.bucket").fetchall()
        assert sorted(rows) == sorted([(a, [a]), (b, [b])] * 2), rows  # a dispatch and a finish per bucket
        conn.execute(DISTRIBUTE_JOBS)
        conn.execute(DISTRIBUTE_STAT_CHANGES)

        def stats() -> dict:
            return {r[0]: r[1:] for r in conn.execute(
                "SELECT j.name, s.active_runs, s.last_run_state, s.last_success_at IS NOT NULL"
                " FROM cronbox.job_stat s JOIN cronbox.job j ON j.bucket = s.bucket AND j.job_id = s.job_id")}

        before = stats()
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.fold_job_stats(100, %s)", (a,)).fetchone()[0] == 2
        conn.execute("RESET citus.multi_task_query_log_level")
        after = stats()
        assert {n: after[n] for n in names_a} == {n: (0, "succeeded", True) for n in names_a}, after
        assert {n: after[n] for n in names_b} == {n: before[n] for n in names_b}, after
        conn.execute("SET citus.multi_task_query_log_level = error")
        assert conn.execute("SELECT cronbox.fold_job_stats(100)").fetchone()[0] == 2  # bucket by bucket
        conn.execute("RESET citus.multi_task_query_log_level")
        assert stats() == {n: (0, "succeeded", True) for n in names_a + names_b}
        assert conn.execute("SELECT count(*) FROM cronbox.job_stat_change").fetchone()[0] == 0

        conn.execute("SELECT pg_catalog.create_distributed_function('cronbox.fold_job_stats(integer, integer)',"
                     " 'p_bucket', colocate_with => 'cronbox.job_stat_change')")
        port = node_port(conn, "cronbox.job_stat_change", b)
        plan = explain(conn, "SELECT cronbox.fold_job_stats(100, %s)", (b,))
        assert "Task Count: 1" in plan and f"port={port}" in plan, plan
        # delegated: a change row of the bucket folded on its node
        conn.execute("INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state, ok,"
                     " failures, crashes, missed, success_at, bucket) SELECT ARRAY[j.job_id], '{0}', '{NULL}', '{-1}',"
                     " '{NULL}', '{0}', '{0}', '{0}', '{3}', now(), j.bucket FROM cronbox.job j WHERE j.name = %s",
                     (names_b[0],))
        assert conn.execute("SELECT cronbox.fold_job_stats(100, %s)", (b,)).fetchone()[0] == 1
        assert conn.execute("SELECT s.missed_count FROM cronbox.job_stat s JOIN cronbox.job j"
                            " ON j.bucket = s.bucket AND j.job_id = s.job_id WHERE j.name = %s",
                            (names_b[0],)).fetchone()[0] == 3


@both_forms
def test_citus_a_finish_frees_queue_slots_and_pool_units_and_notifies_a_failed_job_s_recipients_one_task_per_statement(citus_clone, form):
    """complete_run and fail_run on jobs, futures and the outbox distributed by bucket, the queue
    limits and pools reference tables, with Citus refusing any statement of more than one task:
    a run of a limited queue needing a pool's unit ends, and the fire of another bucket waiting
    for the queue's slot and the one waiting for the pool's unit are released in their bucket
    (the counters written in statements of their own); a failed job with recipients of its own
    (notify) has its run_failed notification copied to them in its bucket."""
    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 2, "q{}")
        (a, [a0, a1]), (b, [b0, b1]) = sorted(groups.items())
        first, slot_b, unit_b, failing = f"{a0}/first", f"{b0}/slot", f"{b1}/unit", f"{a1}/failing"
        conn.execute("SELECT cronbox.set_queue_limit('lq', 1)")
        conn.execute("SELECT cronbox.set_pool('pp', 1)")
        yearly = "'0 0 1 1 *'"
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, queue => 'lq', needs => '{{\"pp\": 1}}', overlap => 'allow')",
                     (first,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, queue => 'lq', overlap => 'allow')", (slot_b,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, needs => '{{\"pp\": 1}}', overlap => 'allow')", (unit_b,))
        conn.execute(f"SELECT cronbox.schedule(%s, {yearly}, overlap => 'allow', max_attempts => 1,"
                     " notify => ARRAY['mailto:ops@example.com'])", (failing,))
        conn.execute("DELETE FROM cronbox.job_future")
        due = ("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue)"
               " SELECT j.job_id, now() - %s * interval '1 minute', now() - %s * interval '1 minute', j.priority,"
               " 'schedule', j.bucket, j.queue FROM cronbox.job j WHERE j.name = %s")
        for n, name in ((3, first), (2, slot_b), (2, unit_b), (1, failing)):
            conn.execute(due, (n, n, name))
        dispatch = "SELECT dispatched FROM cronbox.dispatch(100, p_bucket => %s)"
        assert conn.execute(dispatch, (a,)).fetchone()[0] == 2  # first (slot and unit), failing
        assert conn.execute(dispatch, (b,)).fetchone()[0] == 0  # slot_b: queue full; unit_b: pool empty
        held = dict(conn.execute("SELECT j.name, f.hold FROM cronbox.job_future f JOIN cronbox.job j USING (job_id)").fetchall())
        assert held == {slot_b: "queue_limit", unit_b: "pool"}, held
        runs = dict(conn.execute("SELECT job_name, outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchall())
        distribute_for_finishing(conn, history_policy=True)
        conn.execute("SELECT pg_catalog.create_reference_table('cronbox.pool')")

        use_form(conn, form)
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        assert conn.execute("SELECT cronbox.complete_run(%s)", (runs[first],)).fetchone()[0] == "succeeded"
        assert conn.execute("SELECT cronbox.fail_run(%s, 'boom')", (runs[failing],)).fetchone()[0] == "failed"
        conn.execute("RESET citus.multi_task_query_log_level")
        held = dict(conn.execute("SELECT j.name, f.hold FROM cronbox.job_future f JOIN cronbox.job j"
                                 " ON j.bucket = f.bucket AND j.job_id = f.job_id").fetchall())
        assert held == {slot_b: None, unit_b: None}, held
        assert conn.execute("SELECT running FROM cronbox.queue_limit WHERE queue = 'lq'").fetchone()[0] == 0
        assert conn.execute("SELECT in_use FROM cronbox.pool WHERE name = 'pp'").fetchone()[0] == 0
        notes = conn.execute("SELECT bucket, queue, message ->> 'event' FROM cronbox.outbox WHERE kind = 'notification'"
                             " ORDER BY queue").fetchall()
        assert notes == [(a, "cronbox.mail", "run_failed"), (a, "cronbox.notifications", "run_failed")], notes


# Every hot table distributed as the layer will (the tables above, the history and its
# partitions too), the small shared tables the finishing calls and dispatch lock as reference
# tables; the per-job tables without a bucket column (job_calendar, stakeholder_digest,
# job_change) and the rest stay the coordinator's own.
DISTRIBUTE_HISTORY = """
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT conrelid::regclass AS t, conname FROM pg_catalog.pg_constraint
             WHERE contype = 'f' AND (conrelid = 'cronbox.run'::regclass OR confrelid = 'cronbox.run'::regclass) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', c.t, c.conname);
    END LOOP;
    FOR c IN SELECT conname FROM pg_catalog.pg_constraint
             WHERE contype IN ('p', 'u') AND conrelid = 'cronbox.run'::regclass LOOP
        EXECUTE format('ALTER TABLE cronbox.run DROP CONSTRAINT %I', c.conname);
    END LOOP;
    FOR c IN SELECT i.indexrelid::regclass AS ix FROM pg_catalog.pg_index i
             WHERE i.indrelid = 'cronbox.run'::regclass AND i.indisunique LOOP
        EXECUTE format('DROP INDEX %s', c.ix);
    END LOOP;
    FOR c IN SELECT polname FROM pg_catalog.pg_policy WHERE polrelid = 'cronbox.run'::regclass LOOP
        EXECUTE format('DROP POLICY %I ON cronbox.run', c.polname);
    END LOOP;
END
$$;
CREATE POLICY everyone ON cronbox.run USING (cronbox.caller_reads_all()) WITH CHECK (true);
ALTER TABLE cronbox.run ADD PRIMARY KEY (bucket, run_id);
SELECT pg_catalog.create_distributed_table('cronbox.run', 'bucket', colocate_with => 'cronbox.bucket_shard');
ALTER TABLE cronbox.run_late_report DROP CONSTRAINT run_late_report_pkey;
ALTER TABLE cronbox.run_late_report ADD CONSTRAINT run_late_report_pkey PRIMARY KEY (bucket, run_id);
SELECT pg_catalog.create_distributed_table('cronbox.run_late_report', 'bucket', colocate_with => 'cronbox.bucket_shard');
SELECT pg_catalog.create_reference_table('cronbox.pool');
"""


# The calls that find a job by name (schedule, trigger, unschedule, pause, ...), each statement in
# the job's bucket (cronbox.job_bucket(name)), planned with that bucket bound.
NAMED_PLANS = """
ALTER FUNCTION cronbox.lock_job_named(text, integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.lock_job_id(bigint, integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.find_jobs_named(text[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.fold_job_stats_of(bigint[], integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.add_job_rows(bigint[], integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.trigger_at(text, jsonb, text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.lock_job(text) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.add_dependency_at(text, text, interval, interval, text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.remove_dependency_at(text, text, text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.find_dependency_cycle(bigint, bigint[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.backfill_at(text, timestamptz, timestamptz, text, integer, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.rerun_at(bigint, text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.withdraw_early_runs(bigint, text, timestamptz, integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.pause_at(text, text, boolean, timestamptz, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.unschedule_at(text, text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION cronbox.schedule_at(text, text, interval, timestamptz, jsonb, text, text, integer, text, text, integer,
    interval, interval, interval, text, interval, interval, timestamptz, timestamptz, text[], text, text, integer, text,
    jsonb, text, interval, text[], timestamptz) SET plan_cache_mode = force_custom_plan;
"""


def distribute_everything(conn: psycopg.Connection) -> None:
    """The clone with every hot table distributed by bucket (jobs, saturation state, statistics,
    futures, backfill requests, outbox, history, the statistics' change log) and the
    dependencies, after-job edges, queue limits and pools as reference tables, every hot
    function planned with its bucket bound."""
    for sql in (DISTRIBUTE_JOBS, SATURATION_PLANS, STORE_PLANS, DISTRIBUTE_BACKFILL, DISTRIBUTE_OUTBOX, FINISH_PLANS,
                DISTRIBUTE_STAT_CHANGES, DISTRIBUTE_HISTORY, NAMED_PLANS):
        conn.execute(sql)
    conn.execute("DROP POLICY job_calendar_read ON cronbox.job_calendar")
    conn.execute("DROP POLICY job_calendar_write ON cronbox.job_calendar")
    conn.execute("CREATE POLICY job_calendar_read ON cronbox.job_calendar FOR SELECT USING (cronbox.caller_reads_all())")
    conn.execute("CREATE POLICY job_calendar_write ON cronbox.job_calendar FOR ALL USING (cronbox.caller_writes_all())"
                 " WITH CHECK (cronbox.caller_writes_all())")


async def test_citus_inventory_a_flow_with_every_hot_table_distributed(citus_clone):
    """INVENTORY (docs/citus.md, "Not yet"): a representative flow on a clone with every hot
    table distributed by bucket (distribute_everything) and Citus refusing any statement of more
    than one task, step by step, each step its own transaction: which steps work, which fail
    and with what. The steps that work are asserted to work and their effect checked; the steps
    that fail are asserted to fail with the error recorded in docs/citus.md, so a change that
    makes one work (or breaks one) shows here."""
    from poller.saturate import saturate_pass

    with db.connect(citus_clone) as conn:
        groups = _names_in_buckets(conn, 2, 3, "i{}")
        (a, [a0, a1, a2]), (b, [b0, b1, _]) = sorted(groups.items())
        plain, retried, up, after, later = f"{a0}/plain", f"{a1}/retried", f"{a2}/up", f"{b0}/after", f"{b1}/later"
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute', overlap => 'allow')", (plain,))
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute', overlap => 'allow', max_attempts => 2)", (retried,))
        conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (up,))
        conn.execute("SELECT cronbox.schedule(%s, after => ARRAY[%s])", (after, up))
        distribute_everything(conn)

    got: dict[str, object] = {}
    with db.connect(citus_clone) as conn:
        conn.autocommit = True
        conn.execute("SET citus.multi_task_query_log_level = error")

        def failure(exc: psycopg.Error) -> str:
            where = [line for line in (exc.diag.context or "").splitlines() if line.startswith("PL/pgSQL function")]
            return f"{str(exc).splitlines()[0]} [{where[0] if where else 'the statement'}]"

        def step(name: str, sql: str, args: tuple = ()) -> object:
            """Runs a step under the single-task rule; a step refused is run again without it
            (its effect is needed by the steps after it) and both outcomes recorded."""
            try:
                rows = conn.execute(sql, args).fetchall()
                got[name] = "ok"
                return rows
            except psycopg.Error as exc:
                got[name] = failure(exc)
            conn.execute("RESET citus.multi_task_query_log_level")
            try:
                rows = conn.execute(sql, args).fetchall()
                got[name] += " | over several tasks: ok"
                return rows
            except psycopg.Error as exc:
                got[name] += " | over several tasks: " + failure(exc)
                return None
            finally:
                conn.execute("SET citus.multi_task_query_log_level = error")

        aconn = await psycopg.AsyncConnection.connect(citus_clone, autocommit=True)
        try:
            await aconn.execute("SET citus.multi_task_query_log_level = error")
            for bucket in (a, b):
                try:
                    await saturate_pass(aconn, batch=100, horizon=timedelta(minutes=2), grace=timedelta(seconds=30),
                                        bucket=bucket)
                    got[f"saturate {'ab'[bucket != a]}"] = "ok"
                except psycopg.Error as exc:
                    got[f"saturate {'ab'[bucket != a]}"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        finally:
            await aconn.close()
        # the internal bodies, whose errors keep their statement's context
        step("schedule", "SELECT cronbox.schedule_at(%s, every => '1 minute')", (later,))
        step("trigger", "SELECT cronbox.trigger_at(%s)", (plain,))
        soon = "now() + interval '3 minutes'"
        for bucket, tag in ((a, "a"), (b, "b")):
            step(f"dispatch {tag}", f"SELECT * FROM cronbox.dispatch_at(100, NULL, NULL, %s, {soon})", (bucket,))
        claimed = step("claim_runs", f"SELECT run_id, job FROM cronbox.claim_runs_at('default', 'w1', 20, true, {soon})") or []
        runs: dict[str, list[int]] = {}
        for run_id, job in claimed:
            runs.setdefault(job, []).append(run_id)
        if plain in runs:
            step("complete_runs", "SELECT * FROM cronbox.complete_runs(%s)", (runs[plain],))
            step("complete_run (late)", "SELECT cronbox.complete_run(%s, '{\"again\": 1}')", (runs[plain][0],))
        if retried in runs:
            step("fail_run (retry)", "SELECT cronbox.fail_run(%s, 'boom')", (runs[retried][0],))
        if up in runs:
            step("complete_run (upstream, after-job in another bucket)", "SELECT cronbox.complete_run(%s)", (runs[up][0],))
        step("fold_job_stats", "SELECT cronbox.fold_job_stats(1000)")
        for bucket, tag in ((a, "a"), (b, "b")):
            step(f"reap_lost {tag}", "SELECT cronbox.reap_lost(100, %s)", (bucket,))
            step(f"release_holds {tag}", "SELECT cronbox.release_holds(100, %s)", (bucket,))
        # a job's definition changed, paused, resumed and removed, by name
        step("schedule (update)", "SELECT cronbox.schedule_at(%s, every => '2 minutes', overlap => 'allow')", (later,))
        step("pause", "SELECT cronbox.pause_at(%s)", (later,))
        step("resume", "SELECT cronbox.resume(%s)", (later,))
        # dependencies across buckets, a backfill, a rerun
        step("schedule (after)", "SELECT cronbox.schedule_at(%s, after => ARRAY[%s])", (f"{later}2", plain))
        step("add_dependency", "SELECT cronbox.add_dependency_at(%s, %s)", (later, plain))
        # a cycle across buckets refused with its path (plain waiting for later, which waits for plain)
        step("add_dependency (cycle)", "SELECT cronbox.add_dependency_at(%s, %s)", (plain, later))
        removed = step("remove_dependency", "SELECT cronbox.remove_dependency_at(%s, %s)", (later, plain))
        assert removed == [(True,)], removed
        step("backfill", f"SELECT cronbox.backfill_at(%s, now(), {soon}, p_now => {soon})", (plain,))
        if plain in runs:
            step("rerun", "SELECT cronbox.rerun_at(%s)", (runs[plain][0],))
        step("unschedule", "SELECT cronbox.unschedule_at(%s)", (later,))
        step("runs view", "SELECT count(*) FROM cronbox.runs")
        step("schedules view", "SELECT count(*) FROM cronbox.schedules")
        conn.execute("RESET citus.multi_task_query_log_level")
        state = {
            "history": sorted(conn.execute("SELECT job_name, state FROM cronbox.run").fetchall()),
            "late": conn.execute("SELECT job, late_report ->> 'report' FROM cronbox.runs WHERE late_report IS NOT NULL").fetchall(),
            "statuses": sorted(conn.execute("SELECT name, status FROM cronbox.schedules").fetchall()),
            "later": conn.execute("SELECT count(*) FROM cronbox.job WHERE name = %s", (later,)).fetchone()[0],
            "futures": sorted(conn.execute("SELECT j.name, f.origin FROM cronbox.job_future f JOIN cronbox.job j"
                                           " ON j.bucket = f.bucket AND j.job_id = f.job_id").fetchall()),
        }
    print("INVENTORY")
    for k, v in got.items():
        print(f"  {k}: {v}")
    print("STATE", state)
    # What fails, and where (docs/citus.md, "Not yet": the same list with the reasons).
    expected = {
        "saturate a": "ok", "saturate b": "ok",
        "schedule": "ok", "trigger": "ok",
        "dispatch a": "ok", "dispatch b": "ok",
        "claim_runs": "ok",
        "complete_runs": "ok", "fail_run (retry)": "ok",
        "complete_run (upstream, after-job in another bucket)": "ok",
        "fold_job_stats": "ok",
        "reap_lost a": "ok", "release_holds a": "ok", "reap_lost b": "ok", "release_holds b": "ok",
        "schedule (update)": "ok", "pause": "ok", "resume": "ok", "unschedule": "ok",
        "complete_run (late)": "ok", "backfill": "ok", "rerun": "ok", "add_dependency": "ok", "schedule (after)": "ok",
        # found across buckets; the cycle's names then read over every bucket (the error path)
        "add_dependency (cycle)": "multi-task query about to be executed [PL/pgSQL function cronbox.find_dependency_cycle(", "remove_dependency": "ok",
        # over every bucket: several tasks (refused under the rule), read without it
        "runs view": "several tasks", "schedules view": "several tasks",
    }
    assert set(got) == set(expected), got
    several = "multi-task query about to be executed [the statement] | over several tasks: ok"
    assert all(got[k] == v if v == "ok" else got[k] == several if v == "several tasks" else got[k].startswith(v)
               for k, v in expected.items()), got
    # and what the steps did: saturation made each bucket's futures, dispatch made their runs
    # (up's second fire skipped: overlap 'skip'; plain's manual fire dispatched by trigger), the
    # claim took them, the finishing calls wrote their history, a retry of the failed run and the
    # after-job's fire in the other bucket; the job made, changed, paused, resumed and removed by
    # name is gone
    assert state["later"] == 0, state
    assert state["late"] == [(plain, "succeeded")], state
    assert state["statuses"] == sorted([(plain, "active"), (retried, "active"), (up, "active"), (after, "waiting"),
                                        (f"{later}2", "waiting")]), state
    assert sorted(runs) == sorted([plain, retried, up]), runs
    assert set(state["history"]) == {(plain, "succeeded"), (retried, "failed"), (up, "skipped"), (up, "succeeded")}, state
    assert set(state["futures"]) == {(retried, "retry"), (after, "dependency")}, state
