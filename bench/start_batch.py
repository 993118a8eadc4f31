"""bench.start_batch: what the worker kit's push mode pays to mark a request's runs running, one
`cronbox.start_run` per message (each its own statement and durable commit, as the kit did)
against one `cronbox.start_runs` per request; with `--base REV`, REV's `cronbox.start_runs`
against this tree's, both one call per request (an A/B of a change to it).

    python -m bench.start_batch [--runs 20000] [--batch 100] [--rounds 3] [--base REV] [--json FILE]

One private cluster (durable). Per round, the runs are dispatched (one-off jobs triggered), then
started batch by batch, alternately by the two ways (each on its own runs), over one
connection as the kit's pool gives one: wall time and the backend's CPU per run
(pg_stat_statements is not needed: the backend's /proc stat), medians over the rounds.
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

from bench.common import emit, log, machine
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster

TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    """Seconds of CPU the backend has used (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20_000, help="runs per way and round")
    p.add_argument("--batch", type=int, default=100, help="messages per request (the relay's HTTP batch)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--base", help="a commit: its start_runs (as cronbox.start_runs_base) against this tree's")
    p.add_argument("--json", dest="json_out", type=Path)
    args = p.parse_args(argv)
    other = "base" if args.base else "one_by_one"
    report: dict[str, Any] = {"bench": "start_batch", "command": "python -m bench.start_batch " + " ".join(argv or sys.argv[1:]),
                              "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
                              "runs": args.runs, "batch": args.batch, "rounds": []}
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="cronbox-bench-start-")) / "pg")
    try:
        cluster.init()
        dsn = cluster.start()
        migrate(dsn)
        if args.base:
            old = subprocess.run(["git", "show", f"{args.base}:sql/functions/worker/start_runs.sql"], check=True,
                                 capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent).stdout
            report["base"] = args.base
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute(old.replace("start_runs", "start_runs_base"))  # its name, and its body's qualified names
        with psycopg.connect(dsn, autocommit=True) as c:
            pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
            for r in range(args.rounds):
                c.execute("DELETE FROM cronbox.outbox")
                c.execute("DELETE FROM cronbox.job")
                c.execute("INSERT INTO cronbox.job (name, kind, at, overlap) SELECT 'j' || i, 'at', now() + interval '1 day', "
                          "'allow' FROM generate_series(1, %s) i", (2 * args.runs,))
                c.execute("SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job))")
                c.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) SELECT job_id, now(), now() FROM cronbox.job")
                while c.execute("SELECT dispatched FROM cronbox.dispatch(10000)").fetchone()[0]:
                    pass
                ids = [row[0] for row in c.execute("SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run' ORDER BY 1")]
                c.execute("VACUUM ANALYZE cronbox.outbox")
                batches = [ids[i:i + args.batch] for i in range(0, len(ids), args.batch)]
                spent = {other: [0.0, 0.0], "batched": [0.0, 0.0]}
                for k, batch in enumerate(batches):
                    way = other if (k + r) % 2 == 0 else "batched"
                    t, cpu = time.perf_counter(), backend_cpu(pid)
                    if way == "one_by_one":
                        for run_id in batch:
                            c.execute("SELECT cronbox.start_run(%s, 'w1'), now()", (run_id,)).fetchone()
                    else:
                        fn = "start_runs_base" if way == "base" else "start_runs"
                        c.execute(f"SELECT s.deadline, s.code, s.error, now() FROM cronbox.{fn}(%s, 'w1') s",
                                  (batch,)).fetchall()
                    spent[way][0] += time.perf_counter() - t
                    spent[way][1] += backend_cpu(pid) - cpu
                started = c.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0]
                n = {way: len(ids) // 2 for way in spent}
                got = {way: {"wall_us_per_run": round(1e6 * w / n[way], 1), "backend_cpu_us_per_run": round(1e6 * u / n[way], 1)}
                       for way, (w, u) in spent.items()}
                got["started"] = started
                report["rounds"].append(got)
                log(f"round {r + 1}: {got}")
            report["load"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        cluster.stop()
    med = {way: {m: statistics.median(rd[way][m] for rd in report["rounds"]) for m in ("wall_us_per_run", "backend_cpu_us_per_run")}
           for way in (other, "batched")}
    report["median"] = med
    first = f"start_runs of {args.base}" if args.base else "start_run one by one"
    summary = [f"start_batch: {args.runs} runs a way x {args.rounds} rounds, batch {args.batch}: "
               f"{first} {med[other]}, start_runs {med['batched']}"]
    emit(args, report, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
