"""What every benchmark script shares: a private durable PostgreSQL, the real cronbox
processes, CPU/RSS from /proc, pg_stat_statements, py-spy, and the JSON + text report.

The scripts are run from the repository root as `python -m bench.<name>`; each starts its
own PostgreSQL (durable: fsync and synchronous_commit on) unless `--dsn` points at one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import FAST_SETTINGS, Cluster, free_port

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

# Durable: every commit waits for its WAL flush. The rest sizes the server for a bench on a
# 24 GB machine (no checkpoint storm mid-run) and turns on the profiling hooks.
DURABLE_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "512MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "15min",
    "max_connections": "200",
    "track_io_timing": "on",
    "shared_preload_libraries": "pg_stat_statements",  # track stays settable: ALTER SYSTEM (profile runs)
    "pg_stat_statements.max": "5000",
}


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def parse_args(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    # SIGTERM unwinds like Ctrl-C, so the private cluster and the child processes are stopped.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    p.add_argument("--quick", action="store_true", help="small sizes for the test suite")
    p.add_argument("--dsn", help="use this database instead of a private cluster (must allow superuser for profiling)")
    p.add_argument("--fast", action="store_true", help="NOT durable: fsync and synchronous_commit off")
    p.add_argument("--json", dest="json_out", help="write the JSON report to this file")
    p.add_argument("--keep", action="store_true", help="keep the private cluster's folder")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for the poller/relay (repeatable), e.g. CRONBOX_RELAY_BATCH=1000")
    return p.parse_args(argv)


def extra_env(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--env: expected NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {result!r})")
        time.sleep(interval)


# --------------------------------------------------------------------------- machine, /proc

def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg()
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "python": platform.python_version(),
            "kernel": platform.release(), "loadavg_at_start": [round(x, 2) for x in load]}


def cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of a live process (and of its reaped children with children=True)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLK_TCK


def rss_mb(pid: int) -> float | None:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return round(pages * PAGE / 2**20, 1)


def child_pids(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def postgres_cpu(postmaster: int | None) -> float | None:
    """CPU of the whole server: postmaster + live backends + reaped backends (cutime)."""
    if postmaster is None:
        return None
    return cpu_seconds(postmaster, children=True) + sum(cpu_seconds(c) for c in child_pids(postmaster))


# --------------------------------------------------------------------------- database

class Database:
    """The bench database: a private cluster (durable unless --fast) or --dsn."""

    def __init__(self, args: argparse.Namespace, name: str):
        self.args = args
        self.name = name
        self.cluster: Cluster | None = None
        self.tmp: Path | None = None
        self.dsn = ""
        self.settings: dict[str, str] = {}

    def __enter__(self) -> Database:
        if self.args.dsn:
            self.dsn = self.args.dsn
        else:
            self.tmp = Path(tempfile.mkdtemp(prefix=f"cronbox-bench-{self.name}-"))
            os.chmod(self.tmp, 0o755)
            settings = dict(DURABLE_SETTINGS)
            if self.args.fast:
                settings.update(FAST_SETTINGS)
            self.cluster = Cluster(self.tmp / "pg", settings=settings)
            admin = self.cluster.start()
            with db.connect(admin) as conn:
                conn.execute("CREATE DATABASE bench")
            self.dsn = self.cluster.dsn("bench")
        log(f"migrating {self.dsn}")
        migrate(self.dsn)
        with db.connect(self.dsn) as conn:
            rows = conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                (["fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "wal_level",
                  "max_wal_size", "shared_preload_libraries", "server_version"],)).fetchall()
            self.settings = dict(rows)
            with contextlib.suppress(psycopg.Error):
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cluster is not None:
            self.cluster.stop(mode="immediate")
        if self.tmp is not None and not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self.tmp is not None:
            log(f"kept {self.tmp}")

    @property
    def postmaster(self) -> int | None:
        return self.cluster.pid() if self.cluster else None

    @property
    def durable(self) -> bool:
        return self.settings.get("fsync") == "on" and self.settings.get("synchronous_commit") == "on"

    def connect(self) -> psycopg.Connection:
        return db.connect(self.dsn)

    def scalar(self, sql: str, params: Any = None) -> Any:
        with self.connect() as conn:
            row = conn.execute(sql, params).fetchone()
            return row[0] if row else None

    def has_function(self, name: str) -> bool:
        return bool(self.scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'cronbox' AND p.proname = %s)", (name,)))

    def libpq_args(self) -> list[str]:
        info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        return ["-h", str(info.get("host", "127.0.0.1")), "-p", str(info.get("port", 5432)),
                "-U", str(info.get("user", "postgres")), "-d", str(info.get("dbname", "bench"))]

    def bindir(self) -> Path:
        if self.cluster is not None:
            return self.cluster.bindir
        from cronbox.pgcluster import find_bindir
        return find_bindir()

    # ---- sizes and profiling
    def counters(self) -> dict[str, float]:
        """Exact server-wide counters whose deltas give the cost per run: WAL bytes written
        (LSN distance) and write transactions (xids assigned). The cumulative statistics
        views are flushed lazily, so they are not used for per-run figures."""
        with self.connect() as conn:
            lsn, xid = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, "
                "pg_snapshot_xmax(pg_current_snapshot())::text::float8").fetchone()
        return {"wal_bytes": float(lsn), "write_xacts": float(xid)}

    def clone_jobs(self, template: str, prefix: str, count: int) -> None:
        """Bulk path: `count` copies of job `template` named prefix1..prefixN (every column but
        the id and the name copied, so new columns come along). cronbox.schedule() checks the
        time zone against pg_timezone_names on every call (tens of ms each), which would
        dominate a bench's set-up; the copies are what schedule() would have written."""
        with self.connect() as conn:
            cols = [r[0] for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'cronbox.job'::regclass AND attnum > 0 "
                "AND NOT attisdropped AND attname NOT IN ('job_id', 'name') ORDER BY attnum").fetchall()]
            collist = ", ".join(f'"{c}"' for c in cols)
            conn.execute(
                f"INSERT INTO cronbox.job (name, {collist}) SELECT %s || i, {collist} "
                f"FROM cronbox.job, generate_series(1, %s) AS i WHERE name = %s", (prefix, count, template))

    def table_sizes(self, tables: list[str]) -> dict[str, dict[str, int]]:
        """Heap (with TOAST) and index bytes of each table, partitions included."""
        out: dict[str, dict[str, int]] = {}
        with self.connect() as conn:
            for t in tables:
                row = conn.execute(
                    "SELECT coalesce(sum(pg_table_size(c.oid)), 0), coalesce(sum(pg_indexes_size(c.oid)), 0) "
                    "FROM pg_class c WHERE c.oid = %s::regclass OR c.oid IN ("
                    "  SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)", (t, t)).fetchone()
                out[t] = {"table_bytes": int(row[0]), "index_bytes": int(row[1])}
        return out

    def reset_statements(self) -> bool:
        try:
            with self.connect() as conn:
                conn.execute("SELECT pg_stat_statements_reset()")
            return True
        except psycopg.Error:
            return False

    def set_statement_tracking(self, level: str) -> None:
        """'top' for timed runs, 'all' to see the statements inside cronbox functions."""
        with contextlib.suppress(psycopg.Error), self.connect() as conn:
            conn.execute(f"ALTER SYSTEM SET pg_stat_statements.track = '{level}'")
            conn.execute("SELECT pg_reload_conf()")

    def top_statements(self, limit: int = 15) -> list[dict[str, Any]]:
        try:
            with self.connect() as conn:
                rows = conn.execute(
                    "SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), rows, "
                    "shared_blks_hit + shared_blks_read, wal_records, toplevel, "
                    "regexp_replace(left(query, 300), '\\s+', ' ', 'g') "
                    "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "ORDER BY total_exec_time DESC LIMIT %s", (limit,)).fetchall()
        except psycopg.Error as exc:
            return [{"error": str(exc).strip()}]
        return [{"calls": r[0], "total_ms": float(r[1]), "mean_ms": float(r[2]), "rows": r[3],
                 "buffers": r[4], "wal_records": r[5], "toplevel": r[6], "query": r[7]} for r in rows]


# --------------------------------------------------------------------------- processes

class Process:
    """A child process (cronbox poller/relay or a bench worker), output to a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logdir: Path):
        self.name = name
        self.logfile = logdir / f"{name}.log"
        with open(self.logfile, "ab") as out:
            self.popen = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        self.pid = self.popen.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> float | None:
        return rss_mb(self.pid)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = 3000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode


def process_env(dsn: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": dsn, "CRONBOX_LOG_LEVEL": "warning", "PYTHONPATH": str(REPO)}
    for k in ("PGHOST", "PGDATABASE", "PGPORT", "PGUSER"):
        env.pop(k, None)
    env.update(extra or {})
    return env


class Fleet:
    """The processes of one bench: started in order, stopped in reverse, CPU sampled."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.procs: dict[str, Process] = {}

    def cronbox(self, command: str, dsn: str, env: dict[str, str], name: str | None = None) -> Process:
        name = name or command
        p = Process(name, [sys.executable, "-m", "cronbox", command], process_env(dsn, env), self.logdir)
        self.procs[name] = p
        return p

    def worker(self, dsn: str, port: int, mode: str, *extra: str, name: str = "worker") -> Process:
        argv = [sys.executable, "-m", "bench.worker", "--port", str(port), "--mode", mode, *extra]
        p = Process(name, argv, process_env(dsn), self.logdir)
        self.procs[name] = p
        return p

    def python(self, name: str, module: str, dsn: str, *extra: str) -> Process:
        p = Process(name, [sys.executable, "-m", module, *extra], process_env(dsn), self.logdir)
        self.procs[name] = p
        return p

    def cpu(self) -> dict[str, float]:
        return {n: p.cpu() for n, p in self.procs.items()}

    def rss(self) -> dict[str, float | None]:
        return {n: p.rss() for n, p in self.procs.items()}

    def check_alive(self) -> None:
        for n, p in self.procs.items():
            if not p.alive():
                raise RuntimeError(f"{n} exited with {p.popen.returncode}:\n{p.tail()}")

    def stop(self, *names: str) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for n in list(names or reversed(list(self.procs))):
            p = self.procs.pop(n, None)
            if p is not None:
                out[n] = p.stop()
        return out

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def per_run(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    return {k: round((after[k] - before[k]) / max(n, 1), 3) for k in after}


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before.get(k, 0.0), 2) for k in after}


