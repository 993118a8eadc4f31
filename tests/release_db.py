"""A database of a released schema, populated with runs in every state, for upgrade tests.

`python -m tests.release_db` (run from a checkout of the release) starts a private cluster,
migrates a database with that checkout's migrator, fills it through the release's own SQL
functions with what a live installation holds at any moment (messages waiting and leased,
runs delivered and running in push and pull (one started before the relay's ack), finished runs of every kind, a late report, a
dead letter, a notification, retries waiting, statistics not yet folded, a backfill) and writes
its `pg_dump` to tests/releases/<date>-<commit>.sql.gz. tests/test_upgrade.py restores each
dump found there and migrates it with today's code: nothing lost, nothing run twice.

Regenerate (add) a dump whenever a release is cut from main; keep the older ones while an
upgrade from them is supported. The dump is plain SQL (no roles: the cluster-wide cronbox roles
are created by today's migrator in the test's template database first).
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
RELEASES = REPO / "tests" / "releases"

# One job per state the population leaves its runs in; tests/test_upgrade.py names them too.
LONG = "7 days"  # run timeouts (relay leases are at most a day: run out when the dump is restored)


def _enqueue(conn: psycopg.Connection, job: str, queue: str, n: int, **opts: str) -> list[int]:
    """n runs of `job` dispatched by cronbox.dispatch (fires inserted due now); their run ids."""
    extra = "".join(f", {k} => %({k})s::integer" for k in opts)
    job_id = conn.execute(
        "SELECT cronbox.schedule(%(name)s, at => now() + interval '30 days', queue => %(queue)s, "
        f"overlap => 'allow', timeout => %(timeout)s::interval{extra})",
        {"name": job, "queue": queue, "timeout": LONG, **opts}).fetchone()[0]
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) "
        "SELECT j.job_id, j.bucket, date_trunc('second', now()) - g * interval '1 minute', now() - interval '1 second', "
        "'manual' FROM cronbox.job j, generate_series(1, %s) g WHERE j.job_id = %s", (n, job_id))
    conn.execute("SELECT cronbox.dispatch(1000)")
    rows = conn.execute("SELECT run_id FROM cronbox.runs WHERE job_id = %s ORDER BY run_id", (job_id,)).fetchall()
    assert len(rows) == n, (job, rows)
    return [r[0] for r in rows]


def _claim(conn: psycopg.Connection, relay: str, queue: str) -> list[int]:
    rows = conn.execute("SELECT outbox_id FROM cronbox.claim_outbox(%s, 100, '1 day', ARRAY[%s])",
                        (relay, queue)).fetchall()
    return [r[0] for r in rows]


def populate(conn: psycopg.Connection) -> None:
    """Fill a freshly migrated database (as a superuser, autocommit) with runs in every state."""
    # Finished runs first (the lease rescue here would end every run in flight): succeeded with a
    # result, failed with a retry waiting, failed for good, cancelled, lost (its lease ran out;
    # retried), and a late report of a finished run.
    done = _enqueue(conn, "upgrade/finished", "up-finished", 5, max_attempts="2")
    conn.execute("SELECT * FROM cronbox.claim_runs('up-finished', 'kit-pull-2', 5)")
    conn.execute("SELECT cronbox.complete_run(%s, '{\"rows\": 3}'::jsonb)", (done[0],))
    conn.execute("SELECT cronbox.fail_run(%s, 'disk full', true)", (done[1],))
    conn.execute("SELECT cronbox.fail_run(%s, 'bad input', false)", (done[2],))
    conn.execute("SELECT cronbox.cancel(%s)", (done[3],))
    conn.execute("SELECT cronbox.reap_lost_at(1000, p_now => now() + interval '8 days')")
    conn.execute("SELECT cronbox.complete_run(%s, '{\"late\": true}'::jsonb)", (done[0],))
    # Push: messages waiting for a relay, leased by one, acked as delivered (202), then running.
    _enqueue(conn, "upgrade/waiting", "up-waiting", 2)
    _enqueue(conn, "upgrade/leased", "up-leased", 2)
    _claim(conn, "relay-old", "up-leased")
    _enqueue(conn, "upgrade/delivered", "up-delivered", 2)
    conn.execute("SELECT cronbox.ack_outbox('relay-old', %s)", (_claim(conn, "relay-old", "up-delivered"),))
    started = _enqueue(conn, "upgrade/started", "up-started", 1)
    conn.execute("SELECT cronbox.ack_outbox('relay-old', %s)", (_claim(conn, "relay-old", "up-started"),))
    conn.execute("SELECT cronbox.start_run(%s, 'kit-push-1')", (started[0],))
    # A fast worker that started its run before the relay's ack (the message still leased).
    early = _enqueue(conn, "upgrade/started-early", "up-started-early", 1)
    _claim(conn, "relay-old", "up-started-early")
    conn.execute("SELECT cronbox.start_run(%s, 'kit-push-2')", (early[0],))
    # Pull: runs claimed by a worker (running, leased to it), and one left in the queue.
    _enqueue(conn, "upgrade/pulled", "up-pull", 3)
    conn.execute("SELECT * FROM cronbox.claim_runs('up-pull', 'kit-pull-1', 2)")
    # A run answered in the relay's ack (push, succeeded without a second report).
    _enqueue(conn, "upgrade/answered", "up-answered", 1)
    conn.execute("SELECT cronbox.ack_outbox('relay-old', %s, %s::jsonb)",
                 (ids := _claim(conn, "relay-old", "up-answered"),
                  '[{"outbox_id": %d, "state": "succeeded", "result": {"ok": 1}}]' % ids[0]))
    # A message the relay gave up on: a dead letter, its run failed.
    _enqueue(conn, "upgrade/dead", "up-dead", 1)
    conn.execute("SELECT * FROM cronbox.nack_outbox('relay-old', %s, ARRAY['connection refused'], "
                 "ARRAY[true], p_max_attempts => 1)", (_claim(conn, "relay-old", "up-dead"),))
    # A notification waiting in the outbox, a schedule with fires ahead, a backfill requested.
    conn.execute("INSERT INTO cronbox.outbox (queue, kind, message) "
                 "VALUES ('cronbox.notifications', 'notification', '{\"event\": \"upgrade-probe\"}')")
    conn.execute("SELECT cronbox.schedule('upgrade/hourly', cron => '0 * * * *', queue => 'up-hourly')")
    conn.execute("SELECT cronbox.backfill('upgrade/hourly', now() - interval '3 hours', now() - interval '1 hour')")


def dump_release(out_dir: Path = RELEASES) -> Path:
    """Migrate and populate a database on a private cluster with this checkout; write its dump."""
    from cronbox.migrate import migrate
    from cronbox.pgcluster import FAST_SETTINGS, Cluster

    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-release-"))
    tmp.chmod(0o755)
    cluster = Cluster(tmp / "pg", settings=dict(FAST_SETTINGS))
    admin = cluster.start()
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE cronbox_release")
        dsn = cluster.dsn("cronbox_release")
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            populate(conn)
        dump = subprocess.run(
            [str(cluster.bindir / "pg_dump"), "--dbname", dsn],
            capture_output=True, check=True, timeout=300).stdout
    finally:
        cluster.stop(mode="immediate")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{day}-{commit}.sql.gz"
    path.write_bytes(gzip.compress(dump, mtime=0))
    return path


if __name__ == "__main__":
    print(dump_release(Path(sys.argv[1]) if len(sys.argv) > 1 else RELEASES))
