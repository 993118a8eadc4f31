"""A process that only holds bucket leases (cronbox.buckets.keep_leased), as a poller or relay
will: `python -m tests.bucket_holder DSN KIND OWNER LEASE_SECONDS`. SIGTERM releases its buckets
and exits 0. Used by the Citus suite to share buckets among real processes and kill some."""

from __future__ import annotations

import asyncio
import signal
import sys

from cronbox import db
from cronbox.buckets import BucketLeases, keep_leased


async def main(dsn: str, kind: str, owner: str, lease: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pool = await db.open_pool(dsn, min_size=1, max_size=1, name=owner)
    try:
        print("holding", flush=True)
        await keep_leased(pool, BucketLeases(kind, owner, lease), stop)
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
