"""bench.tally_ab: the console's run tally (cronbox.tally_runs, the poller's maintenance) of this
tree against an older commit's, in one database, calls interleaved.

    python -m bench.tally_ab REV [--schedules 100000] [--runs 20000] [--rounds 3] [--json FILE]

One private durable cluster, migrated from this tree; `--schedules` schedules of bench.scale's
mix. Per round and version: the history emptied, `--runs` finished runs of as many distinct jobs
written two minutes ago (the tally's input, as bench.maintenance), the tally's mark before them,
REV's `cronbox.tally_runs_at` (its function file, `git show REV:...`) or this tree's put in place,
then one `cronbox.tally_runs(--runs)` timed (wall, ms), the two versions alternating which goes
first. Reports each call and the medians; every call must count every run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.common import REPO, Database, base_report, emit, log, parse_args
from bench.scale import insert_schedules

FILE = "sql/functions/internal/tally_runs_at.sql"
RUNS = ("INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, finished_at) "
        "SELECT cronbox.run_id_at(now() - interval '2 minutes') + k, j.job_id, j.name, 'default', "
        "now() - interval '2 minutes', now() - interval '2 minutes', 'succeeded', now() - interval '2 minutes' "
        "FROM (SELECT job_id, name, row_number() OVER (ORDER BY job_id) AS k FROM cronbox.job) j WHERE j.k <= %s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the run tally of this tree against REV's, interleaved")
    p.add_argument("rev")
    p.add_argument("--schedules", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    args = parse_args(p, argv)
    texts = {"old": subprocess.run(["git", "show", f"{args.rev}:{FILE}"], cwd=REPO, check=True,
                                   capture_output=True, text=True).stdout,
             "new": (REPO / FILE).read_text()}
    with Database(args, "tally_ab") as database:
        report: dict[str, Any] = base_report("tally_ab", args, database, argv)
        report["insert"] = insert_schedules(database, args.schedules, min(10, args.schedules))
        report["calls"] = []
        with database.connect() as conn:
            for r in range(args.rounds):
                for version in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    conn.execute(texts[version])
                    conn.execute("DELETE FROM cronbox.run")
                    conn.execute("DELETE FROM cronbox.run_minute")
                    conn.execute(RUNS, (args.runs,))
                    conn.execute("UPDATE cronbox.run_tally_mark SET next_run_id = cronbox.run_id_at(now() - interval '3 minutes')")
                    conn.execute("VACUUM ANALYZE cronbox.run")
                    t0 = time.perf_counter()
                    conn.execute("SELECT cronbox.tally_runs(%s)", (args.runs,))
                    ms = round(1000 * (time.perf_counter() - t0), 1)
                    counted = conn.execute("SELECT coalesce(sum(succeeded), 0) FROM cronbox.run_minute").fetchone()[0]
                    assert counted == args.runs, (version, counted)
                    report["calls"].append({"round": r + 1, "version": version, "ms": ms})
                    log(f"round {r + 1} {version}: {ms} ms")
            conn.execute(texts["new"])
    med = {v: statistics.median(c["ms"] for c in report["calls"] if c["version"] == v) for v in ("old", "new")}
    report["median_ms"] = med
    emit(args, report, [f"tally_ab: {args.schedules} schedules, {args.runs} runs to tally, {args.rounds} rounds: "
                        f"{args.rev} {med['old']} ms, this tree {med['new']} ms (median per call)"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
