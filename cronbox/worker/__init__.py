"""cronbox.worker: write the handlers, the kit does the rest (docs/worker.md).

    from cronbox.worker import Worker, Fail

    worker = Worker()                       # DSN from DATABASE_URL, settings CRONBOX_WORKER_*

    @worker.handler("emails")               # one handler per queue; async or plain functions
    async def send(run):                    # run.run_id, .job, .payload, .fire_at, .attempt,
        ...                                 # .deadline, .idempotency_key, .cancelled (an Event)
        return {"sent": 3}                  # stored as the run's result

Pull mode: `cronbox worker module:worker` (claims with cronbox.claim_runs). Push mode:
`worker.http_app(secret=...)` is an aiohttp application for the relay to POST to, or
`cronbox worker module:worker --http PORT`. Both heartbeat running runs, honour cancellation
and the deadline, drop duplicates and report outcomes; an exception fails the run
(retryable unless it is `Fail(..., retryable=False)`), a return value completes it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from cronbox.config import ConfigError
from cronbox.worker.engine import Handler
from cronbox.worker.run import Fail, Run
from cronbox.worker.settings import WorkerSettings

__all__ = ["Fail", "Run", "Worker", "WorkerSettings", "ConfigError"]

F = TypeVar("F", bound=Callable[..., Any])


class Worker:
    """Handlers by queue plus settings. Keyword arguments override the environment:
    dsn, name, concurrency, batch, threads, heartbeat, cancel_grace, reply_within,
    poll_interval, shutdown_timeout, secret, signature_tolerance (seconds as floats)."""

    def __init__(self, **settings: Any) -> None:
        self._overrides = settings
        self._settings: WorkerSettings | None = None
        self.handlers: dict[str, Handler] = {}

    @property
    def settings(self) -> WorkerSettings:
        """Resolved on first use (so importing a module that builds a Worker reads no env)."""
        if self._settings is None:
            self._settings = WorkerSettings.load(self._overrides)
        return self._settings

    def handler(self, queue: str, *, enforce_deadline: bool = True) -> Callable[[F], F]:
        """Register `fn(run)` for a queue ('*': every pushed queue without its own handler).
        With enforce_deadline=False the handler may run past the run's deadline for as long as
        heartbeats keep its lease (long jobs)."""
        if not isinstance(queue, str) or not queue:
            raise ValueError("queue: must be a non-empty string")

        def register(fn: F) -> F:
            if queue in self.handlers:
                raise ValueError(f"queue {queue!r} already has a handler ({self.handlers[queue].fn.__qualname__})")
            if not callable(fn):
                raise TypeError("handler: must be callable")
            self.handlers[queue] = Handler(queue, fn, inspect.iscoroutinefunction(fn), enforce_deadline)
            return fn

        return register

    async def run(self, stop: asyncio.Event | None = None, *, metrics_cfg: Any = None) -> None:
        """Pull mode in the running event loop until `stop` is set (then drain and return)."""
        from cronbox.proc import Waker
        from cronbox.worker.pull import run_pull

        waker = Waker()
        if stop is not None:
            waker.stop = stop
        await run_pull(self, waker, metrics_cfg)

    def http_app(self, secret: str | bytes | list[str | bytes] | None = None, *,
                 allow_unsigned: bool = False) -> Any:
        """Push mode: an aiohttp.web.Application answering POST /run (and /) plus GET /healthz.
        `secret` (or CRONBOX_WORKER_SECRET; a list while rotating) verifies each request's
        Cronbox-Signature; without one the app refuses to start unless allow_unsigned=True."""
        from cronbox.worker.push import make_app

        secrets: list[str | bytes] | None
        given = secret if secret is not None else self.settings.secret
        if given:
            secrets = list(given) if isinstance(given, list) else [given]
        elif allow_unsigned:
            secrets = None
        else:
            raise ConfigError("push mode needs the relay's signing secret: http_app(secret=...) or "
                              "CRONBOX_WORKER_SECRET (allow_unsigned=True to accept unsigned requests)")
        if not self.handlers:
            raise ValueError("the worker has no handlers: decorate functions with @worker.handler(queue)")
        return make_app(self, secrets)
