"""Loop health: each poller loop (dispatch, saturation, reaper, maintenance) reports every
round as a success or a failure; /healthz turns 503 while a loop keeps failing and names it.

A loop is unhealthy after FAILURES_UNHEALTHY consecutive failed rounds; one successful round
makes it healthy again. Registered with cronbox.metrics.register_health_check as
`loop:<name>`.
"""

from __future__ import annotations

import time

from cronbox import metrics

FAILURES_UNHEALTHY = 3


class LoopHealth:
    """Consecutive failures of one loop and the last error, for /healthz."""

    def __init__(self, name: str, *, register: bool = True) -> None:
        self.name = name
        self.failures = 0
        self.last_error = ""
        self.failing_since: float | None = None
        if register:
            metrics.register_health_check(f"loop:{name}", self.check)

    def ok(self) -> None:
        self.failures = 0
        self.failing_since = None

    def failed(self, error: str) -> None:
        self.failures += 1
        self.last_error = error[:300]
        if self.failing_since is None:
            self.failing_since = time.monotonic()

    def check(self) -> tuple[bool, str]:
        if self.failures < FAILURES_UNHEALTHY:
            return True, "ok"
        since = time.monotonic() - (self.failing_since or time.monotonic())
        return False, (f"{self.name} loop failed {self.failures} times in a row "
                       f"(for {since:.0f}s), last error: {self.last_error}")

    def close(self) -> None:
        metrics.unregister_health_check(f"loop:{self.name}")
