"""cronbox.worker: write the handlers, the kit does the rest (docs/worker.md).

    from cronbox.worker import Worker, Fail, Retry

    worker = Worker()                       # DSN from DATABASE_URL, settings CRONBOX_WORKER_*

    @worker.handler("emails")               # the queue's default handler; async or plain functions
    async def send(run):                    # run.run_id, .job, .payload, .fire_at, .attempt,
        ...                                 # .deadline, .idempotency_key, .cancelled (an Event)
        return {"sent": 3}                  # stored as the run's result

    @worker.handler("emails", job="digest", retry=Retry(tries=3, on=ConnectionError))
    async def digest(run):                  # only runs of job 'digest'; called up to 3 times
        ...

Pull mode: `cronbox worker module:worker` (claims with cronbox.claim_runs). Push mode:
`worker.http_app(secret=...)` is an aiohttp application for the relay to POST to, or
`cronbox worker module:worker --port PORT`. Both heartbeat running runs, honour cancellation
and the deadline, drop duplicates and report outcomes; an exception fails the run (logged with
its traceback, which the run's error keeps, bounded; retryable unless it is
`Fail(..., retryable=False)`), a return value completes it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from cronbox.config import ConfigError
from cronbox.worker.engine import Handler, Route
from cronbox.worker.retry import Retry
from cronbox.worker.run import Fail, Run
from cronbox.worker.settings import WorkerSettings

__all__ = ["Fail", "Retry", "Run", "Worker", "WorkerSettings", "ConfigError"]

F = TypeVar("F", bound=Callable[..., Any])


class Worker:
    """Handlers by queue (and job name) plus settings. Keyword arguments override the environment:
    dsn, name, concurrency, batch, threads, heartbeat, cancel_grace, reply_within,
    poll_interval, shutdown_timeout, secret, signature_tolerance (seconds as floats)."""

    def __init__(self, **settings: Any) -> None:
        self._overrides = settings
        self._settings: WorkerSettings | None = None
        self.handlers: dict[str, Route] = {}  # by queue

    @property
    def settings(self) -> WorkerSettings:
        """Resolved on first use (so importing a module that builds a Worker reads no env)."""
        if self._settings is None:
            self._settings = WorkerSettings.load(self._overrides)
        return self._settings

    def handler(self, queue: str, *, job: str | None = None, retry: Retry | None = None,
                enforce_deadline: bool = True) -> Callable[[F], F]:
        """Register `fn(run)` for a queue ('*': every pushed queue without its own handler):
        as the queue's default, or with `job=` for that job's runs only (the default, then the
        '*' handlers, take the others). `retry=Retry(...)` calls it again on the exceptions the
        policy names before the run fails (cronbox.worker.retry). With enforce_deadline=False the
        handler may run past the run's deadline for as long as heartbeats keep its lease."""
        if not isinstance(queue, str) or not queue:
            raise ValueError("queue: must be a non-empty string")
        if job is not None and (not isinstance(job, str) or not job):
            raise ValueError("job: must be a non-empty string (or None for the queue's default handler)")
        if retry is not None and not isinstance(retry, Retry):
            raise TypeError("retry: must be a cronbox.worker.Retry")

        def register(fn: F) -> F:
            if not callable(fn):
                raise TypeError("handler: must be callable")
            is_async = inspect.iscoroutinefunction(fn)
            call = retry.wrap(fn, is_async) if retry is not None else fn
            route = self.handlers.get(queue) or Route(queue)
            route.add(Handler(queue, call, is_async, enforce_deadline, job))
            self.handlers[queue] = route
            for r in self.handlers.values():  # '*' is every other queue's fallback
                r.fallback = self.handlers.get("*")
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
