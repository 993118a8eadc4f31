"""What logging one-off jobs' 'finished' rows costs per job at dispatch's batch (1,000) and at a
round's (10,000): main's cronbox.record_finished (the read, the probes, the insert) called on
finished jobs with no future left, each call on jobs not logged before, the two sizes
alternating. Run from the worktree: .venv/bin/python bench/results/2026-11-29-push4/finish_batch_cost.py REV"""
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster

rev = sys.argv[1]
old = subprocess.run(["git", "show", f"{rev}:sql/functions/internal/record_finished.sql"], capture_output=True,
                     text=True, check=True).stdout.replace("cronbox.record_finished(", "cronbox.record_finished_old(")
cluster = Cluster(Path(tempfile.mkdtemp(prefix="cronbox-finish-batch-")) / "pg")
cluster.init()
dsn = cluster.start()
try:
    migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(old)
        c.execute("INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) SELECT 'done-' || i, 'at', "
                  "now(), now(), 'allow' FROM generate_series(1, 100000) i")
        c.execute("SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job))")
        c.execute("VACUUM ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_fire, cronbox.job_future, cronbox.job_change")
        ids = [r[0] for r in c.execute("SELECT job_id FROM cronbox.job ORDER BY job_id")]
        pos = 0
        per_job: dict[int, list[float]] = {1000: [], 10000: []}
        for rnd in range(4):
            for size in ((1000, 10000) if rnd % 2 == 0 else (10000, 1000)):
                calls = 10000 // size
                for _ in range(calls):
                    batch = ids[pos:pos + size]
                    pos += size
                    cpu0 = c.execute("SELECT 1").fetchone()
                    t = time.perf_counter()
                    n = c.execute("SELECT cronbox.record_finished_old(%s::bigint[], now())", (batch,)).fetchone()[0]
                    per_job[size].append((time.perf_counter() - t) / size * 1e6)
                    assert n == size, n
        print({size: {"median_us_per_job": round(statistics.median(v), 2), "calls": len(v)} for size, v in per_job.items()})
finally:
    cluster.stop()
