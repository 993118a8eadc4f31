"""The poller's own settings (CRONBOX_HORIZON, CRONBOX_DISPATCH_*, ...), declared once: parsed,
validated and logged from these fields, and listed by `cronbox poller --help`.

What the poller shares with other commands (database, logging, poll interval, early-dispatch
lead, metrics, shutdown) is cronbox.config.Config.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from cronbox.config import ConfigError, Settings, duration, integer, setting


@dataclasses.dataclass(frozen=True)
class PollerSettings(Settings):
    horizon: timedelta = setting("CRONBOX_HORIZON", "2m", duration(maximum="366d"),
                                 "how far ahead fires are materialised as futures")
    misfire_grace: timedelta = setting("CRONBOX_MISFIRE_GRACE", "30s", duration(),
                                       "a fire older than this when first seen goes to the catch-up policy")
    saturate_batch: int = setting("CRONBOX_SATURATE_BATCH", "1000", integer(),
                                  "jobs materialised per saturation transaction")
    saturate_slice: float = setting("CRONBOX_SATURATE_SLICE", "250ms", duration(seconds=True, maximum="10s"),
                                    "computing time per saturation transaction; the jobs not reached wait "
                                    "for the next one (so no pass holds job locks for long)")
    saturate_hold: float = setting("CRONBOX_SATURATE_HOLD", "500ms", duration(seconds=True, maximum="10s"),
                                   "the time a saturation transaction aims to hold its jobs' locks (claim to "
                                   "commit): a pass that took longer makes the next ones smaller (fewer jobs and "
                                   "fires), quick full passes grow them back up to CRONBOX_SATURATE_BATCH; a "
                                   "computation still running this long after the claim gives the locks up and "
                                   "stores its jobs after taking them again (those unchanged meanwhile)")
    saturate_workers: int = setting("CRONBOX_SATURATE_WORKERS", "2", integer(1, 16),
                                    "saturation transactions in flight at once, each on its own connection "
                                    "(one computes while another writes)")
    dispatch_batch: int = setting("CRONBOX_DISPATCH_BATCH", "1000", integer(1, 100000),
                                  "due futures dispatched per transaction")
    dispatch_lead_max: timedelta = setting("CRONBOX_DISPATCH_LEAD_MAX", "2m", duration(zero_ok=True, maximum="1h"),
                                           "early dispatch grows its lead up to this when a burst of fires is "
                                           "coming due (at least CRONBOX_DISPATCH_LEAD, at most half the horizon; "
                                           "docs/runs.md)")
    dispatch_tick_cap: int = setting("CRONBOX_DISPATCH_TICK_CAP", "0", integer(0),
                                     "max runs dispatched per wake-up, the rest a poll interval later (0 = no cap)")
    reap_interval: timedelta = setting("CRONBOX_REAP_INTERVAL", "1s", duration(),
                                       "how often expired leases are declared lost and job statistics folded")
    bucket_lease: float = setting("CRONBOX_POLLER_BUCKET_LEASE", "10s", duration(seconds=True, maximum="1h"),
                                  "on Citus: how long the poller's buckets stay its own without a renewal (renewed "
                                  "every third); a killed poller's go to the others within 1 1/3 of it")
    retention: timedelta = setting("CRONBOX_RETENTION", "30d", duration(),
                                   "run history kept (whole daily partitions are dropped)")

    def check(self) -> None:
        if self.bucket_lease < 1.0:
            raise ConfigError(f"CRONBOX_POLLER_BUCKET_LEASE: must be at least 1s, got {self.bucket_lease:g}s")
