"""`cronbox dev`: the whole pipeline in one terminal.

With no DATABASE_URL it starts (or reuses) a private PostgreSQL under ./.cronbox/, migrates,
starts the demo worker in this process and `cronbox poller` + `cronbox relay` + `cronbox web`
(the console, on loopback; its URL is printed) as child processes, schedules a demo job, and shows every delivery and completion. Ctrl-C stops the
children, then the cluster it started (never one it found running already).

The children run in their own process group, so the SIGINT a terminal sends to its foreground
group on Ctrl-C reaches only `cronbox dev`, which then stops each child once with SIGTERM (a
child that got both would take the second as "cancel now"); they also get SIGTERM if
`cronbox dev` itself dies. The private cluster keeps its port across runs (remembered in
<data>/port while it is free), so the printed DSN stays the same.
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
from cronbox.proc import run_until_stopped

log = logging.getLogger("cronbox.dev")


PR_SET_PDEATHSIG = 1


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
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def run_dev(cfg: Config, data: Path, cron: str) -> int:
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
        env = {**os.environ, "DATABASE_URL": dsn, "CRONBOX_DEV_WORKER_SECRET": secret,
               "CRONBOX_SINKS": os.environ.get("CRONBOX_SINKS") or f"*=http://127.0.0.1:{port}/run secret_env=CRONBOX_DEV_WORKER_SECRET"}
        with db.connect(dsn) as conn:
            conn.execute("SELECT cronbox.schedule('demo', cron => %s, payload => %s)",
                         (cron, db.Jsonb({"hello": "from cronbox dev"})))
        event(log, "scheduled demo job", cron=cron,
              hint="psql then: SELECT * FROM cronbox.runs ORDER BY run_id DESC LIMIT 5")
        web_port = int(os.environ.get("CRONBOX_WEB_PORT") or free_port())
        children = [_spawn("poller", env), _spawn("relay", env),
                    _spawn("web", {**env, "CRONBOX_WEB_HOST": "127.0.0.1", "CRONBOX_WEB_PORT": str(web_port)})]
        event(log, "web console", url=f"http://127.0.0.1:{web_port}/")
        print(f"cronbox dev: web console at http://127.0.0.1:{web_port}/", flush=True)
        try:
            return asyncio.run(run_until_stopped(
                "dev", lambda waker: serve("127.0.0.1", port, waker.stop, dsn=dsn, secret=secret)))
        finally:
            _stop_children(children, cfg.shutdown_timeout.total_seconds())
    finally:
        if cluster is not None and started_here:
            cluster.stop()
            event(log, "private PostgreSQL stopped", data=str(cluster.data))
