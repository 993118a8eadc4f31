"""The relay's own settings (CRONBOX_RELAY_*, CRONBOX_HTTP_*, CRONBOX_SINKS), declared once:
parsed, validated and logged from these fields, and listed by `cronbox relay --help`.

What the relay shares with other commands (database, logging, poll interval, early-dispatch
lead, metrics, shutdown) is cronbox.config.Config.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import ClassVar

from cronbox.config import ConfigError, Settings, duration, integer, setting, text


@dataclasses.dataclass(frozen=True)
class RelaySettings(Settings):
    prefix: ClassVar[str] = "relay_"

    sinks: str = setting("CRONBOX_SINKS", "*=log", text(),
                         "routes, queue=target;...: an http(s) URL (options after a space), log, postgres "
                         "(pull), elsewhere; * is the default route (docs/relay.md)")
    batch: int = setting("CRONBOX_RELAY_BATCH", "500", integer(1, 100000), "outbox rows claimed per transaction")
    lease: timedelta = setting("CRONBOX_RELAY_LEASE", "30s", duration(),
                               "claimed rows come back to any relay after this if not acked")
    max_attempts: int = setting("CRONBOX_RELAY_MAX_ATTEMPTS", "10", integer(),
                                "delivery attempts before a row becomes a dead letter")
    backoff: float = setting("CRONBOX_RELAY_BACKOFF", "1s", duration(seconds=True),
                             "first retry delay (doubles per attempt, with jitter)")
    backoff_max: float = setting("CRONBOX_RELAY_BACKOFF_MAX", "1m", duration(seconds=True),
                                  "cap on the retry delay (the breaker spares a sink that is down)")
    inflight: int = setting("CRONBOX_RELAY_INFLIGHT", "4", integer(), "claimed batches per queue being sent at once")
    http_timeout: float = setting("CRONBOX_HTTP_TIMEOUT", "10s", duration(seconds=True, maximum="1h"),
                                  "per request, total (a route may override it)")
    http_connect_timeout: float = setting("CRONBOX_HTTP_CONNECT_TIMEOUT", "5s", duration(seconds=True),
                                          "per request (capped at the total timeout)")
    http_connections: int = setting("CRONBOX_HTTP_CONNECTIONS", "64", integer(),
                                    "concurrent requests (connections) per queue")
    breaker_failures: int = setting("CRONBOX_RELAY_BREAKER_FAILURES", "5", integer(0),
                                    "consecutive failed requests that open a queue's circuit breaker (0 = off)")
    breaker_probe: float = setting("CRONBOX_RELAY_BREAKER_PROBE", "1s", duration(seconds=True),
                                   "first probe interval of an open breaker (doubles per failed probe)")
    breaker_probe_max: float = setting("CRONBOX_RELAY_BREAKER_PROBE_MAX", "1m", duration(seconds=True, maximum="1h"),
                                       "cap on the probe interval")
    bucket_lease: float = setting("CRONBOX_RELAY_BUCKET_LEASE", "10s", duration(seconds=True, maximum="1h"),
                                  "on Citus: how long the relay's buckets stay its own without a renewal (renewed "
                                  "every third); a killed relay's go to the others within 1 1/3 of it")
    check_every: float = 30.0       # how often to look for queues with no route (not configurable)

    def check(self) -> None:
        if self.bucket_lease < 1.0:
            raise ConfigError(f"CRONBOX_RELAY_BUCKET_LEASE: must be at least 1s, got {self.bucket_lease:g}s")
        if self.backoff_max < self.backoff:
            raise ConfigError(f"CRONBOX_RELAY_BACKOFF_MAX: must be at least CRONBOX_RELAY_BACKOFF ({self.backoff:g}s)")
        if self.breaker_probe_max < self.breaker_probe:
            raise ConfigError("CRONBOX_RELAY_BREAKER_PROBE_MAX: must be at least CRONBOX_RELAY_BREAKER_PROBE "
                              f"({self.breaker_probe:g}s)")