# --------------------------------------------------------------------------- py-spy

def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def py_spy_record(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """Sample a process for `seconds` into collapsed stacks (py-spy --format raw)."""
    exe = py_spy()
    if exe is None:
        return None
    return subprocess.Popen([exe, "record", "--nonblocking", "--format", "raw", "--rate", "200",
                             "--duration", str(max(1, int(seconds))), "--pid", str(pid), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def summarize_collapsed(path: Path, top: int = 12) -> dict[str, Any]:
    """Top frames by self and inclusive samples from py-spy's collapsed-stack output."""
    if not path.exists():
        return {"error": "no profile written (py-spy missing or not permitted)"}
    selfc: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"
                  if " (" in f else f for f in stack.split(";")]
        selfc[frames[-1]] = selfc.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n

    def pct(d: dict[str, int]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]]

    return {"samples": total, "self_pct": pct(selfc), "inclusive_pct": pct(incl)}


# --------------------------------------------------------------------------- stats and report

def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q / 100 * (len(s) - 1)))))
    return s[k]


def spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def emit(args: argparse.Namespace, report: dict[str, Any], summary: list[str]) -> None:
    text = json.dumps(report, indent=2, default=str)
    if args.json_out:
        Path(args.json_out).write_text(text)
    else:
        print(text)
    print("\n".join(summary), file=sys.stderr, flush=True)


def base_report(bench: str, args: argparse.Namespace, database: Database, argv: list[str] | None) -> dict[str, Any]:
    return {
        "bench": bench,
        "command": "python -m bench." + bench + " " + " ".join(argv if argv is not None else sys.argv[1:]),
        "quick": args.quick,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "durable": database.durable,
        "settings": database.settings,
    }


class LogDir(type(Path())):  # type: ignore[misc]
    keep = False


@contextlib.contextmanager
def workdir(prefix: str, keep: bool = False) -> Iterator[LogDir]:
    """A folder for process logs and profiles: removed after success, kept after a failure
    or when `.keep` is set (a bench sets it when its checks fail)."""
    d = LogDir(tempfile.mkdtemp(prefix=f"cronbox-bench-{prefix}-logs-"))
    d.keep = keep
    try:
        yield d
    except BaseException:
        log(f"logs kept in {d}")
        raise
    if d.keep:
        log(f"logs kept in {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


__all__ = ["free_port"]
