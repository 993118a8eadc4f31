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
    backoff_max: float = 60.0       # cap on the retry delay (the breaker spares a sink that is down)
    inflight: int = 4               # claimed batches per queue being sent at once
    http_timeout: float = 10.0      # per request, total (a route may override it)
    http_connect_timeout: float = 5.0  # per request (capped at the total timeout)
    http_connections: int = 64      # concurrent requests (connections) per queue
    breaker_failures: int = 5       # consecutive failed requests that open a queue's breaker (0 = off)
    breaker_probe: float = 1.0      # first probe interval of an open breaker (doubles per failed probe)
    breaker_probe_max: float = 60.0  # cap on the probe interval
    check_every: float = 30.0       # how often to look for queues with no route

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RelaySettings:
        env = os.environ if env is None else env
        s = cls(
            max_attempts=env_int(env, "CRONBOX_RELAY_MAX_ATTEMPTS", 10),
            backoff=_seconds(env, "CRONBOX_RELAY_BACKOFF", "1s"),
            backoff_max=_seconds(env, "CRONBOX_RELAY_BACKOFF_MAX", "1m"),
            inflight=env_int(env, "CRONBOX_RELAY_INFLIGHT", 4),
            http_timeout=_seconds(env, "CRONBOX_HTTP_TIMEOUT", "10s"),
            http_connect_timeout=_seconds(env, "CRONBOX_HTTP_CONNECT_TIMEOUT", "5s"),
            http_connections=env_int(env, "CRONBOX_HTTP_CONNECTIONS", 64),
            breaker_failures=env_int(env, "CRONBOX_RELAY_BREAKER_FAILURES", 5, minimum=0),
            breaker_probe=_seconds(env, "CRONBOX_RELAY_BREAKER_PROBE", "1s"),
            breaker_probe_max=_seconds(env, "CRONBOX_RELAY_BREAKER_PROBE_MAX", "1m"),
        )
        if s.backoff_max < s.backoff:
            raise ConfigError(f"CRONBOX_RELAY_BACKOFF_MAX: must be at least CRONBOX_RELAY_BACKOFF ({s.backoff:g}s)")
        if s.breaker_probe_max < s.breaker_probe:
            raise ConfigError("CRONBOX_RELAY_BREAKER_PROBE_MAX: must be at least CRONBOX_RELAY_BREAKER_PROBE "
                              f"({s.breaker_probe:g}s)")
        for name, value in (("CRONBOX_HTTP_TIMEOUT", s.http_timeout), ("CRONBOX_RELAY_BREAKER_PROBE_MAX", s.breaker_probe_max)):
            if value > 3600:
                raise ConfigError(f"{name}: must be at most 1h, got {value:g}s")
        return s

    def describe(self) -> dict[str, object]:
        return {f"relay_{k}": (f"{v:g}s" if isinstance(v, float) else v)
                for k, v in dataclasses.asdict(self).items()}
