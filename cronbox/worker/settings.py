"""Worker settings: constructor arguments win, else CRONBOX_WORKER_* variables, else defaults.

Parsed once, validated, frozen; `describe()` is what the start-up log line shows (no secret).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from cronbox.config import ConfigError, describe_listen_dsn, env_int, parse_duration, redact_dsn
from cronbox.proc import identity

ERROR_LIMIT = 2000  # characters of error text the kit reports (the SQL API bounds it again)


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    dsn: str = ""
    listen_dsn: str = ""          # pull: CRONBOX_LISTEN_DSN ("" = dsn, "off" = poll only)
    name: str = ""                # lease owner shown in cronbox.runs.worker
    concurrency: int = 10         # runs in flight at once (pull: claims stop at this many)
    batch: int = 100              # runs per claim_runs call (at most the free slots)
    threads: int = 10             # thread pool for sync handlers
    heartbeat: float = 30.0       # seconds between heartbeats of a run (at most; see lease_fraction)
    cancel_grace: float = 5.0     # after run.cancelled is set, an async handler is cancelled after this
    reply_within: float = 2.0     # push: answer with the outcome if the handler ends this soon, else 202
    poll_interval: float = 1.0    # pull: backstop poll when no NOTIFY arrives
    shutdown_timeout: float = 10.0
    secret: str | None = None     # push: HMAC secret (CRONBOX_WORKER_SECRET)
    signature_tolerance: float = 300.0

    def __post_init__(self) -> None:
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
        env = os.environ if env is None else env
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"Worker() got unexpected argument(s): {', '.join(sorted(unknown))}")

        def seconds(var: str, default: float) -> float:
            raw = env.get(var)
            return parse_duration(var, raw).total_seconds() if raw else default

        concurrency = env_int(env, "CRONBOX_WORKER_CONCURRENCY", 10)
        values: dict[str, Any] = {
            "dsn": env.get("CRONBOX_DATABASE_URL") or env.get("DATABASE_URL") or "",
            "listen_dsn": env.get("CRONBOX_LISTEN_DSN", "").strip(),
            "name": env.get("CRONBOX_WORKER_NAME") or identity("worker"),
            "concurrency": concurrency,
            "batch": env_int(env, "CRONBOX_WORKER_BATCH", 100),
            "threads": env_int(env, "CRONBOX_WORKER_THREADS", min(concurrency, 32)),
            "heartbeat": seconds("CRONBOX_WORKER_HEARTBEAT", 30.0),
            "cancel_grace": seconds("CRONBOX_WORKER_CANCEL_GRACE", 5.0),
            "reply_within": seconds("CRONBOX_WORKER_REPLY_WITHIN", 2.0),
            "poll_interval": seconds("CRONBOX_POLL_INTERVAL", 1.0),
            "shutdown_timeout": seconds("CRONBOX_SHUTDOWN_TIMEOUT", 10.0),
            "secret": env.get("CRONBOX_WORKER_SECRET") or None,
            "signature_tolerance": seconds("CRONBOX_WORKER_SIGNATURE_TOLERANCE", 300.0),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "dsn":
                value = redact_dsn(value) if value else "(libpq PG* environment)"
            elif f.name == "listen_dsn":
                value = describe_listen_dsn(value)
            elif f.name == "secret":
                value = "set" if value else "none"
            out[f.name] = value
        return out
