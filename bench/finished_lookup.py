"""bench.finished_lookup: what cronbox.record_finished costs a dispatch batch among many
schedules' futures, this tree's function against an older commit's, calls interleaved.

    python -m bench.finished_lookup REV [--schedules 1000000] [--finished 10] [--calls 20]
        [--looked-empty TABLE] [--json FILE]

One private cluster, one database: N every-minute schedules with one scheduled future each (as
saturation leaves them), and 1,000 one-off jobs whose fire was handled (finished, no future
left). REV's record_finished is installed beside this tree's under another name. Each call
passes a batch of 1,000 jobs, --finished of them finished (their 'finished' change logged by
the first call, so later calls only look), the two versions alternating; reports per version
the median call time and the rows of job_future one call read (index entries and sequential
scan rows, from the statistics of the call's own transaction).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common import REPO, emit, log, machine
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster

FILE = "sql/functions/internal/record_finished.sql"


def rows_read(conn: psycopg.Connection, sql: str, params: tuple) -> int:
    """Rows of job_future one call read: its index entries read and its rows read by sequential
    scans, as the statistics of the call's own transaction count them (rolled back)."""
    with conn.transaction():
        conn.execute(sql, params)
        (read,) = conn.execute(
            "SELECT pg_catalog.pg_stat_get_xact_tuples_returned('cronbox.job_future'::regclass)"
            "     + coalesce((SELECT sum(pg_catalog.pg_stat_get_xact_tuples_returned(i.indexrelid))"
            "                 FROM pg_catalog.pg_index i WHERE i.indrelid = 'cronbox.job_future'::regclass), 0)"
        ).fetchone()
        raise psycopg.Rollback()
    return int(read)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="the older commit (its record_finished)")
    p.add_argument("--schedules", type=int, default=1_000_000)
    p.add_argument("--finished", type=int, default=10, help="finished jobs in each batch of 1,000")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--looked-empty", choices=("job", "job_future", "job_fire"), action="append", default=[],
                   help="statistics saying this table is empty (as before autoanalyze after a bulk load)")
    p.add_argument("--json", dest="json_out", type=Path)
    args = p.parse_args(argv)
    old = subprocess.run(["git", "show", f"{args.rev}:{FILE}"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.replace("cronbox.record_finished(", "cronbox.record_finished_old(")
    report: dict[str, Any] = {"bench": "finished_lookup", "command": "python -m bench.finished_lookup " + " ".join(argv or sys.argv[1:]),
                              "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "rev": args.rev,
                              "schedules": args.schedules, "finished": args.finished, "calls": args.calls,
                              "looked_empty": args.looked_empty}
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="cronbox-bench-finished-")) / "pg")
    try:
        cluster.init()
        dsn = cluster.start()
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(old)
            t = time.monotonic()
            c.execute("INSERT INTO cronbox.job (name, kind, every, anchor) SELECT 'every-' || i, 'every', "
                      "interval '1 minute', now() FROM generate_series(1, %s) i", (args.schedules,))
            c.execute("INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) SELECT 'done-' || i, 'at', "
                      "now(), now(), 'allow' FROM generate_series(1, 1000) i")
            c.execute("SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job))")
            c.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) SELECT job_id, now() + interval '1 hour', "
                      "now() + interval '1 hour' FROM cronbox.job WHERE kind = 'every'")
            c.execute("VACUUM ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_fire, cronbox.job_future")
            for table in args.looked_empty:
                c.execute("UPDATE pg_catalog.pg_class SET reltuples = 0, relpages = 1 WHERE oid = %s::regclass",
                          (f"cronbox.{table}",))
            log(f"setup: {args.schedules} schedules' futures in {time.monotonic() - t:.0f} s")
            done = [r[0] for r in c.execute("SELECT job_id FROM cronbox.job WHERE kind = 'at' ORDER BY job_id")]
            busy = [r[0] for r in c.execute("SELECT job_id FROM cronbox.job WHERE kind = 'every' ORDER BY random() LIMIT %s",
                                            (1000 - args.finished,))]
            batch = sorted(done[:args.finished] + busy)
            fns = {"new": "cronbox.record_finished", "old": "cronbox.record_finished_old"}
            times: dict[str, list[float]] = {v: [] for v in fns}
            for k in range(args.calls):
                for v in (("new", "old") if k % 2 == 0 else ("old", "new")):
                    t = time.perf_counter()
                    c.execute(f"SELECT {fns[v]}(%s::bigint[], now())", (batch,))
                    times[v].append(time.perf_counter() - t)
            report["ms_per_call"] = {v: round(1e3 * statistics.median(x[2:]), 2) for v, x in times.items()}
            report["job_future_rows_read"] = {v: rows_read(c, f"SELECT {fn}(%s::bigint[], now())", (batch,))
                                              for v, fn in fns.items()}
            report["load"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        cluster.stop()
    summary = [f"finished_lookup: {args.schedules} schedules' futures, batches of 1,000 with {args.finished} finished: "
               f"ms per call {report['ms_per_call']}, job_future rows read {report['job_future_rows_read']}"]
    emit(args, report, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
