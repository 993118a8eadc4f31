"""`cronbox worker module:attr [--port PORT]`: load a Worker and run it as a process."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from typing import Any

from cronbox.config import Config, ConfigError
from cronbox.log import event
from cronbox.proc import Waker, run_until_stopped

log = logging.getLogger("cronbox.worker")


def load(spec: str) -> Any:
    """The Worker named by `module:attr` (the current directory is importable, like uvicorn)."""
    from cronbox.worker import Worker

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"worker: expected module:attribute (e.g. myapp.jobs:worker), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"worker: cannot import {module_name!r}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"worker: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, Worker):
        raise ConfigError(f"worker: {spec} is a {type(obj).__name__}, not a cronbox.worker.Worker")
    if not obj.handlers:
        raise ConfigError(f"worker: {spec} has no handlers (decorate functions with @worker.handler(queue))")
    return obj


def run_worker(cfg: Config, spec: str, http_port: int | None, host: str, allow_unsigned: bool) -> int:
    worker = load(spec)
    settings = worker.settings  # validated before anything starts
    if not settings.dsn and not os.environ.get("PGHOST") and not os.environ.get("PGDATABASE"):
        raise ConfigError("DATABASE_URL is not set (nor PGHOST/PGDATABASE)")
    if http_port is None:
        return asyncio.run(run_until_stopped("worker", lambda waker: _pull(worker, waker, cfg)))
    if not 0 < http_port < 65536:
        raise ConfigError(f"--port: expected a port 1-65535, got {http_port}")
    app = worker.http_app(allow_unsigned=allow_unsigned)
    return asyncio.run(run_until_stopped("worker", lambda waker: _serve(app, host, http_port, waker, cfg)))


async def _pull(worker: Any, waker: Waker, cfg: Config) -> None:
    from cronbox.worker.pull import run_pull

    await run_pull(worker, waker, cfg if cfg.metrics_port else None)


async def _serve(app: Any, host: str, port: int, waker: Waker, cfg: Config) -> None:
    from aiohttp import web

    from cronbox.worker.push import METRICS_CFG

    if cfg.metrics_port:
        app[METRICS_CFG] = cfg
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=cfg.shutdown_timeout.total_seconds())
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        event(log, "listening", url=f"http://{host}:{port}/run")
        await waker.stop.wait()
    finally:
        await runner.cleanup()
