"""bench/web: how fast the web console's list pages answer at scale.

  1. fill: N schedules (set-based, straight into cronbox.job, two upcoming fires each), M
     history rows spread over the last D days (90% succeeded, the rest failed, lost,
     skipped, missed, cancelled; 20 queues), 1,000 dead letters; ANALYZE;
  2. serve: a real `cronbox web` process (no auth, loopback);
  3. measure: each page (overview, schedule list and search, schedule detail, every runs
     filter, a deep keyset page, run detail, dead letters) is fetched once to warm up, then
     R times; median and max wall time per page, over HTTP, as a browser would wait.

  python -m bench.web                            # 100,000 schedules, 10,000,000 runs
  python -m bench.web --quick                    # 2,000 schedules, 50,000 runs
  python -m bench.web --schedules 100000 --runs 1000000 --repeat 9
  python -m bench.web --dsn postgresql://.../bench --reuse   # measure a database filled by an earlier run

The setup is checked before anything is measured: the database must hold exactly the asked
numbers of schedules, futures, runs and dead letters (a fill that fell short, or --reuse of a
database of another size, stops the bench with exit status 1 and no figures).
"""

from __future__ import annotations

import argparse
import base64
import math
import statistics
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import psycopg

from bench.common import Database, Fleet, base_report, emit, log, parse_args, wait_until, workdir
from bench.database import ADD_JOB_ROWS
from cronbox.pgcluster import free_port
from web.auth import hash_password

QUEUES = 20
DEAD_LETTERS = 1000
PASSWORD = "bench-password"
# The console runs with logins, each request under its role (row-level security on), as it
# runs in production: an administrator, and a schedule owner (cronbox_user) owning OWNED
# schedules among all of them, which is the case where row security filters the most.
LOGINS = {"admin": "cronbox_admin", "owner": "bench_owner"}
OWNED = 10
OWNER_PAGES = ("overview", "schedules", "schedules search, many", "runs", "runs deep page (keyset)",
               "runs state=failed", "runs queue=q7", "runs of an owned job", "runs state=failed+lost",
               "runs by duration (newest 10,000)")


