"""The relay on Citus shares the buckets with the other relays through bucket leases
(docs/citus.md, "No leader"): two `cronbox relay` processes hold disjoint shares adding up to
B, each claims only from its own buckets, every run is delivered; SIGKILL one mid-flight and the
other takes all B within one lease and one third and delivers every run still (at least once:
copies only of what the killed one had claimed and not acked); SIGTERM releases at once.
Marker `citus`: a clone of the session's template migrated with `cronbox migrate --citus`."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from aiohttp import web

from cronbox import db
from relay.sinks import Report, Row

from .conftest import CitusServer, Server
from .procs import Proc, wait_until
from .relay_support import ThreadedWorker, enqueue

RELAY_ENV = {
    "CRONBOX_RELAY_LEASE": "3s",
    "CRONBOX_HTTP_TIMEOUT": "2s",
    "CRONBOX_RELAY_BACKOFF": "50ms",
    "CRONBOX_RELAY_BACKOFF_MAX": "200ms",
    "CRONBOX_RELAY_MAX_ATTEMPTS": "1000",
    "CRONBOX_RELAY_BATCH": "5",
}
JOBS, RUNS = 24, 5  # per wave: 24 jobs in different groups, so spread over the buckets


def slow_answer(seconds: float):
    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        await asyncio.sleep(seconds)  # keeps sends in flight
        return web.Response(status=202)
    return answer


def wave(dsn: str, name: str) -> list[int]:
    with db.connect(dsn) as conn:
        return [r for j in range(JOBS) for r in enqueue(conn, RUNS, job=f"{name}-{j}/leased")]


def undelivered(dsn: str) -> int:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM cronbox.outbox WHERE delivered_at IS NULL").fetchone()[0]


def claims_outside_held(dsn: str) -> list[tuple]:
    """Rows under a live relay lease whose bucket that relay does not hold."""
    with db.connect(dsn) as conn:
        return conn.execute(
            "SELECT o.lease_owner, o.bucket FROM cronbox.outbox o WHERE o.lease_until > clock_timestamp()"
            " AND o.delivered_at IS NULL AND NOT EXISTS (SELECT 1 FROM cronbox.bucket_lease l"
            " WHERE l.kind = 'relay' AND l.owner = o.lease_owner AND l.bucket = o.bucket)").fetchall()


@pytest.mark.citus
def test_citus_relays_share_the_buckets_and_a_killed_one_s_are_taken_with_every_run_delivered(
        bucket_leases, fresh_dsn: str, tmp_path):
    leases = bucket_leases("relay")
    dsn, total, env = fresh_dsn, leases.total, {**leases.env, **RELAY_ENV}
    with ThreadedWorker(slow_answer(0.5)) as worker, \
            Proc("relay", dsn, tmp_path, CRONBOX_SINKS=f"*={worker.url}", **env) as a, \
            Proc("relay", dsn, tmp_path, CRONBOX_SINKS=f"*={worker.url}", **env) as b:
        a_owner, b_owner = leases.owner(a), leases.owner(b)
        both = wait_until(lambda: leases.shared_by({a_owner, b_owner}), timeout=60,
                          what="the two relays holding even, disjoint shares of the buckets")
        runs = wave(dsn, "first")
        with db.connect(dsn) as conn:
            spread = conn.execute("SELECT count(DISTINCT bucket) FROM cronbox.outbox").fetchone()[0]
        assert spread >= total // 2, spread  # rows in both relays' buckets
        outside: list[tuple] = []

        def drained() -> bool:
            outside.extend(claims_outside_held(dsn))
            return undelivered(dsn) == 0
        wait_until(drained, timeout=120, what="the first wave delivered")
        assert outside == [], outside  # each relay claimed only from the buckets it holds
        assert leases.shared_by({a_owner, b_owner}) == both  # no bucket changed hands

        # SIGKILL b with runs in flight: a takes every bucket once b's lease has run out
        second = wave(dsn, "second")
        runs += second
        keys = {f"{r}:1" for r in second}
        wait_until(lambda: sum(k in keys for k in worker.keys()) >= 10, what="the second wave in flight")
        b.kill()
        b_until = leases.alive_until(b_owner)
        with db.connect(dsn) as conn:
            killed_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
            # what b had claimed and not acked: the only runs that may be delivered twice
            b_unacked = {r[0] for r in conn.execute("SELECT run_id FROM cronbox.outbox WHERE lease_owner = %s"
                                                    " AND delivered_at IS NULL", (b_owner,))}
        assert b_unacked, "the kill landed after b had settled all its rows: the test did not exercise a crash"
        wait_until(lambda: leases.shared_by({a_owner}), timeout=60, what="a holding all the buckets")
        taken = leases.taken(both[b_owner])
        # never before b's lease ran out; within about one lease and one third of the kill
        # (a renews every third of its lease; a second of slack for the shared machine)
        assert taken[0] >= b_until, (taken, b_until)
        assert (taken[1] - killed_at).total_seconds() <= leases.lease * 4 / 3 + 1.0, (taken, killed_at)
        print(f"b killed: its buckets taken by +{(taken[1] - killed_at).total_seconds():.2f} s "
              f"(bucket lease {leases.lease:g} s), {len(b_unacked)} of its rows unacked")
        wait_until(lambda: undelivered(dsn) == 0, timeout=120, what="every run delivered")

        assert a.terminate() == 0, a.output
        assert leases.holders() == 0  # a clean stop releases its buckets at once
        with db.connect(dsn) as conn:
            states = dict(conn.execute("SELECT state, count(*) FROM cronbox.runs WHERE run_id = ANY (%s)"
                                       " GROUP BY state", (runs,)).fetchall())
    assert states == {"delivered": len(runs)}, states
    copies: dict[int, int] = defaultdict(int)
    for req in worker.received:
        for message in req.messages:
            copies[message["run_id"]] += 1
    assert set(copies) == set(runs)  # none lost
    doubled = {r for r, n in copies.items() if n > 1}
    assert doubled <= b_unacked, doubled - b_unacked  # copies only of what b had claimed and not acked


def test_relay_leases_buckets_only_where_the_citus_layer_is(pg: Server, fresh_dsn: str):
    """On plain PostgreSQL the relay finds no bucket leases and claims over every bucket as
    before; on a database migrated with `--citus` it leases."""
    from cronbox.buckets import leases_buckets  # the relay's look-up, shared with the poller

    async def found() -> bool:
        pool = await db.open_pool(fresh_dsn, min_size=1, max_size=1, name="probe")
        try:
            return await leases_buckets(pool)
        finally:
            await pool.close()

    assert asyncio.run(found()) is isinstance(pg, CitusServer)


def test_a_report_of_rows_of_several_buckets_settles_bucket_by_bucket():
    rows = [Row(i, "q", f"k{i}", "{}", None, 0.0, bucket=b) for i, b in ((1, 7), (2, 9), (3, 7), (4, 9), (5, 11))]
    report = Report(rows)
    assert report.bucket is None
    report.ok += [1, 2]
    report.outcomes += [{"outbox_id": 2, "state": "succeeded"}]
    report.fail([3, 4], "boom", retry_after=1.5)
    report.unsent.append(5)
    parts = {p.bucket: p for p in report.by_bucket()}
    assert set(parts) == {7, 9, 11}
    assert (parts[7].ok, parts[7].failed, parts[7].outcomes, parts[7].unsent) == ([1], [3], [], [])
    assert (parts[9].ok, parts[9].failed, parts[9].retry_after, parts[9].errors) == ([2], [4], [1.5], ["boom"])
    assert parts[9].outcomes == [{"outbox_id": 2, "state": "succeeded"}] and parts[11].unsent == [5]
    same = Report(rows[:1] + rows[2:3])  # one bucket: the report itself
    assert same.bucket == 7 and same.by_bucket() == [same]
