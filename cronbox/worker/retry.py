"""A handler's retry policy, declared next to it: `@worker.handler("emails", retry=Retry(...))`.

The kit calls the handler again, within the same attempt of the run (its lease kept alive by
heartbeats, its deadline and cancellation still in force), after an exponential backoff with
jitter, for the exceptions the policy names. When the tries are used up the run fails with the
last exception (and its traceback), and the job's own `max_attempts` then decides whether the
run comes back as a new attempt: the two compose, the policy never hides a failure from the
run history. `Fail(..., retryable=False)` is never retried. Built on tenacity.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from cronbox.worker.run import Fail, Run

log = logging.getLogger("cronbox.worker")

MAX_TRIES = 100


def _seconds(name: str, value: float | timedelta) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not 0 <= seconds <= 86400:
        raise ValueError(f"Retry: {name} must be from 0 to 1 day, got {value!r}")
    return seconds


@dataclasses.dataclass(frozen=True)
class Retry:
    """tries: calls of the handler per attempt, the first included (2-100).
    backoff: wait before the second call, doubling up to max_backoff (seconds or timedelta), with
    up to `jitter` seconds added at random. on: the exception types that are retried (others
    fail the run at once)."""

    tries: int = 3
    backoff: float | timedelta = 1.0
    max_backoff: float | timedelta = 60.0
    jitter: float | timedelta = 1.0
    on: type[BaseException] | tuple[type[BaseException], ...] = Exception

    def __post_init__(self) -> None:
        if not isinstance(self.tries, int) or not 2 <= self.tries <= MAX_TRIES:
            raise ValueError(f"Retry: tries must be an integer from 2 to {MAX_TRIES}, got {self.tries!r}")
        for name in ("backoff", "max_backoff", "jitter"):
            object.__setattr__(self, name, _seconds(name, getattr(self, name)))
        if self.max_backoff < self.backoff:
            raise ValueError("Retry: max_backoff must be at least backoff")
        on = self.on if isinstance(self.on, tuple) else (self.on,)
        if not on or not all(isinstance(t, type) and issubclass(t, BaseException) for t in on):
            raise ValueError("Retry: on must be an exception type or a tuple of them")
        object.__setattr__(self, "on", on)

    def _retries(self, exc: BaseException) -> bool:
        if isinstance(exc, Fail) and not exc.retryable:
            return False
        return isinstance(exc, self.on)  # type: ignore[arg-type]

    def _options(self, run: Run) -> dict[str, Any]:
        def stop_when_cancelled(state: Any) -> bool:
            return run.cancel_reason is not None

        def before_sleep(state: Any) -> None:
            exc = state.outcome.exception()
            log.warning("handler raised, calling it again", exc_info=(type(exc), exc, exc.__traceback__),
                        extra={"fields": {"run_id": run.run_id, "job": run.job, "queue": run.queue,
                                          "try": state.attempt_number, "of": self.tries,
                                          "in_seconds": round(state.upcoming_sleep, 3)}})

        return {"stop": stop_after_attempt(self.tries) | stop_when_cancelled,
                "wait": wait_exponential_jitter(multiplier=self.backoff, max=self.max_backoff, jitter=self.jitter),
                "retry": retry_if_exception(self._retries), "reraise": True, "before_sleep": before_sleep}

    def wrap(self, fn: Callable[[Run], Any], is_async: bool) -> Callable[[Run], Any]:
        """The handler called under this policy; run.tries counts the calls."""
        if is_async:
            async def call_async(run: Run) -> Any:
                async for attempt in AsyncRetrying(sleep=asyncio.sleep, **self._options(run)):
                    with attempt:
                        run.tries = attempt.retry_state.attempt_number
                        return await fn(run)
            return call_async

        def call(run: Run) -> Any:
            def sleep(seconds: float) -> None:
                run.cancelled.wait(seconds)  # cancellation, the deadline or shutdown cut the wait short
            for attempt in Retrying(sleep=sleep, **self._options(run)):
                with attempt:
                    run.tries = attempt.retry_state.attempt_number
                    return fn(run)
        return call
