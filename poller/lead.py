"""The early-dispatch lead, sized to the fires coming due (bursts).

With CRONBOX_DISPATCH_LEAD = L the poller writes the runs of eligible fires up to L before
their time (docs/runs.md, "Early dispatch"). That is enough for a steady rate, not for a burst:
a million fires sharing a minute boundary take about a minute of dispatch on two cores, so
starting L before the boundary dispatches most of them a minute late. The lead therefore
grows with the fires coming due: every poll interval the poller reads how many ready futures
fall due in each of the next seconds (cronbox.due_ahead, up to CRONBOX_DISPATCH_LEAD_MAX) and
takes the shortest lead that lets dispatch, at the rate it has been measured to write early
runs, finish each second's fires before that second begins:

    lead = max(L, max{ s + 1 : (fires due in the first s + 1 seconds) / rate > s + 1 - L })

capped by CRONBOX_DISPATCH_LEAD_MAX (at most half the horizon, so the futures exist). The
count stops at rate x cap fires (the rate counted on): that many fires are a cap's work, so
every later second within the cap would take the lead to it, and the lead is the cap; the
fires past them are not walked (at a million every-minute schedules the walk was the whole
next burst every refresh). The
profile is read by its own task on its own connection (profile_loop), never inside a dispatch
tick: the read walks every ready future within the cap (60,000 with a thousand every-second
schedules: 50-250 ms on the 2-core machine), and a fire coming due meanwhile waited for it. The relay
still claims only within its own L and sends each message at its due time, and pause(),
unschedule() and updates withdraw every early run no relay holds (cronbox.withdraw_early_runs),
so a longer poller lead does not delay any change: a change still reaches every fire more than
L away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from cronbox.buckets import Unreached
from cronbox.log import event
from cronbox.proc import pause
from poller import store
from poller.quarantine import describe

log = logging.getLogger("cronbox.poller")

# Early runs written per second by one poller, before anything was measured: deliberately low
# (measured on the 2-core bench machine: ~15,000-20,000/s), so a first burst starts early.
INITIAL_RATE = 5_000.0
# Only the rate of calls that moved at least this many runs is a measurement (small batches
# are dominated by the round trip).
MEASURE_MIN = 500
# The share of the measured rate counted on (the rate drops while the relay and saturation run).
SAFETY = 0.5
# The smallest early-dispatch call when a fire comes due soon (below it the round trip dominates).
EARLY_MIN = 20


class LeadPlanner:
    def __init__(self, base: timedelta, cap: timedelta, refresh: float):
        self.base, self.cap, self.refresh = base, max(cap, base), refresh
        self.rate = INITIAL_RATE
        self.profile: list[tuple[int, int]] = []
        self.read_at = float("-inf")  # monotonic time of the last profile
        self.cut = False  # the last profile stopped at its count limit (count_limit): lead = cap
        self.deferred = False  # the last tick made no early call: a fire had come due (poller.tick.tick)
        # Where the next early-dispatch call resumes its walk (cronbox.dispatch_ahead's walked_to,
        # walked_id, None: the whole lead): the fires it cannot take early (a 'skip' job's, the
        # default) are then read once on their way through the lead, not by every call.
        self.walked: store.Walked | None = None

    @property
    def on(self) -> bool:
        return self.base > timedelta(0)

    def stale(self, now: float | None = None) -> bool:
        """The profile is due for a refresh (and a longer lead is possible at all)."""
        now = time.monotonic() if now is None else now
        return self.on and self.cap > self.base and now - self.read_at >= self.refresh

    def count_limit(self) -> int:
        """Fires worth counting: once this many are due within the cap, every later second of
        it that has fires needs them started now (their work, at the rate counted on, is the
        whole cap), so the lead is the cap, whatever the uncounted rest (observe_profile)."""
        return max(1000, int(self.rate * SAFETY * self.cap.total_seconds()) + 1)

    def observe_profile(self, profile: list[tuple[int, int]], now: float | None = None, cut: bool = False) -> None:
        """`cut`: the count stopped at count_limit(); the lead is then the cap, which covers
        the fires a count of every one would have made it cover (all those within the cap)."""
        self.profile = sorted(profile)
        self.read_at = time.monotonic() if now is None else now
        self.cut = cut

    def observe_rate(self, runs: int, seconds: float) -> None:
        """An early-dispatch call wrote `runs` in `seconds`: a moving average of the rate."""
        if runs >= MEASURE_MIN and seconds > 0:
            self.rate = 0.7 * self.rate + 0.3 * (runs / seconds)

    def runs_within(self, seconds: float) -> int:
        """Early runs to write in one call that should end within `seconds` (when the next fire
        comes due: an early batch never holds up a due one, such as a jittered fire between
        whole seconds); at least EARLY_MIN."""
        return max(EARLY_MIN, int(self.rate * SAFETY * max(0.0, seconds)))

    def lead(self, now: float | None = None) -> timedelta:
        """The lead for the next early-dispatch call."""
        if not self.on:
            return self.base
        now = time.monotonic() if now is None else now
        base = self.base.total_seconds()
        cap = self.cap.total_seconds()
        if self.cut:
            return self.cap
        elapsed = max(0.0, now - self.read_at)
        rate = self.rate * SAFETY
        need, fires = base, 0
        for second, n in self.profile:
            fires += n
            start = second - elapsed  # seconds from now until this second of the profile begins
            # this second's fires (spread over it) are written in time only if the work up to
            # them fits before the second ends, L earlier (the relay claims within L)
            if fires / rate > start + 1.0 - base:
                need = max(need, start + 1.0)
        return timedelta(seconds=min(cap, max(base, need)))


async def profile_loop(pool, planner: LeadPlanner, stop: asyncio.Event,
                       held: Callable[[], Sequence[int]] | None = None) -> None:
    """Reads the fires coming due (cronbox.due_ahead) into `planner` every `refresh` seconds,
    on a connection of its own, beside the dispatch loop (which only reads planner.lead()). A
    failed read is logged and tried again at the next refresh; the lead meanwhile is sized from
    the last profile (or is the base lead). Returns at once when the lead cannot grow.
    `held`: the buckets this poller holds, read at each refresh (a poller leasing buckets): one
    read per bucket, the fires per second added up, so the lead is sized for the fires it will
    dispatch; None: one read over every bucket."""
    if not (planner.on and planner.cap > planner.base):
        return
    unreached = Unreached("dispatch lead")  # a bucket whose worker node is unreachable: left out
    while not stop.is_set():
        try:
            async with pool.connection() as conn:
                limit = planner.count_limit()
                if held is None:
                    profile = await store.due_ahead(conn, planner.cap, limit)
                    cut = sum(n for _, n in profile) >= limit
                else:
                    per_second: dict[int, int] = {}
                    cut = False
                    for bucket in held():
                        part = await unreached.call(bucket, lambda: store.due_ahead(conn, planner.cap, limit, bucket), [])
                        cut = cut or sum(n for _, n in part) >= limit
                        for second, fires in part:
                            per_second[second] = per_second.get(second, 0) + fires
                    profile = list(per_second.items())
                planner.observe_profile(profile, cut=cut)
        except Exception as exc:  # the server away included: the next refresh tries again
            event(log, "reading the fires ahead failed", level=logging.WARNING, error=describe(exc))
        if await pause(stop, planner.refresh):
            return
