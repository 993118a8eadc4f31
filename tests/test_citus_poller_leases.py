"""The poller on Citus shares the buckets with the other pollers through bucket leases
(docs/citus.md, "No leader"): it dispatches and saturates only the buckets it holds. A lease
holder that does no work keeps its buckets' jobs unsaturated and unfired beside a real poller
that fires its own; two `cronbox poller` processes hold disjoint shares adding up to B and fire
every job of every bucket once; SIGKILL one and the other takes its buckets only once its lease
ran out, no fire lost or doubled; SIGTERM releases them at once. A canary keeps its fires on
time in its bucket while another bucket holds a long catch-up.
Marker `citus`: a clone of the session's template migrated with `cronbox migrate --citus`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from cronbox import db

from .citus_support import LeaseWatch
from .conftest import CitusServer, Server
from .procs import Proc, wait_until

SEC = timedelta(seconds=1)
REPO = Path(__file__).resolve().parent.parent

# every job's fires: dispatched (a run) or pending (a future), by job
FIRES = """
    SELECT j.name, x.fire_at, x.state
    FROM cronbox.job j
    JOIN (SELECT job_id, fire_at, 'pending' AS state FROM cronbox.job_future WHERE origin = 'schedule'
          UNION ALL
          SELECT job_id, fire_at, state FROM cronbox.runs WHERE origin = 'schedule') x USING (job_id)
    WHERE j.name LIKE %s
    ORDER BY j.name, x.fire_at"""
FRONTIERS = "SELECT j.name, f.frontier FROM cronbox.job j JOIN cronbox.job_fire f USING (job_id) WHERE j.name LIKE %s"


def poller_env(leases: LeaseWatch) -> dict[str, str]:
    return {**leases.env, "CRONBOX_HORIZON": "10s"}


def schedule_in_every_bucket(dsn: str, prefix: str, per_bucket: int = 1, **options: str) -> tuple[int, dict[int, list[str]]]:
    """`per_bucket` every-second jobs (overlap allow) in each bucket, named prefix-<group>/job:
    (bucket count, names by bucket)."""
    with db.connect(dsn) as conn:
        buckets = [r[0] for r in conn.execute("SELECT bucket FROM cronbox.bucket")]
        total = len(buckets)
        names: dict[int, list[str]] = {}
        g = 0
        while any(len(names.get(b, [])) < per_bucket for b in buckets):
            name = f"{prefix}{g}/job"
            bucket = conn.execute("SELECT cronbox.bucket_of(%s)", (name,)).fetchone()[0]
            if len(names.setdefault(bucket, [])) < per_bucket:
                names[bucket].append(name)
            g += 1
        extra = "".join(f", {k} => %s" for k in options)
        for of_bucket in names.values():
            for name in of_bucket:
                conn.execute("SELECT cronbox.schedule(%s, every => '1 second', overlap => 'allow'" + extra + ")",
                             (name, *options.values()))
        placed = dict(conn.execute("SELECT name, bucket FROM cronbox.job WHERE name LIKE %s", (prefix + "%",)))
    assert all(placed[n] == b for b, of_bucket in names.items() for n in of_bucket)  # schedule() placed them so
    return total, names


def fires_by_job(dsn: str, prefix: str) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    with db.connect(dsn) as conn:
        for name, fire_at, state in conn.execute(FIRES, (prefix + "%",)):
            out.setdefault(name, []).append((fire_at, state))
    return out


def runs_of(dsn: str, prefix: str) -> dict[str, int]:
    with db.connect(dsn) as conn:
        return dict(conn.execute("SELECT j.name, count(r.*) FROM cronbox.job j LEFT JOIN cronbox.runs r"
                                 " ON r.job_id = j.job_id AND r.origin = 'schedule' WHERE j.name LIKE %s"
                                 " GROUP BY 1", (prefix + "%",)).fetchall())


@pytest.mark.citus
def test_citus_a_poller_saturates_and_dispatches_only_the_buckets_it_holds(bucket_leases, fresh_dsn: str, tmp_path):
    leases = bucket_leases("poller")
    dsn = fresh_dsn
    holder_owner = "poller:holder:1"  # holds its share of the buckets and does no work in them
    log = open(tmp_path / "holder.log", "wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    holder_proc = subprocess.Popen([sys.executable, "-m", "tests.bucket_holder", dsn, "poller", holder_owner,
                                    f"{leases.lease:g}"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: leases.held().get(holder_owner), timeout=30, what="the holder holding buckets")
        total, names = schedule_in_every_bucket(dsn, "own-")
        frontiers = FRONTIERS
        with db.connect(dsn) as conn:
            before = dict(conn.execute(frontiers, ("own-%",)).fetchall())
        assert total == leases.total
        with Proc("poller", dsn, tmp_path, **poller_env(leases)) as a:
            a_owner = leases.owner(a)
            shares = wait_until(lambda: leases.shared_by({a_owner, holder_owner}), timeout=60,
                                what="the poller and the holder holding even, disjoint shares")
            mine = {n for b in shares[a_owner] for n in names[b]}
            others = {n for b in shares[holder_owner] for n in names[b]}
            wait_until(lambda: all(runs_of(dsn, "own-")[n] >= 3 for n in mine), timeout=60,
                       what="every job of the poller's buckets fired three times")
            with db.connect(dsn) as conn:
                after = dict(conn.execute(frontiers, ("own-%",)).fetchall())
                futures = conn.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id)"
                                       " WHERE j.name = ANY (%s)", (sorted(others),)).fetchone()[0]
            counts = runs_of(dsn, "own-")
            assert {n: after[n] for n in others} == {n: before[n] for n in others}  # never saturated
            assert all(after[n] != before[n] for n in mine)
            assert futures == 0 and all(counts[n] == 0 for n in others), counts  # never fired
            assert leases.shared_by({a_owner, holder_owner}) == shares  # no bucket changed hands

            holder_proc.terminate()  # a clean stop: the poller takes every bucket and fires their jobs
            assert holder_proc.wait(20) == 0, (tmp_path / "holder.log").read_text()
            wait_until(lambda: leases.shared_by({a_owner}), timeout=30, what="the poller holding every bucket")
            wait_until(lambda: all(runs_of(dsn, "own-")[n] >= 2 for n in others), timeout=60,
                       what="the released buckets' jobs fired")
            assert a.terminate() == 0, a.output
        assert leases.holders() == 0  # released on SIGTERM
    finally:
        if holder_proc.poll() is None:
            holder_proc.kill()
            holder_proc.wait()
        log.close()


@pytest.mark.citus
def test_citus_two_pollers_share_the_buckets_and_a_killed_one_s_fires_are_neither_lost_nor_doubled(
        bucket_leases, fresh_dsn: str, tmp_path):
    leases = bucket_leases("poller")
    dsn = fresh_dsn
    total, names = schedule_in_every_bucket(dsn, "pair-")
    env = poller_env(leases)
    with Proc("poller", dsn, tmp_path, **env) as a, Proc("poller", dsn, tmp_path, **env) as b:
        a_owner, b_owner = leases.owner(a), leases.owner(b)
        both = wait_until(lambda: leases.shared_by({a_owner, b_owner}), timeout=60,
                          what="the two pollers holding even, disjoint shares of the buckets")
        wait_until(lambda: min(runs_of(dsn, "pair-").values()) >= 3, timeout=60,
                   what="every job of every bucket fired three times")
        assert leases.shared_by({a_owner, b_owner}) == both  # no bucket changed hands

        b.kill()
        with db.connect(dsn) as conn:
            killed_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        b_until = leases.alive_until(b_owner)
        wait_until(lambda: leases.shared_by({a_owner}), timeout=60, what="a holding all the buckets")
        taken = leases.taken(both[b_owner])
        # never before b's lease ran out; within about one lease and one third of the kill
        # (a renews every third of its lease; a second of slack for the shared machine)
        assert taken[0] >= b_until, (taken, b_until)
        assert (taken[1] - killed_at).total_seconds() <= leases.lease * 4 / 3 + 1.0, (taken, killed_at)
        print(f"b killed: its buckets taken by +{(taken[1] - killed_at).total_seconds():.2f} s "
              f"(bucket lease {leases.lease:g} s)")
        b_jobs = {n for bucket in both[b_owner] for n in names[bucket]}
        with db.connect(dsn) as conn:
            since = conn.execute("SELECT clock_timestamp()").fetchone()[0]

        def fired_after_takeover() -> bool:
            with db.connect(dsn) as conn:
                return conn.execute(
                    "SELECT count(DISTINCT j.name) FROM cronbox.runs r JOIN cronbox.job j USING (job_id)"
                    " WHERE j.name = ANY (%s) AND r.fire_at > %s", (sorted(b_jobs), since + 2 * SEC)).fetchone()[0] \
                    == len(b_jobs)
        wait_until(fired_after_takeover, timeout=60, what="b's buckets' jobs firing again, from a")
        assert a.terminate() == 0, a.output
    assert leases.holders() == 0  # released on SIGTERM
    fires = fires_by_job(dsn, "pair-")
    assert len(fires) == total
    for name, got in fires.items():
        times = [t for t, _ in got]
        assert len(times) == len(set(times)), f"{name}: a fire made twice"
        assert all(y - x == SEC for x, y in zip(times, times[1:])), f"{name}: a fire lost in {times}"
        assert {s for _, s in got} <= {"dispatched", "pending"}, (name, got)  # none missed nor skipped
        assert sum(s == "dispatched" for _, s in got) >= 3, name


@pytest.mark.citus
def test_citus_a_canary_keeps_its_fires_on_time_beside_a_long_catch_up_in_another_bucket(
        bucket_leases, fresh_dsn: str, tmp_path):
    leases = bucket_leases("poller")
    dsn = fresh_dsn
    with db.connect(dsn) as conn:
        canary_bucket = conn.execute("SELECT cronbox.bucket_of('canary')").fetchone()[0]
        g = 0
        while conn.execute("SELECT cronbox.bucket_of(%s)", (f"late{g}",)).fetchone()[0] == canary_bucket:
            g += 1
        late = f"late{g}/catchup"
        conn.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
    with Proc("poller", dsn, tmp_path, **poller_env(leases)) as a, \
            Proc("poller", dsn, tmp_path, **poller_env(leases)) as b, db.connect(dsn) as watch:
        wait_until(lambda: leases.shared_by({leases.owner(a), leases.owner(b)}),
                   timeout=60, what="the two pollers sharing the buckets")
        wait_until(lambda: watch.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'canary'").fetchone()[0] >= 3,
                   timeout=60, what="the canary running")
        # a day of every-second fires to catch up, in another bucket (86,400 runs)
        watch.execute("SELECT cronbox.schedule(%s, every => '1 second', starts_at => now() - interval '1 day',"
                      " catchup => 'all', catchup_window => '2 days', queue => 'tenant', overlap => 'allow')", (late,))
        t0 = watch.execute("SELECT now()").fetchone()[0]
        wait_until(lambda: watch.execute("SELECT clock_timestamp() > %s", (t0 + 12 * SEC,)).fetchone()[0],
                   timeout=60, what="12 s of the catch-up")
        caught_up = watch.execute("SELECT count(*) FROM cronbox.runs WHERE job = %s", (late,)).fetchone()[0]
        assert a.terminate() == 0, a.output
        assert b.terminate() == 0, b.output
    with db.connect(dsn) as conn:
        fires = conn.execute(
            "SELECT fire_at, state, extract(epoch FROM dispatched_at - fire_at) FROM cronbox.runs "
            "WHERE job = 'canary' AND fire_at > %s AND fire_at <= %s ORDER BY fire_at", (t0, t0 + 10 * SEC)).fetchall()
    assert caught_up >= 1000, "the catch-up made no progress while the canary was watched"
    assert len(fires) >= 9, fires
    assert all(y[0] - x[0] == SEC for x, y in zip(fires, fires[1:])), "a canary fire is missing"
    assert {state for _, state, _ in fires} <= {"dispatched"}, fires
    lags = sorted(float(lag) for _, _, lag in fires)
    assert lags[-1] < 1.0, f"canary fire -> dispatch lags {lags}"


def test_poller_leases_buckets_only_where_the_citus_layer_is(pg: Server, fresh_dsn: str):
    """On plain PostgreSQL the poller finds no bucket leases and works every bucket in one call
    as before; on a database migrated with `--citus` it leases."""
    from cronbox.buckets import leases_buckets

    async def found() -> bool:
        async with await db.open_pool(fresh_dsn, min_size=1, max_size=1, name="probe") as pool:
            return await leases_buckets(pool)

    assert asyncio.run(found()) is isinstance(pg, CitusServer)


def test_a_tick_over_buckets_gives_each_its_share_then_the_room_left_to_those_it_filled(fresh_dsn: str):
    """A tick over the buckets a poller holds: each bucket its share of the batch first (a backlog
    never keeps another bucket's due fire out), then the full ones the rest; no bucket held, no
    call at all."""
    from cronbox.config import Config
    from poller.tick import tick
    from poller.settings import PollerSettings

    with db.connect(fresh_dsn) as c:
        c.execute("SELECT cronbox.schedule('busy/' || i, every => '1 hour', overlap => 'allow') "
                  "FROM generate_series(1, 30) i")
        c.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, bucket, queue) SELECT job_id, now(), now(),"
                  " bucket, queue FROM cronbox.job")
        bucket = c.execute("SELECT DISTINCT bucket FROM cronbox.job").fetchone()[0]
        empty = c.execute("SELECT max(bucket) + 1 FROM cronbox.job").fetchone()[0]  # no job there

    async def ticks():
        env = {"DATABASE_URL": fresh_dsn, "CRONBOX_DISPATCH_LEAD": "0", "CRONBOX_POLL_INTERVAL": "200ms"}
        cfg, ps = Config.from_env(env), PollerSettings.from_env(env)
        async with await db.open_pool(fresh_dsn, min_size=1, max_size=2) as pool:
            none = await tick(pool, cfg, ps, 10, None, ())
            two = await tick(pool, cfg, ps, 10, None, (bucket, empty))
            return none, two

    none, two = asyncio.run(ticks())
    assert (none.dispatched, none.again, none.sleep) == (0, False, 0.2), none
    assert (two.dispatched, two.full, two.again) == (10, True, True), two  # 5, nothing, then 5 more
    with db.connect(fresh_dsn) as c:
        assert c.execute("SELECT count(*) FROM cronbox.runs WHERE job LIKE 'busy/%'").fetchone()[0] == 10
