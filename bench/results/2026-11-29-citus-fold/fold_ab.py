"""Run from the repository root: python bench/results/2026-11-29-citus-fold/fold_ab.py.
A/B of apply_job_stat_changes: this tree's (one statement run once) against 0104bc8~1's (two copies), one database,
same change rows, each call rolled back, alternating; backend CPU from /proc and wall time."""
import statistics, subprocess, tempfile, time, sys
from pathlib import Path
import psycopg
REPO = str(Path(__file__).resolve().parents[3])
sys.path.insert(0, REPO)
from cronbox.pgcluster import Cluster
from cronbox.migrate import migrate
from bench.report_cpu import backend_cpu

old = subprocess.run(["git", "show", "0104bc8~1:sql/functions/internal/apply_job_stat_changes.sql"], cwd=REPO,
                     capture_output=True, text=True, check=True).stdout
old = old.split("COMMENT ON FUNCTION")[0].replace("cronbox.apply_job_stat_changes(", "cronbox.apply_job_stat_changes_old(")
folder = Path(tempfile.mkdtemp(prefix="fold-ab-"))
cl = Cluster(folder / "pg")
cl.init(); dsn = cl.start()
try:
    migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(old)
        c.execute("INSERT INTO cronbox.job (name, kind, created_at, updated_at) SELECT 'j' || i, 'at', now(), now() FROM generate_series(1, 20000) i")
        c.execute("SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job))")
        c.execute("""INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state, ok, failures, crashes, missed, success_at, bucket)
            SELECT ids, array_fill(d, ARRAY[1000]), array_fill(CASE WHEN d = 1 THEN now() END, ARRAY[1000]),
                   ARRAY(SELECT u * 10 + k FROM unnest(ids) u), array_fill(CASE WHEN d = 1 THEN 'dispatched' ELSE 'succeeded' END, ARRAY[1000]),
                   array_fill(CASE WHEN d = 1 THEN 0 ELSE 1 END, ARRAY[1000]), array_fill(0, ARRAY[1000]), array_fill(0, ARRAY[1000]),
                   array_fill(0::bigint, ARRAY[1000]), now(), 0
            FROM generate_series(0, 19) b CROSS JOIN LATERAL (SELECT ARRAY(SELECT job_id FROM cronbox.job ORDER BY job_id OFFSET b * 1000 LIMIT 1000) AS ids) x,
                 (VALUES (1, 1), (-1, 2)) v(d, k) ORDER BY b, k""")
        c.execute("VACUUM ANALYZE")
    res = {"new": [], "old": []}
    with psycopg.connect(dsn) as c:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        c.rollback()
        for r in range(12):
            for v in (["new", "old"] if r % 2 == 0 else ["old", "new"]):
                fn = "cronbox.apply_job_stat_changes" if v == "new" else "cronbox.apply_job_stat_changes_old"
                t0 = time.perf_counter(); c0 = backend_cpu(pid)
                n = c.execute(f"SELECT {fn}(NULL, NULL)").fetchone()[0]
                res[v].append(((backend_cpu(pid) - c0) * 1e3, (time.perf_counter() - t0) * 1e3))
                assert n == 20000, n
                c.rollback()
    for v in res:
        print(v, "cpu ms median", statistics.median(x[0] for x in res[v][2:]), "wall ms median", round(statistics.median(x[1] for x in res[v][2:]), 1),
              "cpu all", [round(x[0]) for x in res[v]])
finally:
    cl.stop()
