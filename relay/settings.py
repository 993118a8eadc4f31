"""Relay-only settings (CRONBOX_RELAY_*, CRONBOX_HTTP_*), parsed once and validated.

The shared ones (CRONBOX_RELAY_BATCH, CRONBOX_RELAY_LEASE, CRONBOX_SINKS, poll interval,
shutdown timeout) live in cronbox.config.Config.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from cronbox.config import ConfigError, env_duration, env_int


def _seconds(env: Mapping[str, str], name: str, default: str) -> float:
    return env_duration(env, name, default).total_seconds()


@dataclasses.dataclass(frozen=True)
class RelaySettings:
    max_attempts: int = 10          # delivery attempts before a row becomes a dead letter
    backoff: float = 1.0            # first retry delay (doubles per attempt, with jitter)
    backoff_max: float = 600.0      # cap on the retry delay
    inflight: int = 4               # claimed batches being sent at once
    http_timeout: float = 10.0      # per request, total (a route may override it)
    http_connect_timeout: float = 5.0
    http_connections: int = 64      # connection limit of the one aiohttp session
    check_every: float = 30.0       # how often to look for queues with no route

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RelaySettings:
        env = os.environ if env is None else env
        s = cls(
            max_attempts=env_int(env, "CRONBOX_RELAY_MAX_ATTEMPTS", 10),
            backoff=_seconds(env, "CRONBOX_RELAY_BACKOFF", "1s"),
            backoff_max=_seconds(env, "CRONBOX_RELAY_BACKOFF_MAX", "10m"),
            inflight=env_int(env, "CRONBOX_RELAY_INFLIGHT", 4),
            http_timeout=_seconds(env, "CRONBOX_HTTP_TIMEOUT", "10s"),
            http_connect_timeout=_seconds(env, "CRONBOX_HTTP_CONNECT_TIMEOUT", "5s"),
            http_connections=env_int(env, "CRONBOX_HTTP_CONNECTIONS", 64),
        )
        if s.backoff_max < s.backoff:
            raise ConfigError(f"CRONBOX_RELAY_BACKOFF_MAX: must be at least CRONBOX_RELAY_BACKOFF ({s.backoff:g}s)")
        return s

    def describe(self) -> dict[str, object]:
        return {f"relay_{k}": (f"{v:g}s" if isinstance(v, float) else v)
                for k, v in dataclasses.asdict(self).items()}
