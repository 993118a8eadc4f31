"""Worker settings: constructor arguments win, else CRONBOX_WORKER_* variables, else defaults.

Declared once (cronbox.config.setting): parsed, validated and frozen from these fields, logged
by `describe()` without secrets, and listed by `cronbox worker --help`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from cronbox.config import Config, ConfigError, Settings, duration, integer, setting, stripped, text
from cronbox.proc import identity

ERROR_LIMIT = 3900  # characters of error text the kit reports, traceback included (the SQL API keeps 4,000)

_DSN = next(f for f in dataclasses.fields(Config) if f.name == "dsn").metadata


@dataclasses.dataclass(frozen=True)
class WorkerSettings(Settings):
    dsn: str = setting(_DSN["env"], "", text(), _DSN["help"])
    listen_dsn: str = setting("CRONBOX_LISTEN_DSN", "", stripped(),
                              "pull: LISTEN wake-ups on this DSN (unset = the database URL, off = poll only)",
                              shown="")
    name: str = setting("CRONBOX_WORKER_NAME", "", text(), "lease owner shown in cronbox.runs.worker",
                        shown="worker:<host>:<pid>")
    concurrency: int = setting("CRONBOX_WORKER_CONCURRENCY", "10", integer(),
                               "runs in flight at once (pull: claims stop at this many)")
    batch: int = setting("CRONBOX_WORKER_BATCH", "100", integer(1, 1000),
                         "pull: runs per claim_runs call (at most the free slots); push: the most messages "
                         "per request the relay is told to send (Cronbox-Accept-Batch, at most concurrency)")
    threads: int | None = setting("CRONBOX_WORKER_THREADS", "", integer(), "thread pool for sync handlers",
                                  shown="concurrency, at most 32", value=None)
    heartbeat: float = setting("CRONBOX_WORKER_HEARTBEAT", "30s", duration(seconds=True),
                               "time between heartbeats of a run (at most; shorter for short leases)")
    cancel_grace: float = setting("CRONBOX_WORKER_CANCEL_GRACE", "5s", duration(seconds=True, zero_ok=True),
                                  "after run.cancelled is set, an async handler is cancelled after this")
    reply_within: float = setting("CRONBOX_WORKER_REPLY_WITHIN", "2s", duration(seconds=True),
                                  "push: answer with the outcome if the handler ends this soon, else 202")
    poll_interval: float = setting("CRONBOX_POLL_INTERVAL", "1s", duration(seconds=True),
                                   "pull: backstop poll when no NOTIFY arrives")
    shutdown_timeout: float = setting("CRONBOX_SHUTDOWN_TIMEOUT", "10s", duration(seconds=True, zero_ok=True),
                                      "on SIGTERM, time to finish in-flight runs")
    secret: str | None = setting("CRONBOX_WORKER_SECRET", "", text(), "push: HMAC secret the relay signs with",
                                 secret=True, value=None)
    max_body: int = setting("CRONBOX_WORKER_MAX_BODY", "33554432", integer(1024, 2**31 - 1),
                            "push: largest request body in bytes; a larger one is refused (413) before it is read")
    signature_tolerance: float = setting("CRONBOX_WORKER_SIGNATURE_TOLERANCE", "5m", duration(seconds=True),
                                         "push: accepted age of a signed request")

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", identity("worker"))
        if self.threads is None:
            object.__setattr__(self, "threads", min(self.concurrency, 32))
        if self.secret == "":
            object.__setattr__(self, "secret", None)
        for field in ("concurrency", "batch", "threads"):
            if getattr(self, field) < 1:
                raise ConfigError(f"{field}: must be at least 1, got {getattr(self, field)}")
        for field in ("heartbeat", "reply_within", "poll_interval", "signature_tolerance"):
            if not getattr(self, field) > 0:
                raise ConfigError(f"{field}: must be positive, got {getattr(self, field)}")
        for field in ("cancel_grace", "shutdown_timeout"):
            if getattr(self, field) < 0:
                raise ConfigError(f"{field}: must be zero or more, got {getattr(self, field)}")

    @classmethod
    def load(cls, overrides: Mapping[str, Any], env: Mapping[str, str] | None = None) -> WorkerSettings:
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"Worker() got unexpected argument(s): {', '.join(sorted(unknown))}")
        return cls.from_env(env, **overrides)
