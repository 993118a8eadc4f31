"""How a process's pool gets its connections back after the server restarted (cronbox.db.Pool):
the first connection that fails its pre-use check drops every idle connection at once (they
are all from before the restart) instead of finding them broken one by one with
psycopg_pool's 1-2-4 s pauses in between; and refill attempts back off from 0.1 s to 0.5 s, not
1 s doubling without a cap. (How fast that makes recovery is measured by bench.chaos, never
asserted here.)"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.pgcluster import FAST_SETTINGS, Cluster, free_port

from .procs import wait_until


@pytest.fixture
def own_cluster():
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-reconnect-"))
    tmp.chmod(0o755)
    cluster = Cluster(tmp / "pg", settings={**FAST_SETTINGS, "port": str(free_port())})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(mode="immediate")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


async def test_after_a_restart_one_failed_check_drops_every_stale_idle_connection(own_cluster):
    pool = await db.open_pool(own_cluster.dsn(), min_size=4, max_size=4, name="test")
    try:
        wait_until(lambda: pool.get_stats()["pool_available"] == 4, 30, "four idle connections")
        own_cluster.stop(mode="immediate")
        own_cluster.start()  # same port
        async with pool.connection() as conn:
            assert (await (await conn.execute("SELECT 1")).fetchone()) == (1,)
        # one stale connection found by its check; the other three dropped with it, not each
        # found broken in turn (psycopg_pool would have waited 0 + 1 + 2 s between them)
        assert pool.get_stats().get("connections_lost", 0) == 1, pool.get_stats()
    finally:
        await pool.close()


async def test_a_trusted_connection_that_finds_the_server_gone_drops_every_stale_idle_connection(own_cluster):
    # trust_for: a connection that worked moments ago is handed out without its check; the
    # statement that finds it broken fails (its caller retries) and drops the other idle ones
    pool = await db.open_pool(own_cluster.dsn(), min_size=4, max_size=4, name="test", trust_for=3600)
    try:
        wait_until(lambda: pool.get_stats()["pool_available"] == 4, 30, "four idle connections")
        async with pool.connection() as a, pool.connection() as b, pool.connection() as c, pool.connection() as d:
            for conn in (a, b, c, d):  # each used once: trusted at its next use
                await conn.execute("SELECT 1")
        own_cluster.stop(mode="immediate")
        own_cluster.start()  # same port
        with pytest.raises(psycopg.OperationalError):
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
        # the three other stale connections went with it: each next one is new and works
        for _ in range(4):
            async with pool.connection() as conn:
                assert (await (await conn.execute("SELECT 1")).fetchone()) == (1,)
        assert pool.get_stats().get("connections_lost", 0) == 0, pool.get_stats()  # none failed a check
    finally:
        await pool.close()


def test_refill_attempts_back_off_from_a_tenth_of_a_second_to_half_a_second():
    attempt = db._PromptAttempt(timeout=3600)
    delays = []
    for now in range(10):
        attempt.update_delay(float(now))
        delays.append(attempt.delay)
    assert 0.09 <= delays[0] <= 0.11 and delays[1] == pytest.approx(2 * delays[0])
    assert all(d <= db.RECONNECT_MAX for d in delays) and max(delays) >= 0.8 * db.RECONNECT_MAX
