"""bench.ahead_ab: early dispatch (cronbox.dispatch_ahead) per 1,000 runs, two versions of one
SQL function file side by side on one durable cluster, interleaved.

    python -m bench.ahead_ab OLD.sql NEW.sql [--jobs 30000] [--rounds 2] [--json FILE] [--quick]

e.g. OLD.sql from `git show REV:sql/functions/internal/dispatch_ahead_at.sql`. N jobs
(`overlap => 'allow'`) each get one future due 50 s ahead (the tables emptied and vacuumed
first; the order of the versions alternates between rounds); each round loads one version
(`psql -f` semantics: the file as it is), then calls `cronbox.dispatch_ahead(1000, '60
seconds')` until nothing is left and times each call. Reports per version and round the median
call and the runs/s over the calls. A diagnostic for a change to the early-dispatch write; the
figure of record for bursts is `bench.scale --burst`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench.database import DURABLE_SETTINGS, copy_fire_state
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster


def load_jobs(conn: psycopg.Connection, n: int) -> None:
    conn.execute("SELECT cronbox.schedule('ab-0', cron => '0 0 1 1 *', overlap => 'allow')")
    cols = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'cronbox.job'::regclass AND attnum > 0 "
        "AND NOT attisdropped AND attname NOT IN ('job_id', 'name') ORDER BY attnum").fetchall()]
    collist = ", ".join(f'"{c}"' for c in cols)
    conn.execute(f"INSERT INTO cronbox.job (name, {collist}) SELECT 'ab-' || i, {collist} "
                 "FROM cronbox.job, generate_series(1, %s) i WHERE name = 'ab-0'", (n - 1,))
    copy_fire_state(conn, "ab-0", "ab-")
    conn.execute("VACUUM ANALYZE")


def one_round(conn: psycopg.Connection, sql: str) -> dict[str, Any]:
    conn.execute(sql)
    conn.execute("DELETE FROM cronbox.outbox")
    conn.execute("DELETE FROM cronbox.run")
    conn.execute("UPDATE cronbox.job_stat SET active_runs = 0")
    conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
                 "SELECT job_id, date_trunc('second', now()) + interval '50 seconds', "
                 "date_trunc('second', now()) + interval '50 seconds' FROM cronbox.job")
    # each version starts from the same tables: no dead rows of the round before
    conn.execute("VACUUM ANALYZE cronbox.outbox, cronbox.run, cronbox.job_stat, cronbox.job_future")
    calls: list[float] = []
    runs = 0
    while True:
        t = time.perf_counter()
        n = conn.execute("SELECT dispatched FROM cronbox.dispatch_ahead(1000, '60 seconds')").fetchone()[0]
        if n == 0:
            break
        calls.append(time.perf_counter() - t)
        runs += n
    return {"runs": runs, "call_ms_median": round(1000 * statistics.median(calls), 1),
            "runs_per_s": round(runs / sum(calls))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--jobs", type=int, default=30_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", type=Path, help="write the report here (default: stdout)")
    p.add_argument("--quick", action="store_true", help="2,000 jobs, one round (the test suite)")
    args = p.parse_args(argv)
    if args.quick:
        args.jobs, args.rounds = 2_000, 1
    files = {"old": args.old.read_text(), "new": args.new.read_text()}
    folder = Path(tempfile.mkdtemp(prefix="cronbox-bench-ahead-ab-"))
    cluster = Cluster(folder / "pg", settings=DURABLE_SETTINGS)
    cluster.init()
    dsn = cluster.start()
    report: dict[str, Any] = {"bench": "ahead_ab", "command": " ".join(sys.argv), "jobs": args.jobs, "rounds": []}
    try:
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            load_jobs(conn, args.jobs)
            for r in range(args.rounds):
                # the order alternates, so neither version always runs second
                for name in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
                    sql = files[name]
                    out = {"round": r + 1, "version": name, **one_round(conn, sql)}
                    print(out, file=sys.stderr)
                    report["rounds"].append(out)
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)  # the private cluster's data: nothing to keep
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"
    if args.json:
        args.json.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
