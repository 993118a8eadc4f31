"""The pull-mode bench worker: claims runs with cronbox.claim_runs and completes them with
cronbox.complete_runs, in a loop, until SIGTERM. One transaction claims a batch, a second
completes it (one set-based complete_runs call per batch). Prints its counts as JSON on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import orjson

from cronbox import db


async def main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    name = f"bench-pull:{os.getpid()}"
    done = empty = 0
    async with await db.aconnect(os.environ["DATABASE_URL"]) as conn:
        while not stop.is_set():
            async with conn.transaction():
                # as the worker kit claims: without the message column (cronbox/worker/pull.py)
                cur = await conn.execute("SELECT run_id FROM cronbox.claim_runs(%s, %s, %s, with_message => false)",
                                         (args.queue, name, args.batch))
                ids = [r[0] for r in await cur.fetchall()]
            if not ids:
                empty += 1
                try:
                    await asyncio.wait_for(stop.wait(), args.idle)
                except TimeoutError:
                    pass
                continue
            async with conn.transaction():
                await conn.execute("SELECT count(*) FROM cronbox.complete_runs(%s::bigint[])", (ids,))
            done += len(ids)
    print(orjson.dumps({"worker": name, "completed": done, "empty_polls": empty}).decode(), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queue", default="default")
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--idle", type=float, default=0.01, help="seconds to wait after an empty claim")
    asyncio.run(main(p.parse_args()))
