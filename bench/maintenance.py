"""bench/maintenance: each step of the poller's reaper and maintenance rounds, timed with many
schedules: none may grow with the number of schedules (a step that walks every job is a
transaction of many seconds at a million).

N schedules of bench.scale's mix are inserted (`--schedules`), then `--runs` finished runs of
as many distinct jobs, made two minutes ago (the tally's input); then `--rounds` rounds of the
steps, each called once as the poller calls it (its batch size), each timed on its own
(milliseconds, wall). The first round meets the fresh schedules and runs (the name sync's first
batch, the tally's first batch); later rounds what a steady minute leaves.

  python -m bench.maintenance --schedules 1000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from bench.common import Database, base_report, emit, log, parse_args
from bench.scale import insert_schedules
from poller import maintenance as m

STEPS = [
    ("ensure_run_partitions", f"SELECT cronbox.ensure_run_partitions({m.PARTITIONS_AHEAD_DAYS})"),
    ("drop_run_partitions", "SELECT * FROM cronbox.drop_run_partitions('30 days')"),
    ("reconcile_queue_limits", "SELECT cronbox.reconcile_queue_limits()"),
    ("reconcile_pools", "SELECT cronbox.reconcile_pools()"),
    ("sync_schedule_names", f"SELECT cronbox.sync_schedule_names({m.SYNC_BATCH})"),
    ("tally_runs", f"SELECT cronbox.tally_runs({m.TALLY_BATCH})"),
    ("reap_lost", f"SELECT cronbox.reap_lost({m.REAP_BATCH})"),
    ("release_holds", f"SELECT cronbox.release_holds({m.RELEASE_BATCH})"),
    ("fold_job_stats", f"SELECT cronbox.fold_job_stats({m.FOLD_BATCH})"),
    ("resume_paused", f"SELECT cronbox.resume_paused({m.RESUME_BATCH})"),
    ("metrics_gauges", "SELECT * FROM cronbox.metrics_gauges()"),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="each maintenance step's time with many schedules")
    p.add_argument("--schedules", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=100_000, help="finished runs of distinct jobs, not yet tallied")
    p.add_argument("--rounds", type=int, default=3)
    args = parse_args(p, argv)
    n = 2000 if args.quick else args.schedules
    runs = min(n, 1000 if args.quick else args.runs)
    rounds = 1 if args.quick else args.rounds
    with Database(args, "maintenance") as database:
        report: dict[str, Any] = base_report("maintenance", args, database, argv)
        report["insert"] = insert_schedules(database, n, min(10, n))
        with database.connect() as conn:
            conn.execute(
                "INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, finished_at) "
                "SELECT cronbox.run_id_at(now() - interval '2 minutes') + k, j.job_id, j.name, 'default', "
                "now() - interval '2 minutes', now() - interval '2 minutes', 'succeeded', now() - interval '2 minutes' "
                "FROM (SELECT job_id, name, row_number() OVER (ORDER BY job_id) AS k FROM cronbox.job) j "
                "WHERE j.k <= %s", (runs,))
            conn.execute("UPDATE cronbox.run_tally_mark SET next_run_id = cronbox.run_id_at(now() - interval '3 minutes')")
            conn.execute("VACUUM ANALYZE")
            report["rounds"] = []
            for k in range(rounds):
                load = os.getloadavg()[0]
                times: dict[str, float] = {}
                for name, sql in STEPS:
                    t0 = time.monotonic()
                    conn.execute(sql).fetchall()
                    times[name] = round(1000 * (time.monotonic() - t0), 1)
                report["rounds"].append({"load_before": round(load, 2), "ms": times})
                log(f"round {k + 1} (load {load:.2f}): {times}")
    report["schedules"], report["runs"] = n, runs
    report["median_ms"] = {name: statistics.median(r["ms"][name] for r in report["rounds"]) for name, _ in STEPS}
    report["max_ms"] = {name: max(r["ms"][name] for r in report["rounds"]) for name, _ in STEPS}
    emit(args, report, [f"maintenance: {n} schedules, {runs} runs to tally, {rounds} rounds; ms per step "
                        f"(first round, then the median):"]
         + [f"  {name}: {report['rounds'][0]['ms'][name]}, {report['median_ms'][name]}" for name, _ in STEPS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