def make_owner(conn: psycopg.Connection, n_schedules: int) -> None:
    """The role bench_owner (a cronbox_user) and the OWNED schedules it owns, one in n/OWNED."""
    conn.execute("""
        DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'bench_owner') THEN
                CREATE ROLE bench_owner NOLOGIN;
            END IF;
            GRANT cronbox_user TO bench_owner;
        END $$""")
    owner = "CASE WHEN job_id %% %(every)s = 7 THEN 'bench_owner'::name ELSE current_user END"
    conn.execute(f"UPDATE cronbox.job SET owner = {owner} WHERE owner <> {owner}",
                 {"every": n_schedules // OWNED})


def fill_schedules(conn: psycopg.Connection, n: int) -> None:
    norm = conn.execute("SELECT cronbox.normalize_cron('*/5 * * * *')").fetchone()[0]
    conn.execute("""
        INSERT INTO cronbox.job (name, kind, cron, cron_normalized, timezone, queue)
        SELECT 'job-' || lpad(i::text, 7, '0'), 'cron', '*/5 * * * *', %s,
               (ARRAY['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo'])[1 + i %% 4], 'q' || (i %% %s)
        FROM generate_series(1, %s) AS i""", (norm, QUEUES, n))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("""
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at)
        SELECT j.job_id, t, t FROM cronbox.job j,
               LATERAL (VALUES (date_trunc('minute', now()) + interval '1 day'),
                               (date_trunc('minute', now()) + interval '1 day 5 minutes')) AS f(t)""")


def fill_history(conn: psycopg.Connection, *, runs: int, hours: float, jobs: list[str] | None = None,
                 chunk: int = 1_000_000) -> None:
    """`runs` finished runs of the given (or all) jobs, evenly over the last `hours`, set-based."""
    conn.execute("SELECT cronbox.ensure_run_partitions(1)")
    # older days: the same daily partitions cronbox.ensure_run_partitions makes
    conn.execute("""
        DO $$ DECLARE v_day date; BEGIN
        FOR v_day IN SELECT d::date FROM generate_series((now() AT TIME ZONE 'UTC')::date - DAYS,
                                                         (now() AT TIME ZONE 'UTC')::date, interval '1 day') d LOOP
            CONTINUE WHEN to_regclass('cronbox.run_' || to_char(v_day, 'YYYYMMDD')) IS NOT NULL;
            EXECUTE format('CREATE TABLE cronbox.%I PARTITION OF cronbox.run FOR VALUES FROM (%s) TO (%s)',
                           'run_' || to_char(v_day, 'YYYYMMDD'),
                           cronbox.run_id_at(v_day::timestamp AT TIME ZONE 'UTC'),
                           cronbox.run_id_at((v_day + 1)::timestamp AT TIME ZONE 'UTC'));
        END LOOP; END $$""".replace("DAYS", str(int(hours // 24) + 1)))
    conn.execute("""
        CREATE TEMP TABLE bench_jobs AS
        SELECT row_number() OVER (ORDER BY job_id) - 1 AS k, job_id, name, queue FROM cronbox.job
        WHERE %(jobs)s::text[] IS NULL OR name = ANY(%(jobs)s)""", {"jobs": jobs})
    njobs = conn.execute("SELECT count(*) FROM bench_jobs").fetchone()[0]
    span_ms = int(hours * 3600 * 1000)
    for first in range(0, runs, chunk):
        last = min(runs, first + chunk) - 1
        conn.execute("""
            WITH t AS (SELECT now() - make_interval(secs => %(span)s / 1000.0) AS t0)
            INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt, origin,
                                     dispatched_at, delivered_at, started_at, finished_at, worker, error, trouble)
            SELECT cronbox.run_id_at(x.at) + (g.i %% 1024), b.job_id, b.name, b.queue, x.at, x.at, s.state, 1,
                   'schedule', x.at, x.at, x.at,
                   CASE WHEN s.state IN ('skipped', 'missed') THEN x.at
                        ELSE x.at + make_interval(secs => 0.05 + (hashint4(g.i::int) & 4095) / 400.0) END,
                   CASE WHEN s.state NOT IN ('skipped', 'missed') THEN 'worker-' || (g.i %% 8) END,
                   CASE WHEN s.state = 'failed' THEN 'HTTP 500: upstream timed out after 30 s' END,
                   cronbox.run_trouble(s.state)
            FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g(i) CROSS JOIN t
            CROSS JOIN LATERAL (SELECT t.t0 + make_interval(secs => g.i * (%(span)s::float8 / %(n)s) / 1000.0) AS at) x
            CROSS JOIN LATERAL (SELECT CASE WHEN h < 920 THEN 'succeeded' WHEN h < 960 THEN 'failed'
                                            WHEN h < 980 THEN 'lost' WHEN h < 990 THEN 'skipped'
                                            WHEN h < 1000 THEN 'missed' ELSE 'cancelled' END AS state
                                FROM (SELECT (hashint4(g.i::int) & 2147483647) %% 1024 AS h) hh) s
            JOIN bench_jobs b ON b.k = (hashint4(g.i::int + 7) & 2147483647) %% %(njobs)s""",
            {"span": span_ms, "n": runs, "first": first, "last": last, "njobs": njobs})
        log(f"  history: {last + 1:,} of {runs:,} runs")
    conn.execute("DROP TABLE bench_jobs")


def fill_dead_letters(conn: psycopg.Connection, n: int) -> None:
    conn.execute("""
        INSERT INTO cronbox.dead_letter (outbox_id, run_id, queue, kind, message, timeout, created_at, attempts,
                                         last_error, dead_at)
        SELECT i, NULL, 'q' || (i %% %s), 'run', jsonb_build_object('job', 'job-' || lpad(i::text, 7, '0')),
               '5 minutes', now() - interval '1 hour', 10, 'HTTP 410 Gone', now()
        FROM generate_series(1, %s) AS i""", (QUEUES, n))


def cases(conn: psycopg.Connection, n_schedules: int) -> dict[str, str]:
    mid = conn.execute("SELECT run_id FROM cronbox.runs ORDER BY run_id OFFSET "
                       "(SELECT count(*) / 2 FROM cronbox.runs) LIMIT 1").fetchone()[0]
    ten_h, nine_h = conn.execute(
        "SELECT to_char(now() AT TIME ZONE 'UTC' - interval '10 hours', 'YYYY-MM-DD\"T\"HH24:MI'), "
        "to_char(now() AT TIME ZONE 'UTC' - interval '9 hours', 'YYYY-MM-DD\"T\"HH24:MI')").fetchone()
    some = f"job-{n_schedules // 2:07d}"
    return {
        "overview": "/",
        "schedules": "/schedules",
        "schedules page (keyset)": f"/schedules?after=job-{n_schedules // 2:07d}",
        "schedules search, 1 match": f"/schedules?q={some}",
        "schedules search, many": "/schedules?q=job-00",
        "schedule detail": f"/schedules/{some}",
        "runs": "/runs",
        "runs deep page (keyset)": f"/runs?before={mid}",
        "runs state=failed": "/runs?state=failed",
        "runs state=failed+lost": "/runs?state=failed&state=lost",
        "runs job substring": "/runs?job=job-00000",
        "runs by duration (newest 10,000)": "/runs?order=duration",
        "runs by fire time (newest 10,000)": "/runs?order=fire",
        "schedules status=paused": "/schedules?status=paused",
        "runs state=succeeded": "/runs?state=succeeded",
        "runs state=lost queue=q7": "/runs?state=lost&queue=q7",
        "runs queue=q7": "/runs?queue=q7",
        "runs job": f"/runs?job={some}",
        "runs job state=failed": f"/runs?job={some}&state=failed",
        "runs of an owned job": "/runs?job=job-0000007",
        "runs time range (1 h, 10 h ago)": f"/runs?since={ten_h}&until={nine_h}",
        "run detail": f"/runs/{mid}",
        "dead letters": "/dead-letters",
        "processes": "/processes",
    }


def maintain(conn: psycopg.Connection) -> None:
    """What the poller's maintenance step does for the console (no poller runs here): the name
    search's side table synced, the finished runs counted per minute (if this cronbox has them)."""
    if conn.execute("SELECT to_regproc('cronbox.tally_runs') IS NOT NULL").fetchone()[0]:
        conn.execute("SELECT cronbox.sync_schedule_names()")
        while conn.execute("SELECT cronbox.tally_runs(100000)").fetchone()[0] == 100000:
            pass


def setup_problems(conn: psycopg.Connection, n_schedules: int, n_runs: int, n_dead: int) -> list[str]:
    """What differs between the database and the asked setup (exact counts, read as superuser)."""
    have = conn.execute("""
        SELECT (SELECT count(*) FROM cronbox.job), (SELECT count(*) FROM cronbox.job_future),
               (SELECT count(*) FROM cronbox.runs), (SELECT count(*) FROM cronbox.dead_letter),
               (SELECT count(*) FROM cronbox.job_future WHERE due_at <= now())""").fetchone()
    # No poller runs here: the futures are a day ahead, so none is due (a backlog of due fires
    # that nothing moves would be another case: "due" counts what is due).
    want = (n_schedules, 2 * n_schedules, n_runs, n_dead, 0)
    names = ("schedules", "futures", "runs", "dead letters", "futures already due")
    return [f"{name}: asked {w:,}, the database holds {h:,}" for name, w, h in zip(names, want, have) if w != h]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with 20 fetches, p95 is the 19th slowest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def fetch(url: str, who: str | None = None) -> tuple[float, int, int]:
    """Wall time (ms), body size and HTTP status of one GET, as a browser waits for it."""
    request = urllib.request.Request(url)
    if who:
        token = base64.b64encode(f"{who}:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as resp:
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        body = exc.read()
        status = exc.code
    return (time.perf_counter() - t0) * 1000, len(body), status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.web", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedules", type=int, default=None)
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--days", type=float, default=7.0, help="history spread over the last D days (default 7)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--reuse", action="store_true",
                   help="with --dsn: measure the database as it is (filled by an earlier run of the same sizes)")
    args = parse_args(p, argv)
    if args.reuse and not args.dsn:
        p.error("--reuse needs --dsn (a private cluster starts empty)")
    n_sched = args.schedules or (2_000 if args.quick else 100_000)
    n_runs = args.runs or (50_000 if args.quick else 10_000_000)
    hours = args.days * 24
    with Database(args, "web") as database, workdir("web") as logdir:
        report = base_report("web", args, database, argv)
        report.update(schedules=n_sched, runs=n_runs, hours=hours, repeat=args.repeat)
        t0 = time.monotonic()
        with database.connect() as conn:
            if not args.reuse:
                fill_schedules(conn, n_sched)
                fill_history(conn, runs=n_runs, hours=hours)
                fill_dead_letters(conn, DEAD_LETTERS)
            make_owner(conn, n_sched)
            conn.execute("ANALYZE")
            maintain(conn)
            problems = setup_problems(conn, n_sched, n_runs, DEAD_LETTERS)
            if problems:
                log("setup did not hold, nothing measured: " + "; ".join(problems))
                return 1
            report["jit"] = conn.execute("SHOW jit").fetchone()[0]
            urls = cases(conn, n_sched)
            report["sizes"] = dict(conn.execute(
                "SELECT c.relname, pg_size_pretty(pg_total_relation_size(c.oid)) FROM pg_class c "
                "WHERE c.oid IN ('cronbox.job'::regclass, 'cronbox.job_future'::regclass) "
                "UNION ALL SELECT 'run (all partitions)', pg_size_pretty(sum(pg_total_relation_size(i.inhrelid))) "
                "FROM pg_inherits i WHERE i.inhparent = 'cronbox.run'::regclass").fetchall())
        report["fill_seconds"] = round(time.monotonic() - t0, 1)
        log(f"filled in {report['fill_seconds']} s; starting cronbox web")
        port = free_port()
        users = ",".join(f"{who}:{hash_password(PASSWORD)}:{role}" for who, role in LOGINS.items())
        with Fleet(logdir) as fleet:
            web = fleet.cronbox("web", database.dsn, {"CRONBOX_WEB_PORT": str(port), "CRONBOX_WEB_USERS": users})
            base = f"http://127.0.0.1:{port}"

            def up() -> bool:
                if not web.alive():
                    raise RuntimeError(web.tail())
                try:
                    return fetch(base + "/healthz")[2] == 200
                except OSError:
                    return False

            wait_until(up, 120, "cronbox web")  # Python start-up alone takes tens of seconds on a loaded machine
            pages: dict[str, Any] = {}
            failed: dict[str, int] = {}
            for who in LOGINS:
                for name, path in urls.items():
                    if who == "owner" and name not in OWNER_PAGES:
                        continue
                    key = name if who == "admin" else f"{name} (as owner)"
                    _, _, status = fetch(base + path, who)
                    if status != 200:  # a page that fails is reported as failed, never timed
                        failed[key] = status
                        log(f"  {key:44s} HTTP {status}: not measured")
                        continue
                    times = []
                    size = 0
                    for _ in range(args.repeat):
                        ms, size, status = fetch(base + path, who)
                        times.append(ms)
                    pages[key] = {"path": path, "as": LOGINS[who], "p50_ms": round(statistics.median(times), 1),
                                  "p95_ms": round(percentile(times, 0.95), 1), "max_ms": round(max(times), 1),
                                  "bytes": size}
                    log(f"  {key:44s} p50 {pages[key]['p50_ms']:8.1f} ms  p95 {pages[key]['p95_ms']:8.1f} ms")
            report["pages"] = pages
            report["failed_pages"] = failed
    summary = [f"web console pages, {n_sched:,} schedules, {n_runs:,} runs over {hours:g} h, "
               f"p50 / p95 of {args.repeat} fetches (ms):"]
    summary += [f"  {k:44s} {v['p50_ms']:8.1f} {v['p95_ms']:8.1f}" for k, v in report["pages"].items()]
    summary += [f"  {k:44s} FAILED: HTTP {v}" for k, v in report["failed_pages"].items()]
    emit(args, report, summary)
    return 1 if report["failed_pages"] else 0


if __name__ == "__main__":
    sys.exit(main())
