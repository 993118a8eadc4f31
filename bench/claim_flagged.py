"""bench.claim_flagged: what rows flagged claim_at_due (early 'skip' runs, claimable only from
their due time) cost the relay's claim that looks ahead of them, and what the relay's question
"when is the next one due" costs.

    python -m bench.claim_flagged [--rows 100000] [--calls 20] [--json FILE]

One private cluster: N 'skip' jobs whose next fire, due in 5 minutes, is decided early (flagged), and
N 'allow' jobs likewise (held by relays ahead, not flagged), in another queue. Times, with the
clock fixed 1 s before that due time and each call rolled back, medians over --calls:
`claim_outbox_at` of the 'skip' jobs' queue with `p_ahead` 2 s (it stops at the queue's first
flagged row, found in outbox_flagged_idx, and looks at most at its limit of the rows due at that
instant; before migration 0465 it walked every flagged row) against `p_ahead` 0 (no look ahead);
and `cronbox.next_claim_at_due('10 minutes')` (the real clock: the window holds them; one probe
of outbox_flagged_idx a queue). Reports ms per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common import emit, log, machine
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster


def timed(conn: psycopg.Connection, sql: str, params: tuple, calls: int) -> float:
    """Median ms per call, each call rolled back."""
    ms = []
    for _ in range(calls):
        with conn.transaction():
            t = time.perf_counter()
            conn.execute(sql, params).fetchall()
            ms.append(1e3 * (time.perf_counter() - t))
            raise psycopg.Rollback()
    return round(statistics.median(ms), 3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--json", dest="json_out", type=Path)
    args = p.parse_args(argv)
    report: dict[str, Any] = {"bench": "claim_flagged", "command": "python -m bench.claim_flagged " + " ".join(argv or sys.argv[1:]),
                              "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "rows": args.rows}
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="cronbox-bench-flagged-")) / "pg")
    try:
        cluster.init()
        dsn = cluster.start()
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as c:
            (due,) = c.execute("SELECT date_trunc('second', now()) + interval '300 seconds'").fetchone()
            for overlap, queue in (("skip", "skipq"), ("allow", "allowq")):
                c.execute("INSERT INTO cronbox.job (name, kind, every, anchor, overlap, queue) SELECT %s || i, 'every', "
                          "interval '1 day', now(), %s, %s FROM generate_series(1, %s) i", (overlap, overlap, queue, args.rows))
            c.execute("SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job))")
            c.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, queue) SELECT job_id, %s, "
                      "%s, queue "
                      "FROM cronbox.job", (due, due))
            c.execute("VACUUM ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_future")
            t = time.monotonic()
            while c.execute("SELECT dispatched FROM cronbox.dispatch_ahead(10000, '310 seconds')").fetchone()[0]:
                pass
            c.execute("VACUUM ANALYZE cronbox.outbox")
            report["flagged"] = c.execute("SELECT count(*) FILTER (WHERE claim_at_due), count(*) FROM cronbox.outbox").fetchone()
            log(f"setup: {report['flagged']} outbox rows (flagged, all) in {time.monotonic() - t:.0f} s")
            now = c.execute("SELECT %s - interval '1 second'", (due,)).fetchone()[0]
            claim = ("SELECT * FROM cronbox.claim_outbox_at('r1', 500, '30 seconds', ARRAY['skipq'], NULL, %s, "
                     "p_now => %s)")
            report["claim_skip_queue"] = {
                "p_ahead 2 s": timed(c, claim, ("2 seconds", now), args.calls),
                "p_ahead 0": timed(c, claim, ("0", now), args.calls)}
            report["next_claim_at_due"] = timed(c, "SELECT cronbox.next_claim_at_due('10 minutes')", (), args.calls)
            report["load"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        cluster.stop()
    summary = [f"claim_flagged: {args.rows} flagged rows: claim {report['claim_skip_queue']}, "
               f"next_claim_at_due {report['next_claim_at_due']}"]
    emit(args, report, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
