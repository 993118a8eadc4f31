"""`cronbox dev`: the whole pipeline in one terminal.

With no DATABASE_URL it starts (or reuses) a private PostgreSQL under ./.cronbox/, migrates,
starts the demo worker in this process and `cronbox poller` + `cronbox relay` + `cronbox web`
(the console, on loopback; its URL is printed) as child processes, schedules a demo job, and shows every delivery and completion. Ctrl-C stops the
children, then the cluster it started (never one it found running already).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
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


def _spawn(command: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cronbox", command], env=env)


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
        cluster = Cluster(data.resolve())
        started_here = cluster.pid() is None
        dsn = cluster.start()
        event(log, "private PostgreSQL", dsn=dsn, data=str(cluster.data), reused=not started_here)
    try:
        result = migrate(dsn)
        event(log, "migrated", version=result.version, applied=len(result.applied))
        port = free_port()
        env = {**os.environ, "DATABASE_URL": dsn,
               "CRONBOX_SINKS": cfg.sinks or f"*=http://127.0.0.1:{port}/run"}
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
                "dev", lambda waker: serve(dsn, "127.0.0.1", port, waker.stop)))
        finally:
            _stop_children(children, cfg.shutdown_timeout.total_seconds())
    finally:
        if cluster is not None and started_here:
            cluster.stop()
            event(log, "private PostgreSQL stopped", data=str(cluster.data))
