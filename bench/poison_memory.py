"""Memory under hostile traffic: what a sink streaming an endless answer costs the relay, and
what concurrent unsigned bodies cost a push worker (peak RSS, VmHWM from /proc).

    python -m bench.poison_memory [--stream-mb 4096] [--posts 24] [--post-mb 63]

1. Relay: a run on a queue routed to a sink that answers 200 and streams --stream-mb MB; the
   relay reads up to cronbox.max_result_bytes + 64 KiB, fails the run (`answer too large`) and
   hangs up. Reported: the relay's peak RSS, the bytes the sink managed to write, the run's end.
2. Push worker (`cronbox worker bench.kit_worker:worker --port`, with a secret): --posts
   concurrent unsigned POSTs of --post-mb MB each (the whole body sent). Reported: the worker's
   peak RSS before and after, the answers' statuses.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.common import Process, log, parse_args, process_env, wait_until
from bench.database import Database
from cronbox import db
from cronbox.pgcluster import free_port


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class StreamingSink:
    """200, then --stream-mb MB of a JSON-looking answer, until the client hangs up."""

    def __init__(self, total: int):
        self.total, self.written = total, 0
        self.loop = asyncio.new_event_loop()
        self.port = free_port()

    async def answer(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(status=200)
        await resp.prepare(request)
        chunk = b'{"state": "succeeded", "result": "' + b"s" * 2**20
        try:
            while self.written < self.total:
                await resp.write(chunk)
                self.written += len(chunk)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    def start(self) -> None:
        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/run", self.answer)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(serve(), self.loop).result(10)


def relay_stream(dsn: str, logdir: Path, stream_mb: int) -> dict:
    sink = StreamingSink(stream_mb * 2**20)
    sink.start()
    relay = Process("relay", [sys.executable, "-m", "cronbox", "relay"],
                    process_env(dsn, {"CRONBOX_SINKS": f"stream=http://127.0.0.1:{sink.port}/run; *=log",
                                      "CRONBOX_HTTP_TIMEOUT": "60s"}), logdir)
    try:
        with db.connect(dsn) as conn:
            conn.execute("SELECT cronbox.schedule('streamed', cron => '0 0 1 1 *', queue => 'stream')")
            wait_until(lambda: conn.execute("SELECT count(*) FROM cronbox.processes WHERE kind = 'relay' AND live"
                                            ).fetchone()[0] == 1, 30, "relay registered")
            before = peak_mb(relay.pid)
            t0 = time.monotonic()
            conn.execute("SELECT cronbox.trigger('streamed')")
            state, error = wait_until(lambda: conn.execute(
                "SELECT state, error FROM cronbox.runs WHERE job = 'streamed' AND state IN ('failed', 'succeeded')"
            ).fetchone(), 120, "the streamed run ended")
            seconds = time.monotonic() - t0
        return {"relay_peak_rss_mb_before": before, "relay_peak_rss_mb_after": peak_mb(relay.pid),
                "sink_bytes_written": sink.written, "run_state": state, "run_error": (error or "")[:120],
                "seconds": round(seconds, 2), "relay_alive": relay.alive()}
    finally:
        relay.stop()


async def _unsigned_posts(port: int, posts: int, size: int) -> list[int]:
    body = b"x" * size
    async with aiohttp.ClientSession() as s:
        async def one() -> int:
            try:
                async with s.post(f"http://127.0.0.1:{port}/run", data=body,
                                  headers={"Content-Type": "application/json"}) as resp:
                    return resp.status
            except aiohttp.ClientError:
                return 0  # the worker answered and closed before the whole body was sent
        return list(await asyncio.gather(*(one() for _ in range(posts))))


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def worker_bodies(dsn: str, logdir: Path, posts: int, post_mb: int) -> dict:
    port = free_port()
    worker = Process("worker", [sys.executable, "-m", "cronbox", "worker", "bench.kit_worker:worker", "--port", str(port)],
                     process_env(dsn, {"CRONBOX_WORKER_SECRET": "bench-secret"}), logdir)
    try:
        wait_until(lambda: _listening(port), 30, "worker listening")
        before = peak_mb(worker.pid)
        statuses = asyncio.run(_unsigned_posts(port, posts, post_mb * 2**20))
        return {"worker_peak_rss_mb_before": before, "worker_peak_rss_mb_after": peak_mb(worker.pid),
                "statuses": sorted(set(statuses)), "worker_alive": worker.alive()}
    finally:
        worker.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stream-mb", type=int, default=4096)
    p.add_argument("--posts", type=int, default=24)
    p.add_argument("--post-mb", type=int, default=63)
    args = parse_args(p, argv)
    logdir = Path(tempfile.mkdtemp(prefix="cronbox-bench-poison-"))
    with Database(args, "poison") as database:
        log(f"relay stream: {relay_stream(database.dsn, logdir, args.stream_mb)}")
        log(f"worker bodies: {worker_bodies(database.dsn, logdir, args.posts, args.post_mb)}")


if __name__ == "__main__":
    main()
