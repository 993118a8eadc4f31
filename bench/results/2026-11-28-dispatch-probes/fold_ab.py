"""Ad hoc: one fold of N one-off jobs' change rows (a push flow's, not folded yet), two texts of
cronbox.apply_job_stat_changes side by side in one database, called alternately (each rolled
back), backend CPU per job. python fold_ab.py N ROUNDS OLD.sql NEW.sql"""
import shutil, sys, tempfile, time, statistics
from pathlib import Path
import psycopg
sys.path.insert(0, '.')  # run from the repository's root
from bench.database import DURABLE_SETTINGS
from bench.stage_ab import load
from bench.common import cpu_seconds
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster
n = int(sys.argv[1]); rounds = int(sys.argv[2])
OLD, NEW = sys.argv[3], sys.argv[4]  # the two texts of apply_job_stat_changes.sql
files = {'old': open(OLD).read(), 'new': open(NEW).read()}
folder = Path(tempfile.mkdtemp(prefix="wp-foldab-"))
cluster = Cluster(folder / "pg", settings=DURABLE_SETTINGS)
try:
    cluster.init(); dsn = cluster.start(); migrate(dsn)
    conn = psycopg.connect(dsn, autocommit=True)
    load(conn, n)
    for v, text in files.items():
        conn.execute(text.replace('cronbox.apply_job_stat_changes(', f'cronbox.apply_{v}('))
    # the change rows of a push flow: dispatch, claim, ack (no fold)
    while conn.execute("SELECT dispatched FROM cronbox.dispatch(1000)").fetchone()[0]:
        ids = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.claim_outbox('ab', 1000)")]
        conn.execute("SELECT cronbox.ack_outbox('ab', %s, %s)", (ids, psycopg.types.json.Jsonb([{"outbox_id": i, "state": "succeeded"} for i in ids])))
    print('change rows', conn.execute("SELECT count(*) FROM cronbox.job_stat_change").fetchone())
    jobs = [r[0] for r in conn.execute("SELECT DISTINCT u FROM cronbox.job_stat_change c, unnest(c.job_ids) u ORDER BY 1")]
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    res = {'old': [], 'new': []}; cpu = {'old': 0.0, 'new': 0.0}
    conn.autocommit = False
    for r in range(rounds):
        for v in (('old', 'new') if r % 2 else ('new', 'old')):
            c0 = cpu_seconds(pid); t = time.perf_counter()
            k = conn.execute(f"SELECT cronbox.apply_{v}(NULL, %s)", (jobs,)).fetchone()[0]
            res[v].append(time.perf_counter() - t); cpu[v] += cpu_seconds(pid) - c0
            conn.rollback()
    for v in res:
        print(v, 'jobs', len(jobs), 'median ms', round(1e3*statistics.median(res[v]), 2), 'us/job', round(1e6*statistics.median(res[v])/len(jobs), 2), 'cpu us/job', round(1e6*cpu[v]/rounds/len(jobs), 2))
finally:
    cluster.stop(); shutil.rmtree(folder, ignore_errors=True)
