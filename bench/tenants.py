"""bench/tenants: how long a bulk pause and resume of one tenant's schedules take while the
poller dispatches them, and what that costs another tenant's canary.

N every-second schedules on queue `bulk` (one owner) and a canary on `canary` fire with the
real poller running (default settings, durable commits). Each repetition waits until the bulk
jobs fire, then times `cronbox.pause_schedules(queue => 'bulk')` and, a few seconds later,
`cronbox.resume_schedules(queue => 'bulk')` (wall time of the call, including waiting for the
jobs' locks a dispatch holds), and checks one change-log row per job. Reports each call's
median/max and the canary's fire -> dispatch lag over the whole run.

  python -m bench.tenants                 # 8,000 schedules, 5 repetitions
  python -m bench.tenants --quick         # 500 schedules, 2 repetitions
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from bench.common import Database, Fleet, base_report, emit, extra_env, log, parse_args, pct, wait_until, workdir
from cronbox import db


def _dispatched_since(dsn: str, t) -> int:
    with db.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM cronbox.runs WHERE queue = 'bulk' AND fire_at > %s "
                         "AND state = 'dispatched'", (t,)).fetchone()[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tenants", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, help="bulk schedules (default 8000; --quick 500)")
    p.add_argument("--reps", type=int, help="pause/resume repetitions (default 5; --quick 2)")
    args = parse_args(p, argv)
    n = args.jobs or (500 if args.quick else 8000)
    reps = args.reps or (2 if args.quick else 5)
    with Database(args, "tenants") as database, workdir("tenants", args.keep) as logs, Fleet(logs) as fleet:
        dsn = database.dsn
        with db.connect(dsn) as c:
            c.execute("SELECT cronbox.schedule('bulk-' || i, every => '1 second', queue => 'bulk', overlap => 'allow') "
                      "FROM generate_series(1, %s) i", (n,))
            c.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
            start = c.execute("SELECT now()").fetchone()[0]
        fleet.cronbox("poller", dsn, extra_env(args))
        events: list[tuple[str, float]] = []  # (what, seconds after the schedules were created)
        pauses: list[float] = []
        resumes: list[float] = []
        for rep in range(reps):
            with db.connect(dsn) as c:
                t = c.execute("SELECT now()").fetchone()[0]
            wait_until(lambda t=t: _dispatched_since(dsn, t) >= n, timeout=120, what="bulk jobs firing")
            fleet.check_alive()
            with db.connect(dsn) as c:
                t0 = time.perf_counter()
                paused = c.execute("SELECT cronbox.pause_schedules(queue => 'bulk', reason => %s)",
                                   (f"bench {rep}",)).fetchone()[0]
                pauses.append(time.perf_counter() - t0)
                events.append((f"paused {rep}", round(float(c.execute(
                    "SELECT extract(epoch FROM clock_timestamp() - %s)", (start,)).fetchone()[0]), 1)))
                changes = c.execute("SELECT count(*) FROM cronbox.schedule_changes WHERE reason = %s",
                                    (f"bench {rep}",)).fetchone()[0]
            assert paused == n and changes == n, (paused, changes)
            time.sleep(2)  # paused for a while: the poller keeps firing the canary
            with db.connect(dsn) as c:
                t0 = time.perf_counter()
                resumed = c.execute("SELECT cronbox.resume_schedules(queue => 'bulk')").fetchone()[0]
                resumes.append(time.perf_counter() - t0)
                events.append((f"resumed {rep}", round(float(c.execute(
                    "SELECT extract(epoch FROM clock_timestamp() - %s)", (start,)).fetchone()[0]), 1)))
            assert resumed == n, resumed
            log(f"rep {rep}: pause {pauses[-1]:.3f}s resume {resumes[-1]:.3f}s")
        with db.connect(dsn) as c:
            rows = c.execute(
                "SELECT extract(epoch FROM dispatched_at - fire_at)::float8, "
                "extract(epoch FROM fire_at - %s)::float8 FROM cronbox.runs "
                "WHERE job = 'canary' AND fire_at > %s AND dispatched_at IS NOT NULL", (start, start)).fetchall()
            lags = [r[0] for r in rows]
        fleet.check_alive()
        report: dict[str, Any] = base_report("tenants", args, database, argv)
        report.update({
            "jobs": n, "reps": reps,
            "pause_s": {"median": round(statistics.median(pauses), 3), "max": round(max(pauses), 3),
                        "all": [round(x, 3) for x in pauses]},
            "resume_s": {"median": round(statistics.median(resumes), 3), "max": round(max(resumes), 3),
                         "all": [round(x, 3) for x in resumes]},
            "canary_dispatch_lag_s": {"p50": pct(lags, 50), "p99": pct(lags, 99), "max": max(lags) if lags else None,
                                      "n": len(lags),
                                      # (seconds after the schedules were created, lag) of fires over 1 s late
                                      "over_1s": [(round(at, 1), round(lag, 2)) for lag, at in rows if lag > 1]},
            "events_s": events,
        })
        emit(args, report, [
            f"{n} schedules, poller running: pause_schedules median {report['pause_s']['median']}s "
            f"(max {report['pause_s']['max']}s), resume_schedules median {report['resume_s']['median']}s "
            f"(max {report['resume_s']['max']}s); canary lag p99 {report['canary_dispatch_lag_s']['p99']}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
