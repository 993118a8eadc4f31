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


from bench.database import Database
from cronbox.pgcluster import free_port

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

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
    p.add_argument("--pg", action="append", default=[], metavar="NAME=VALUE",
                   help="a server setting of the private cluster (repeatable), e.g. log_min_duration_statement=1000 "
                        "(its server.log is kept with --keep)")
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


def claim_runs_sql(conn: Any) -> str:
    """The pull claim as the worker kit makes it (cronbox/worker/pull.py: without the message
    column, which it does not read), or as the installed cronbox.claim_runs allows: an older
    revision's (bench.stage_ab's "old" database) has no with_message argument."""
    bare = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = 'claim_runs'"
                        " AND pronamespace = 'cronbox'::regnamespace"
                        " AND 'with_message' = ANY (proargnames))").fetchone()[0]
    return ("SELECT run_id FROM cronbox.claim_runs(%s, %s, %s" + (", with_message => false)" if bare else ")"))


def claim_outbox_sql(conn: Any, owner: str) -> str:
    """The push claim as the relay makes it (relay/store.py: a run's message as its parts, which
    the relay writes itself), or as the installed cronbox.claim_outbox allows: an older
    revision's has no p_parts argument (it writes every message). One parameter: the limit."""
    parts = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = 'claim_outbox'"
                         " AND pronamespace = 'cronbox'::regnamespace"
                         " AND 'p_parts' = ANY (proargnames))").fetchone()[0]
    return (f"SELECT outbox_id, run_id FROM cronbox.claim_outbox('{owner}', %s"
            + (", p_parts => true)" if parts else ")"))


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


def py_spy_collect(spies: dict[str, tuple[subprocess.Popen[bytes], Path]], top: int = 12) -> dict[str, Any]:
    """Stop the recorders started by py_spy_record (SIGINT: they write their file) and
    summarise each profile, by name."""
    for sp, _ in spies.values():
        sp.send_signal(signal.SIGINT)
    out: dict[str, Any] = {}
    for name, (sp, path) in spies.items():
        try:
            _, err = sp.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            sp.kill()
            err = b"timeout"
        out[name] = summarize_collapsed(path, top) if path.exists() else {"error": err.decode(errors="replace")[-300:]}
    return out


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


__all__ = ["Database", "free_port"]
