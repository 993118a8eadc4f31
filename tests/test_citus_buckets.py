"""The buckets of the job and the bucket leases on a Citus coordinator with two worker nodes
(docs/citus.md): `cronbox migrate --citus --buckets B`, one bucket per shard, a job's bucket from
its group, run ids carrying their bucket, and pollers/relays sharing the buckets with no leader,
tested with real processes killed and started. Marker `citus`, except the refusals on plain
PostgreSQL, which run in the default suite."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.buckets import BucketLeases
from cronbox.citus import SHARD_VALUES, check_bucket_count
from cronbox.migrate import MigrateError, migrate

from .conftest import REPO, Server, cli_migrate, with_db
from .procs import wait_until

on_citus = pytest.mark.citus
LEASE = 2.0  # seconds: the processes below renew every 0.67 s


def one_line_refusal(done: subprocess.CompletedProcess[str], *words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and done.stdout == "", done
    assert len(lines) == 1 and all(w in lines[0] for w in words), done.stderr


def test_migrate_refuses_a_bad_bucket_count_before_writing_anything(pg: Server):
    dsn = pg.create_db("cronbox_bad_buckets")
    try:
        for args in (("--citus", "--buckets", "3"), ("--citus", "--buckets", "1e3"), ("--buckets", "32")):
            one_line_refusal(cli_migrate(dsn, *args), "--buckets")
        with db.connect(dsn) as conn:
            assert conn.execute("SELECT to_regnamespace('cronbox')").fetchone()[0] is None
    finally:
        pg.drop_db("cronbox_bad_buckets")
    for bad in (0, -4, 6, 2048, True, 32.0):
        with pytest.raises(MigrateError, match="^--buckets: must be a power of two from 1 to 1,024"):
            check_bucket_count(bad)
    assert [check_bucket_count(b) for b in (1, 2, 32, 1024)] == [1, 2, 32, 1024]


def test_plain_postgresql_has_no_citus_layer(conn):
    if conn.execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus'").fetchone():
        pytest.skip("a Citus session's database is migrated with --citus: the layer is there by design")
    assert conn.execute("SELECT to_regclass('cronbox.bucket'), to_regclass('cronbox.bucket_lease'),"
                        " to_regclass('cronbox.citus_version'), to_regprocedure('cronbox.bucket_of(text)'),"
                        " to_regprocedure('cronbox.run_bucket(bigint)')").fetchone() == (None,) * 5


def test_jobs_have_no_triggers_and_their_rows_come_from_the_functions_that_write_them(conn):
    """Citus distributes no table with triggers (docs/citus.md): no cronbox table has one, and
    schedule()/unschedule() make and remove a job's saturation state, statistics, owner's
    count and name-search row themselves."""
    assert conn.execute("SELECT array_agg(tgrelid::regclass) FROM pg_catalog.pg_trigger"
                        " WHERE tgrelid::regclass::text LIKE 'cronbox.%' AND NOT tgisinternal").fetchone()[0] is None
    conn.execute("SELECT cronbox.set_quota(current_user, max_schedules => 10)")
    job_id = conn.execute("SELECT cronbox.schedule('t/rows', every => interval '1 hour')").fetchone()[0]
    conn.execute("SELECT cronbox.sync_schedule_names()")
    counts = "SELECT (SELECT count(*) FROM cronbox.job_fire WHERE job_id = %(j)s), " \
             "(SELECT count(*) FROM cronbox.job_stat WHERE job_id = %(j)s), " \
             "(SELECT count(*) FROM cronbox.job_name_search WHERE job_id = %(j)s), " \
             "(SELECT schedules FROM cronbox.owner_quota WHERE owner = current_user)"
    assert conn.execute(counts, {"j": job_id}).fetchone() == (1, 1, 1, 1)
    assert conn.execute("SELECT cronbox.add_job_rows(ARRAY[%s::bigint])", (job_id,)).fetchone()[0] == 0  # idempotent
    assert conn.execute(counts, {"j": job_id}).fetchone() == (1, 1, 1, 1)
    assert conn.execute("SELECT cronbox.unschedule('t/rows')").fetchone()[0] is True
    assert conn.execute(counts, {"j": job_id}).fetchone() == (0, 0, 0, 0)


@on_citus
def test_citus_buckets_one_per_shard_and_a_job_in_its_group_s_bucket(citus_db):
    dsn, _ = citus_db
    with db.connect(dsn) as conn:
        rows = conn.execute("SELECT b.bucket_index, b.bucket, pg_catalog.get_shard_id_for_distribution_column("
                            "'cronbox.bucket_shard', b.bucket) FROM cronbox.bucket b ORDER BY 1").fetchall()
        assert [r[0] for r in rows] == list(range(32)) and len({r[2] for r in rows}) == 32
        # each shard of the colocation group holds exactly its bucket's row
        counts = conn.execute("SELECT result FROM pg_catalog.run_command_on_shards('cronbox.bucket_shard',"
                              " 'SELECT count(*) || '':'' || min(bucket) FROM %s')").fetchall()
        assert sorted(int(c[0].split(":")[1]) for c in counts) == sorted(r[1] for r in rows)
        assert {c[0].split(":")[0] for c in counts} == {"1"}
        nodes = Counter(r[0] for r in conn.execute("SELECT node FROM cronbox.buckets"))
        assert len(nodes) == 2 and sum(nodes.values()) == 32, nodes
        with conn.transaction(force_rollback=True):  # what an operator's reader role sees
            conn.execute("SET LOCAL ROLE cronbox_reader")
            assert conn.execute("SELECT count(node), count(DISTINCT node), cronbox.bucket_of('etl')"
                                " FROM cronbox.buckets").fetchone()[:2] == (32, 2)

        of = conn.execute("SELECT cronbox.bucket_of('etl/extract'), cronbox.bucket_of('etl/load'),"
                          " cronbox.bucket_of('etl'), cronbox.bucket_of('')").fetchone()
        assert of[0] == of[1] == of[2] and of[3] in {r[1] for r in rows}
        spread = Counter(r[0] for r in conn.execute(
            "SELECT cronbox.bucket_of('job-' || g) FROM generate_series(1, 3200) g"))
        assert set(spread) == {r[1] for r in rows} and max(spread.values()) < 3 * min(spread.values()), spread
        assert conn.execute("SELECT cronbox.bucket_of(repeat('x', 1000000))").fetchone()[0] in spread
        # the same answer on the worker nodes (their copy of cronbox.bucket), where delegated calls run
        there = conn.execute("SELECT success, result FROM pg_catalog.run_command_on_workers("
                             "'SELECT cronbox.bucket_of(''etl/extract'')')").fetchall()
        assert there == [(True, str(of[0]))] * 2, there
        with pytest.raises(psycopg.errors.NullValueNotAllowed, match="^name: must not be NULL"):
            conn.execute("SELECT cronbox.bucket_of(NULL)")


@on_citus
def test_citus_bucket_count_cannot_change_once_made(citus, citus_db):
    dsn, _ = citus_db
    one_line_refusal(cli_migrate(citus.dsn(), "--citus", "--buckets", "64"), "already has 32 buckets")
    same = cli_migrate(citus.dsn(), "--citus", "--buckets", "32")
    assert same.returncode == 0 and "32 buckets" in same.stdout, same
    with db.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM cronbox.bucket").fetchone() == (32,)


@on_citus
def test_citus_1024_shards_get_a_bucket_value_each(citus_db):
    """The largest bucket count: the query that picks the values, on a scratch table of 1,024 shards."""
    dsn, _ = citus_db
    with db.connect(dsn) as conn:
        conn.execute("DROP SCHEMA IF EXISTS citus_many CASCADE")
        conn.execute("CREATE SCHEMA citus_many")
        conn.execute("CREATE TABLE citus_many.t (bucket integer PRIMARY KEY)")
        conn.execute("SELECT create_distributed_table('citus_many.t', 'bucket', shard_count => 1024,"
                     " colocate_with => 'none')")
        rows = conn.execute(f"SELECT v.*, pg_catalog.get_shard_id_for_distribution_column('citus_many.t', v.bucket)"
                            f" FROM ({SHARD_VALUES}) v ORDER BY 1", {"table": "citus_many.t"}).fetchall()
        assert [r[0] for r in rows] == list(range(1024))
        assert len({r[1] for r in rows}) == len({r[4] for r in rows}) == 1024
        conn.execute("DROP SCHEMA citus_many CASCADE")


@on_citus
def test_citus_run_ids_carry_their_bucket_and_their_time(citus_db):
    dsn, _ = citus_db
    with db.connect(dsn) as conn:
        index, bucket = conn.execute("SELECT bucket_index, bucket FROM cronbox.bucket WHERE bucket_index = 31").fetchone()
        ids = [r[0] for r in conn.execute("SELECT cronbox.new_bucket_run_id(%s) FROM generate_series(1, 1024)", (index,))]
        assert len(set(ids)) == 1024  # any 1,024 draws differ, however many fall in one millisecond
        later = conn.execute("SELECT cronbox.new_bucket_run_id(%s)", (index,)).fetchone()[0]
        assert later > max(ids)
        assert conn.execute(
            "WITH d AS (SELECT cronbox.new_bucket_run_id(%s) AS id) SELECT cronbox.run_bucket(d.id),"
            " cronbox.run_id_time(d.id) BETWEEN now() - interval '1 ms' AND clock_timestamp(),"
            " d.id >= cronbox.run_id_at(now()) FROM d", (index,)).fetchone() == (bucket, True, True)
        plain = conn.execute("SELECT cronbox.new_run_id()").fetchone()[0]  # today's ids, unchanged
        assert plain >> 20 >= later >> 20
        # drawn on each worker node too (where a delegated dispatch will run), from its own sequence
        drawn = conn.execute("SELECT success, result FROM pg_catalog.run_command_on_workers("
                             "format('SELECT cronbox.new_bucket_run_id(%%s)', %s::integer))", (index,)).fetchall()
        assert len(drawn) == 2 and all(ok and (int(r) >> 10) & 1023 == index for ok, r in drawn), drawn


# Jobs in six groups (an after-job in its upstream's group), through the paths that write a
# job's rows: saturation (futures, a missed run), dispatch, a success (history, the after-job's
# future), failures (retries, a run_failed notification), a manual fire.
BUCKET_JOBS = ("alpha/a", "beta/b", "gamma/c", "delta/d", "epsilon/e", "zeta")
# every row of these jobs in every hot table, and those whose bucket is not their job's:
# (table, rows, wrong); the session's database has other tests' jobs too
BUCKET_CHECK = """
WITH rows AS (
    SELECT 'job' AS t, j.name, j.bucket FROM cronbox.job j
    UNION ALL SELECT 'job_fire', j.name, x.bucket FROM cronbox.job_fire x JOIN cronbox.job j USING (job_id)
    UNION ALL SELECT 'job_stat', j.name, x.bucket FROM cronbox.job_stat x JOIN cronbox.job j USING (job_id)
    UNION ALL SELECT 'job_future', j.name, x.bucket FROM cronbox.job_future x JOIN cronbox.job j USING (job_id)
    UNION ALL SELECT 'outbox:' || x.kind, coalesce(x.job_name, x.message ->> 'job'), x.bucket FROM cronbox.outbox x
    UNION ALL SELECT 'run:' || x.state, x.job_name, x.bucket FROM cronbox.run x
)
SELECT r.t, count(*), count(*) FILTER (WHERE r.bucket <> cronbox.bucket_of(r.name)) FROM rows r
WHERE r.name = ANY (%s) GROUP BY r.t ORDER BY r.t
"""


@on_citus
def test_citus_every_row_of_a_job_carries_the_job_s_bucket(citus_db):
    """A job's bucket is its group's (cronbox.bucket_of), and every row made for it (saturation
    state, statistics, futures, the run in flight, history, its notifications) copies it: the
    value the hot tables are distributed by (docs/citus.md)."""
    from .runs_support import T0, at
    from .schedhelp import saturate

    dsn, _ = citus_db
    names = [*BUCKET_JOBS, "alpha/after"]

    async def flow() -> list[tuple[str, int, int]]:  # before the first dispatch, and at the end
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with conn.transaction(force_rollback=True):
                q = conn.execute
                for name in BUCKET_JOBS:
                    await q("SELECT cronbox.schedule_at(%s, every => interval '1 hour', max_attempts => 2,"
                            " p_now => %s)", (name, T0 - timedelta(days=1)))
                await q("SELECT cronbox.schedule_at('alpha/after', after => ARRAY['alpha/a'], p_now => %s)",
                        (T0 - timedelta(days=1),))
                await saturate(conn, at(0))  # every job due by then (other tests' too, rolled back)
                saturated = await (await q(BUCKET_CHECK, (names,))).fetchall()
                await q("SELECT * FROM cronbox.dispatch_at(1000, p_now => %s)", (at(0),))
                ids = dict(await (await q("SELECT job_name, outbox_id FROM cronbox.outbox"
                                          " WHERE kind = 'run' AND job_name = ANY (%s)", (names,))).fetchall())
                assert set(ids) == set(BUCKET_JOBS), ids
                await q("SELECT cronbox.complete_run_at(%s, NULL, %s)", (ids["alpha/a"], at(1)))
                for name in BUCKET_JOBS[1:]:
                    await q("SELECT cronbox.fail_run_at(%s, 'boom', true, %s)", (ids[name], at(1)))
                await q("SELECT * FROM cronbox.dispatch_at(1000, p_now => %s)", (at(60),))  # the retries
                retried = await (await q("SELECT job_name, outbox_id FROM cronbox.outbox"
                                         " WHERE kind = 'run' AND attempt = 2 AND job_name = ANY (%s)",
                                         (names,))).fetchall()
                assert {n for n, _ in retried} == set(BUCKET_JOBS[1:]), retried
                for _, run_id in retried:
                    await q("SELECT cronbox.fail_run_at(%s, 'boom again', true, %s)", (run_id, at(61)))
                await q("SELECT cronbox.trigger_at('zeta', p_now => %s)", (at(62),))
                buckets = await (await q("SELECT count(DISTINCT bucket) FROM cronbox.job WHERE name = ANY (%s)",
                                         (names,))).fetchone()
                assert buckets[0] >= 3  # six groups over 32 buckets: not all in one
                return saturated + await (await q(BUCKET_CHECK, (names,))).fetchall()

    found: dict[str, tuple[int, int]] = {}
    for t, n, wrong in asyncio.run(flow()):
        was = found.get(t, (0, 0))
        found[t] = (was[0] + n, was[1] + wrong)
    assert {t for t, (n, _) in found.items() if n} >= {
        "job", "job_fire", "job_stat", "job_future", "outbox:run", "outbox:notification",
        "run:missed", "run:succeeded", "run:failed"}, found
    assert all(wrong == 0 for _, wrong in found.values()), found


@on_citus
def test_citus_bucket_leases_share_expire_and_release_at_fixed_times(citus_db):
    """cronbox.lease_buckets_at at chosen times, in a transaction rolled back: an hour ahead,
    every earlier lease has run out."""
    dsn, _ = citus_db
    with db.connect(dsn) as conn, conn.transaction(force_rollback=True):
        t0 = conn.execute("SELECT now() + interval '1 hour'").fetchone()[0]

        def lease(owner: str, seconds: float, kind: str = "poller") -> tuple:
            return conn.execute("SELECT buckets, members, share FROM cronbox.lease_buckets_at(%s, %s, '10 s',"
                                " %s::timestamptz + make_interval(secs => %s))", (kind, owner, t0, seconds)).fetchone()

        assert lease("a", 0) == (sorted(r[0] for r in conn.execute("SELECT bucket FROM cronbox.bucket")), 1, 32)
        assert lease("b", 1)[0] == []  # all held: b waits for a to give up half
        assert len(lease("a", 2)[0]) == 16
        assert len(lease("b", 3)[0]) == 16
        c = lease("c", 4)
        assert c[1:] == (3, 10)
        for who, at in (("a", 5), ("b", 6), ("c", 7)):
            lease(who, at)
        held = {w: lease(w, 8)[0] for w in ("a", "b", "c")}
        assert sorted(len(h) for h in held.values()) == [10, 11, 11]
        assert sorted(sum(held.values(), [])) == sorted(r[0] for r in conn.execute("SELECT bucket FROM cronbox.bucket"))
        assert lease("a", 8, kind="relay")[2] == 32  # the relays' leases are a set of their own
        # c stops renewing: at 18 s its lease (from 8 s) has run out; a and b, renewing, take its buckets
        assert [len(lease(w, 13)[0]) for w in ("a", "b")] == [11, 11]
        after = {w: lease(w, 18.5)[0] for w in ("a", "b")}
        assert set(held["c"]) <= set(after["a"]) | set(after["b"])
        assert sorted(len(h) for h in after.values()) == [16, 16]
        # a clean stop gives the buckets up at once
        assert conn.execute("SELECT cronbox.release_buckets('poller', 'a')").fetchone() == (16,)
        assert len(lease("b", 19)[0]) == 32


@on_citus
def test_citus_bucket_lease_arguments_are_checked_and_granted_to_processes_only(citus_db):
    dsn, _ = citus_db
    with db.connect(dsn) as conn:
        for args, error in [
            (("pollers", "a", "10 s"), "^kind: must be one of poller, relay"),
            ((None, "a", "10 s"), "^kind: must not be NULL"),
            (("poller", None, "10 s"), "^owner: must not be NULL"),
            (("poller", "", "10 s"), "^owner: must be 1 to 200"),
            (("poller", "x" * 201, "10 s"), "^owner: must be 1 to 200"),
            (("poller", "a\nb", "10 s"), "^owner: must be 1 to 200"),
            (("poller", "a", "0.5 s"), "^lease: must be between"),
            (("poller", "a", "2 hours"), "^lease: must be between"),
            (("poller", "a", None), "^lease: must not be NULL"),
        ]:
            with pytest.raises((psycopg.errors.InvalidParameterValue, psycopg.errors.NullValueNotAllowed),
                               match=error), conn.transaction():
                conn.execute("SELECT cronbox.lease_buckets(%s, %s, %s::interval)", args)
        assert conn.execute("SELECT count(*) FROM cronbox.bucket_member WHERE owner = 'a'").fetchone() == (0,)
        for role, allowed in (("cronbox_process", True), ("cronbox_worker", False), ("cronbox_admin", False)):
            assert conn.execute("SELECT has_function_privilege(%s, 'cronbox.lease_buckets(text, text, interval)',"
                                " 'EXECUTE')", (role,)).fetchone() == (allowed,)


@on_citus
def test_citus_bucket_leases_python_side_holds_nothing_once_the_granted_lease_ran_out(citus_db, monkeypatch):
    """BucketLeases.held(): the buckets of the last renewal while the lease the database granted
    lasts, counted on the monotonic clock (moved forward here instead of waiting)."""
    dsn, _ = citus_db

    async def scenario() -> None:
        async with await db.aconnect(dsn) as conn:
            leases = BucketLeases("relay", "python-side", lease=5)
            lease = await leases.renew(conn)
            assert lease.buckets and leases.held() == lease.buckets and 0 < lease.valid_for <= 5
            assert (lease.members, lease.share) == (1, 32)
            real = time.monotonic
            monkeypatch.setattr("cronbox.buckets.time.monotonic", lambda: real() + 5)
            assert leases.held() == ()
            assert await leases.release(conn) == len(lease.buckets)

    asyncio.run(scenario())


def holder(dsn: str, kind: str, owner: str, tmp: Path) -> subprocess.Popen:
    out = open(tmp / f"{owner}.log", "wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.Popen([sys.executable, "-m", "tests.bucket_holder", dsn, kind, owner, str(LEASE)],
                            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


@on_citus
def test_citus_processes_share_the_buckets_take_a_killed_one_s_and_make_room_for_a_newcomer(citus_db, tmp_path):
    dsn, _ = citus_db

    def holders(kind: str = "poller") -> dict[str, list[int]]:
        with db.connect(dsn) as conn:
            rows = conn.execute("SELECT l.owner, array_agg(l.bucket ORDER BY l.bucket) FROM cronbox.bucket_lease l"
                                " JOIN cronbox.bucket_member m ON m.kind = l.kind AND m.owner = l.owner"
                                " WHERE l.kind = %s AND m.alive_until >= clock_timestamp() GROUP BY 1", (kind,)).fetchall()
        return dict(rows)

    def even(owners: set[str], kind: str = "poller") -> dict[str, list[int]] | None:
        now = holders(kind)
        counts = sorted(len(b) for b in now.values())
        return now if set(now) == owners and sum(counts) == 32 and counts[-1] - counts[0] <= 1 else None

    procs = {o: holder(dsn, "poller", o, tmp_path) for o in ("p1", "p2", "p3")}
    procs["r1"] = holder(dsn, "relay", "r1", tmp_path)
    try:
        wait_until(lambda: even({"p1", "p2", "p3"}), timeout=60, what="three pollers holding 11, 11 and 10 buckets")
        wait_until(lambda: even({"r1"}, "relay"), timeout=30, what="the relay holding all the relay leases")

        with db.connect(dsn) as conn:
            procs["p2"].send_signal(signal.SIGKILL)
            procs["p2"].wait()
            killed_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
            dead, dead_until = conn.execute(
                "SELECT array_agg(l.bucket), max(m.alive_until) FROM cronbox.bucket_lease l JOIN cronbox.bucket_member m"
                " USING (kind, owner) WHERE l.kind = 'poller' AND l.owner = 'p2'").fetchone()
        wait_until(lambda: even({"p1", "p3"}), timeout=60, what="p1 and p3 taking the killed p2's buckets")
        with db.connect(dsn) as conn:
            # taken only once p2's lease had run out, never while it might still work them
            granted = conn.execute("SELECT min(held_since), max(held_since) FROM cronbox.bucket_lease"
                                   " WHERE kind = 'poller' AND bucket = ANY (%s)", (dead,)).fetchone()
        assert len(dead) >= 10 and granted[0] >= dead_until, (dead, granted, dead_until)
        print(f"p2 killed: its buckets free at +{(dead_until - killed_at).total_seconds():.2f} s, "
              f"all taken by +{(granted[1] - killed_at).total_seconds():.2f} s (lease {LEASE} s)")

        with db.connect(dsn) as conn:
            procs["p4"] = holder(dsn, "poller", "p4", tmp_path)
            started_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
            shares = wait_until(lambda: even({"p1", "p3", "p4"}), timeout=60, what="the newcomer p4 getting its share")
            joined = conn.execute("SELECT min(joined_at) FROM cronbox.bucket_member WHERE owner = 'p4'").fetchone()[0]
            settled = conn.execute("SELECT max(held_since) FROM cronbox.bucket_lease WHERE owner = 'p4'").fetchone()[0]
        assert len(shares["p4"]) >= 10
        print(f"p4 started: first call at +{(joined - started_at).total_seconds():.2f} s, holding its share "
              f"at +{(settled - started_at).total_seconds():.2f} s (lease {LEASE} s)")
        procs["p1"].send_signal(signal.SIGTERM)  # a clean stop releases at once
        assert procs["p1"].wait(timeout=30) == 0
        wait_until(lambda: even({"p3", "p4"}), timeout=60, what="p3 and p4 taking the released buckets")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@on_citus
def test_citus_jobs_made_before_the_buckets_are_found_by_name_in_bucket_0(citus):
    """A database migrated on plain PostgreSQL first, its jobs all in bucket 0, then with
    `--citus`: the buckets are made, the jobs stay where they are while they are the
    coordinator's own, and every call that finds a job by name (schedule again, trigger, pause,
    resume, unschedule) finds each of them there (cronbox.job_bucket), none made twice."""
    from cronbox.citus import migrate_citus

    name = "upgraded_before_buckets"
    nodes = [node.dsn() for node in citus.nodes]
    for dsn in nodes:
        with db.connect(dsn) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        with db.connect(with_db(dsn, name, empty_search_path=False)) as conn:
            conn.execute("CREATE EXTENSION citus")
    target = with_db(citus.dsn(), name)
    try:
        with db.connect(target) as conn:
            conn.execute("SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', %s)", (citus.coordinator.port,))
            for node in citus.workers:
                conn.execute("SELECT pg_catalog.citus_add_node('127.0.0.1', %s)", (node.port,))
        migrate(target)
        names = [f"old{i}/job" for i in range(8)]
        with db.connect(target) as conn:
            ids = {n: conn.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (n,)).fetchone()[0] for n in names}
        migrate_citus(target)
        with db.connect(target) as conn:
            elsewhere = [n for n in names if conn.execute("SELECT cronbox.bucket_of(%s)", (n,)).fetchone()[0] != 0]
            assert elsewhere, "every name's bucket is 0: pick other names"
            assert conn.execute("SELECT count(*) FROM cronbox.job WHERE bucket <> 0").fetchone()[0] == 0
            for n in elsewhere:
                assert conn.execute("SELECT cronbox.schedule(%s, every => '2 hours')", (n,)).fetchone()[0] == ids[n]
                conn.execute("SELECT cronbox.trigger(%s)", (n,))
                assert conn.execute("SELECT cronbox.pause(%s)", (n,)).fetchone()[0] is True
                assert conn.execute("SELECT cronbox.resume(%s)", (n,)).fetchone()[0] is True
            assert conn.execute("SELECT count(*), count(DISTINCT name) FROM cronbox.job").fetchone() == (8, 8)
            assert conn.execute("SELECT count(*) FROM cronbox.job WHERE every = interval '2 hours'"
                                " AND bucket = 0").fetchone()[0] == len(elsewhere)
            manual = conn.execute("SELECT count(*) FROM cronbox.runs WHERE origin = 'manual'").fetchone()[0]
            assert manual == len(elsewhere), manual
            for n in elsewhere:
                assert conn.execute("SELECT cronbox.unschedule(%s)", (n,)).fetchone()[0] is True
            assert conn.execute("SELECT count(*) FROM cronbox.job").fetchone()[0] == 8 - len(elsewhere)
            # a new job goes into its name's bucket
            new = next(f"new{i}/job" for i in range(64)
                       if conn.execute("SELECT cronbox.bucket_of(%s)", (f"new{i}/job",)).fetchone()[0] != 0)
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (new,))
            assert conn.execute("SELECT bucket = cronbox.bucket_of(name) FROM cronbox.job WHERE name = %s",
                                (new,)).fetchone()[0] is True
    finally:
        for dsn in nodes:
            with db.connect(dsn) as conn:
                conn.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        for dsn in reversed(nodes):
            with db.connect(dsn) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
