"""A PgQueuer 1.6 worker for bench.peers: one QueueManager on one asyncpg connection, a no-op
entrypoint, drain mode (exits once the queue is empty and its jobs are done). Prints JSON:
jobs handled, the wall times of the first and the last one (time.time()), so the bench can
measure the drain from the first job taken to the last one done across all workers, and this
process's CPU seconds at those two moments (time.process_time()), so start-up is not counted.

    python -m bench.pgq_worker --batch 100        # DATABASE_URL names the database
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from datetime import timedelta


async def main(dsn: str, batch: int) -> dict[str, float | int | None]:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await asyncpg.connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    seen = {"jobs": 0, "first": None, "last": None, "cpu_first": None, "cpu_last": None}

    @qm.entrypoint("bench")
    async def bench(job: object) -> None:  # the job's work: nothing, like the cronbox bench worker
        t, cpu = time.time(), time.process_time()
        if seen["first"] is None:
            seen["first"], seen["cpu_first"] = t, cpu
        seen["last"], seen["cpu_last"] = t, cpu
        seen["jobs"] += 1

    try:
        await qm.run(batch_size=batch, mode=QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=1))
    finally:
        await conn.close()
    seen["done"] = time.time()
    return seen


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=10)
    a = p.parse_args()
    print(json.dumps(asyncio.run(main(os.environ["DATABASE_URL"], a.batch))), flush=True)
