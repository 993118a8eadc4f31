"""The poller's bucket leases on Citus (cronbox/buckets.py, docs/citus.md "No leader"): the
pollers share the buckets with no leader; each renews its lease on its share (side task
`keep_leased`, every third of CRONBOX_POLLER_BUCKET_LEASE) and works only the buckets it holds:
a dispatch tick is one dispatch (and early-dispatch) call per held bucket, starting one bucket
further each tick, until the batch is full (poller/tick.py); a saturation pass claims from one
held bucket, the next pass from the next, and a saturation worker sleeps once a pass of every
held bucket found nothing more (poller/saturation_loop.py); the reaper round (lost leases, holds,
pauses, backfills: poller/maintenance.py) and the lead's profile (poller/lead.py) go bucket by
bucket over the held ones too. A renewal that changes its buckets wakes both loops; SIGTERM releases them. On plain PostgreSQL none of this runs (looked for once
at start): one call over every bucket, as before."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cronbox import db
from cronbox.buckets import BucketLeases, keep_leased, leases_buckets, wake_on_change
from poller.settings import PollerSettings


async def start_leasing(pool, name: str, ps: PollerSettings, wakes: Sequence[asyncio.Event],
                        stop: asyncio.Event) -> tuple[BucketLeases | None, list[asyncio.Task]]:
    """The buckets this poller holds (None on plain PostgreSQL: every bucket) and the side tasks
    that keep them (renewals, and the wake-ups of `wakes` when they change); the tasks end on
    `stop`, releasing the buckets so that the others take them at once."""
    leased = await db.retrying(lambda: leases_buckets(pool), budget=60, what="bucket leases", stop=stop)
    if not leased:
        return None, []
    leases = BucketLeases("poller", name, ps.bucket_lease)
    return leases, [asyncio.create_task(keep_leased(pool, leases, stop), name="bucket-leases"),
                    asyncio.create_task(wake_on_change(leases, list(wakes), stop), name="bucket-lease-wakes")]
