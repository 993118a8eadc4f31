"""`cronbox dev`: the whole pipeline in one terminal.

With no DATABASE_URL it starts (or reuses) a private PostgreSQL under ./.cronbox/, migrates,
starts the demo worker in this process and `cronbox poller` + `cronbox relay` + `cronbox web`
(the console, on loopback; its URL is printed) as child processes, schedules a demo job, and
shows every delivery and completion.

Routes: the demo worker takes every queue (`*`); `--sink QUEUE=TARGET` (repeatable) and the
routes of CRONBOX_SINKS are added beside it, so a worker of one's own gets its queues while the
demo job keeps running (a `*` route of one's own replaces the demo's).

Ctrl-C stops in dependency order: the poller (no new runs), the relay (it finishes the sends
in flight, while the worker still answers), the console, then the demo worker, then the cluster
it started (never one it found running already). The children run in their own process group,
so the SIGINT a terminal sends to its foreground group on Ctrl-C reaches only `cronbox dev`,
which then stops each child once with SIGTERM (a child that got both would take the second as
"cancel now"); they also get SIGTERM if `cronbox dev` itself dies. The private cluster keeps its
port across runs (remembered in <data>/port while it is free), so the printed DSN stays the
same; the console keeps its port the same way (<data>/web-port; 8088 the first time if free).
`cronbox status`, `cronbox web` and `cronbox worker` run from the same folder (or below it) find
the running private cluster by themselves (cronbox.pgcluster.find_dev_cluster).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

from cronbox import db
from cronbox.config import Config
from cronbox.demo_worker import serve
from cronbox.log import event
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster, free_port
from cronbox.proc import Waker, run_until_stopped

log = logging.getLogger("cronbox.dev")


PR_SET_PDEATHSIG = 1
WEB_PORT = 8088  # the console's port on a first run, as `cronbox web`'s default


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _spawn(command: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    # Own process group: a terminal's Ctrl-C reaches only `cronbox dev`, which stops each child once.
    return subprocess.Popen([sys.executable, "-m", "cronbox", command], env=env, process_group=0,
                            preexec_fn=_die_with_parent)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As PostgreSQL binds: a port in TIME_WAIT after the last stop is free for it.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _remembered_port(root: Path) -> int | None:
    """The port the private cluster had last time, if it is still free."""
    try:
        port = int((root / "port").read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 1024 <= port <= 65535 and _port_is_free(port) else None


def _stop_children(children: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """One at a time, in the order given: each finishes its in-flight work before the next
    stops (a relay still sending needs the worker behind it)."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def routes(added: list[str], demo: str) -> str:
    """CRONBOX_SINKS for the relay: the routes given (--sink, CRONBOX_SINKS), then the demo
    worker's `*` route unless one of them routes `*` itself. The relay validates the result."""
    parts = [p.strip() for text in added for p in text.split(";") if p.strip()]
    if not any(p.partition("=")[0].strip() == "*" for p in parts):
        parts.append(demo)
    return "; ".join(parts)


def _console_port(root: Path) -> int:
    """CRONBOX_WEB_PORT, else the port of the last run while it is free, else 8088 if free,
    else any free port; remembered for the next run."""
    if os.environ.get("CRONBOX_WEB_PORT"):
        return int(os.environ["CRONBOX_WEB_PORT"])
    try:
        last = int((root / "web-port").read_text().strip())
    except (OSError, ValueError):
        last = None
    port = next((p for p in (last, WEB_PORT) if p and 1024 <= p <= 65535 and _port_is_free(p)), None) or free_port()
    root.mkdir(parents=True, exist_ok=True)
    (root / "web-port").write_text(f"{port}\n")
    return port


async def _serve_then_stop(port: int, dsn: str, secret: str, children: list[subprocess.Popen[bytes]],
                           timeout: float, waker: Waker) -> None:
    """The demo worker until Ctrl-C (or until it fails), then the children in order, then it."""
    worker_stop = asyncio.Event()
    serving = asyncio.create_task(serve("127.0.0.1", port, worker_stop, dsn=dsn, secret=secret))
    stopping = asyncio.create_task(waker.stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        await asyncio.to_thread(_stop_children, children, timeout)
        worker_stop.set()
    await serving
    event(log, "demo worker stopped")


def run_dev(cfg: Config, data: Path, cron: str, sinks: list[str] | None = None) -> int:
    cluster: Cluster | None = None
    started_here = False
    dsn = cfg.dsn
    if not dsn:
        root = data.resolve()
        cluster = Cluster(root)
        started_here = cluster.pid() is None
        reused = cluster.initialized
        if started_here and (port := _remembered_port(root)) is not None:
            cluster.settings["port"] = str(port)
        dsn = cluster.start()
        (root / "port").write_text(f"{cluster.port}\n")
        event(log, "private PostgreSQL", dsn=dsn, data=str(cluster.data), reused=reused,
              already_running=not started_here)
    try:
        result = migrate(dsn)
        event(log, "migrated", version=result.version, applied=len(result.applied))
        port = free_port()
        secret = secrets.token_urlsafe(24)  # the relay signs, the demo worker verifies
        demo = f"*=http://127.0.0.1:{port}/run secret_env=CRONBOX_DEV_WORKER_SECRET"
        relay_routes = routes([os.environ.get("CRONBOX_SINKS", ""), *(sinks or [])], demo)
        env = {**os.environ, "DATABASE_URL": dsn, "CRONBOX_DEV_WORKER_SECRET": secret, "CRONBOX_SINKS": relay_routes}
        with db.connect(dsn) as conn:
            conn.execute("SELECT cronbox.schedule('demo', cron => %s, payload => %s)",
                         (cron, db.Jsonb({"hello": "from cronbox dev"})))
        event(log, "scheduled demo job", cron=cron,
              hint="psql then: SELECT * FROM cronbox.runs ORDER BY run_id DESC LIMIT 5")
        web_port = _console_port(data.resolve())
        # The order they stop in: poller, relay, console (then the demo worker, then PostgreSQL).
        children = [_spawn("poller", env), _spawn("relay", env),
                    _spawn("web", {**env, "CRONBOX_WEB_HOST": "127.0.0.1", "CRONBOX_WEB_PORT": str(web_port)})]
        event(log, "routes", sinks=relay_routes)
        event(log, "web console", url=f"http://127.0.0.1:{web_port}/")
        print(f"cronbox dev: web console at http://127.0.0.1:{web_port}/", flush=True)
        timeout = cfg.shutdown_timeout.total_seconds()
        try:
            return asyncio.run(run_until_stopped(
                "dev", lambda waker: _serve_then_stop(port, dsn, secret, children, timeout, waker)))
        finally:
            _stop_children(children, timeout)  # after a crash of this process's own loop
    finally:
        if cluster is not None and started_here:
            cluster.stop()
            event(log, "private PostgreSQL stopped", data=str(cluster.data))
