"""Run from the repository root: python bench/results/2026-11-29-citus-fold/release_ab.py.
A/B of release_queue_slots and release_pool_units on plain PostgreSQL: this tree's against the
functions as they were before 3776a9b (renamed *_old), one database, a limited queue with 200 fires held on it and a
pool with 200 waiting fires; each call frees one slot/unit (one fire released) and is rolled back."""
import statistics, subprocess, tempfile, time, sys
from pathlib import Path
import psycopg
REPO = str(Path(__file__).resolve().parents[3])
sys.path.insert(0, REPO)
from cronbox.pgcluster import Cluster
from cronbox.migrate import migrate
from bench.report_cpu import backend_cpu

def old(name):
    src = subprocess.run(["git", "show", f"3776a9b~1:sql/functions/internal/{name}.sql"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return src.split("COMMENT ON FUNCTION")[0].replace(f"cronbox.{name}(", f"cronbox.{name}_old(")
folder = Path(tempfile.mkdtemp(prefix="release-ab-"))
cl = Cluster(folder / "pg"); cl.init(); dsn = cl.start()
try:
    migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(old("release_queue_slots")); c.execute(old("release_pool_units"))
        c.execute("SELECT cronbox.set_queue_limit('lq', 1000)"); c.execute("SELECT cronbox.set_pool('pp', 1000)")
        c.execute("UPDATE cronbox.queue_limit SET running = 1000"); c.execute("UPDATE cronbox.pool SET in_use = 1000")
        c.execute("SELECT cronbox.schedule('j' || i, '0 0 1 1 *', queue => 'lq', needs => '{\"pp\": 1}') FROM generate_series(1, 200) i")
        c.execute("DELETE FROM cronbox.job_future")
        c.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, bucket, queue, hold, hold_queue, held_since, hold_until)"
                  " SELECT j.job_id, now(), now(), 0, 'schedule', 0, 'lq', CASE WHEN j.job_id % 2 = 0 THEN 'queue_limit' ELSE 'pool' END,"
                  " CASE WHEN j.job_id % 2 = 0 THEN 'lq' ELSE 'pp' END, now(), 'infinity' FROM cronbox.job j")
        c.execute("VACUUM ANALYZE")
    calls = {"walks": "SELECT cronbox.bucket_walks{}('cronbox.job_future')","queue": "SELECT cronbox.release_queue_slots{}(ARRAY['lq'], ARRAY[1::bigint], now())",
             "pool": "SELECT cronbox.release_pool_units{}(ARRAY['pp'], ARRAY[1::bigint], now())"}
    res = {}
    with psycopg.connect(dsn) as c:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]; c.rollback()
        for r in range(400):
            for kind, sql in calls.items():
                for v in (("new", "old") if r % 2 else ("old", "new")):
                    t0 = time.perf_counter()
                    c.execute(sql.format("" if v == "new" or kind == "walks" else "_old"))
                    res.setdefault((kind, v), []).append((time.perf_counter() - t0) * 1e6)
                    c.rollback()
    for k, xs in sorted(res.items()):
        print(k, "median us", round(statistics.median(xs[20:]), 1))
finally:
    cl.stop()
