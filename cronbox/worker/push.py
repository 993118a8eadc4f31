"""Push mode: an aiohttp application the relay POSTs run messages to (docs/worker.md).

Per request: refuse a body over CRONBOX_WORKER_MAX_BODY (413) and, with a secret, a missing,
malformed or stale `Cronbox-Signature` (401), both before reading the body, which is then read up
to that limit; verify the signature over the raw body (forged: 401), then parse a message or a
batch (one Python cannot load, e.g. a number past a double's range or nesting past 1,024 levels:
400 with the reason, which the relay turns into a dead letter), and per message drop a duplicate (same idempotency key seen by this
process, or a run the database says is finished, cancelled or someone else's:
`cronbox.start_run` refuses it), else mark it running and start its handler: the request's runs
together, `cronbox.start_runs` (one statement and one commit per request, not per message).
Handlers that end within `reply_within` are answered with their outcome, which the relay
applies in its ack (one step); the others are answered 202 and report through SQL later,
heartbeating meanwhile. A request over the concurrency limit gets 503 (the relay retries).
A message that cannot be started because cronbox's database is unreachable (restarting,
failing over) is answered at once, within DB_WAIT, with 503 + `Retry-After: 1` +
`Cronbox-Retry-Reason: database-unavailable` (in a batch: `"reason": "database_unavailable"`):
the relay then hands it back without counting an attempt or backing off (relay/sinks.py).
Every answer carries `Cronbox-Accept-Batch: N` (CRONBOX_WORKER_BATCH, at most the concurrency):
a relay route with the default `batch=auto` then sends JSON arrays of up to N messages, fewer
requests for the same runs (docs/relay.md, "Batches").
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import orjson
import psycopg
from aiohttp import web

from cronbox import db, metrics
from cronbox.log import event
from cronbox.proc import cancel_quietly
from cronbox.signing import HEADER, SignatureError, fresh, verify
from cronbox.worker.engine import Engine, Inflight
from cronbox.worker.run import MessageError, Run

if TYPE_CHECKING:
    from cronbox.worker import Worker

log = logging.getLogger("cronbox.worker")
ACCEPT_BATCH = "Cronbox-Accept-Batch"  # relay/sinks.py reads it (the kit never imports the relay)
SEEN = 10_000          # idempotency keys remembered by one process
DB_WAIT = 2.0          # seconds a request waits for a database connection before answering 503
ENGINE = web.AppKey("cronbox.worker.engine", Engine)
METRICS_CFG = web.AppKey("cronbox.worker.metrics_cfg", object)


def _dumps(answer: Any) -> str:
    """Answers as the relay reads them (orjson): a result the kit accepted (orjson wrote it for
    the size check) is written the same way, never as the stdlib's non-JSON NaN."""
    return orjson.dumps(answer).decode()


class Busy(Exception):
    pass


def make_app(worker: Worker, secrets: list[str | bytes] | None) -> web.Application:
    s = worker.settings
    app = web.Application(client_max_size=s.max_body)
    accept_batch = str(min(s.batch, s.concurrency))
    seen: OrderedDict[str, Inflight | None] = OrderedDict()
    side: list[asyncio.Task[Any]] = []

    async def on_startup(app: web.Application) -> None:
        event(log, "worker starting", mode="push", queues=",".join(worker.handlers), **s.describe())
        pool = await db.open_pool(s.dsn, min_size=1, max_size=max(4, min(s.concurrency, 16)), name="cronbox-worker",
                                   trust_for=db.RECENTLY_GOOD)
        app[ENGINE] = Engine(s, pool)
        app[ENGINE].start_background()
        cfg = app.get(METRICS_CFG)
        if cfg is not None:
            side.append(asyncio.create_task(metrics.serve(cfg, pool, "worker", asyncio.Event())))

    async def on_cleanup(app: web.Application) -> None:
        engine = app[ENGINE]
        await engine.close(s.shutdown_timeout)
        await cancel_quietly(*side)
        await engine.pool.close()
        event(log, "worker stopped")

    def remember(key: str, rec: Inflight | None) -> None:
        seen[key] = rec
        seen.move_to_end(key)
        while len(seen) > SEEN:
            seen.popitem(last=False)

    def prepare(engine: Engine, message: Any, n_pending: int) -> dict[str, Any] | tuple[Run, Any]:
        """A message's answer when it is settled without the database (a notification, a bad
        message, no handler, a duplicate this process has seen), else its run and handler, to
        be started with the request's others (`start`). Raises Busy past the concurrency."""
        if isinstance(message, dict) and "run_id" not in message and "event" in message:
            return {"accepted": True, "ignored": "notification"}
        try:
            run = Run.from_message(message)
        except MessageError as exc:
            return {"accepted": False, "error": str(exc), "retryable": False}
        handler = worker.handlers.get(run.queue) or worker.handlers.get("*")
        if handler is None:
            return {"accepted": False, "error": f"queue: no handler for {run.queue!r}", "retryable": False}
        key = run.idempotency_key
        if key in seen:
            rec = seen[key]
            if rec is not None and rec.outcome is not None and not rec.reply_sql:
                return rec.outcome.answer()  # our answer may not have reached the relay: again
            if rec is not None:
                engine.report_later(rec)     # the first request's answer may go nowhere now
            return {"accepted": True, "duplicate": True}
        if len(engine.inflight) + n_pending >= s.concurrency:
            raise Busy()
        seen[key] = None  # claimed by this request before the first await
        return run, handler

    async def start(engine: Engine, pending: list[tuple[int, Run, Any]], results: list[Any]) -> None:
        """Marks the request's runs running on this worker in one statement
        (`cronbox.start_runs`: one transaction for the batch, each run started or refused as
        `start_run` would) and starts their handlers; a refused run is a duplicate (finished,
        cancelled or someone else's) or unknown."""
        try:
            async with engine.pool.connection(timeout=DB_WAIT) as conn:
                cur = await conn.execute("SELECT s.deadline, s.code, s.error, now() FROM cronbox.start_runs(%s, %s) s",
                                         ([run.run_id for _, run, _ in pending], s.name))
                rows = await cur.fetchall()
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            for i, run, _ in pending:
                seen.pop(run.idempotency_key, None)
                results[i] = {"accepted": False, "error": db.explain(exc), "retryable": True,
                              "reason": "database_unavailable"}
            return
        except BaseException:
            for _, run, _ in pending:
                seen.pop(run.idempotency_key, None)
            raise
        for (i, run, handler), (lease, code, error, now) in zip(pending, rows, strict=True):
            key = run.idempotency_key
            if code == "55000":  # finished, asked to cancel or running elsewhere
                event(log, "duplicate dropped", run_id=run.run_id, key=key, reason=error)
                remember(key, None)
                results[i] = {"accepted": True, "duplicate": True}
            elif code is not None:  # unknown to this worker
                seen.pop(key, None)
                results[i] = {"accepted": False, "error": error, "retryable": False}
            else:
                remaining = ((run.deadline or lease) - now).total_seconds()
                rec = engine.start(run, handler, remaining, reply_sql=False)
                rec.done = asyncio.Event()  # before the handler's task first runs
                remember(key, rec)
                results[i] = rec

    def refuse(request: web.Request, status: int, reason: str) -> web.Response:
        event(log, "request refused", level=logging.WARNING, status=status, reason=reason, peer=request.remote)
        # not read to the end: the connection is closed after the answer
        return web.json_response({"error": reason}, status=status, headers={"Connection": "close"})

    async def receive(request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > s.max_body:
            return refuse(request, 413, f"body of {request.content_length} bytes is over the worker's limit of "
                                        f"{s.max_body} (CRONBOX_WORKER_MAX_BODY)")
        if secrets is not None:
            try:
                fresh(request.headers.get(HEADER), tolerance=s.signature_tolerance)
            except SignatureError as exc:
                return refuse(request, 401, str(exc))
        try:
            body = await request.read()  # at most client_max_size = max_body
        except web.HTTPRequestEntityTooLarge:
            return refuse(request, 413, f"body is over the worker's limit of {s.max_body} bytes (CRONBOX_WORKER_MAX_BODY)")
        if secrets is not None:
            try:
                verify(secrets, body, request.headers.get(HEADER), tolerance=s.signature_tolerance)
            except SignatureError as exc:
                return refuse(request, 401, str(exc))
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return web.json_response({"error": f"body is not JSON the worker kit can load (numbers past a double's "
                                               f"range and nesting past 1,024 levels cannot be): {exc}"}, status=400)
        batched = isinstance(doc, list)
        messages = doc if batched else [doc]
        engine = request.app[ENGINE]
        results: list[Any] = [None] * len(messages)
        pending: list[tuple[int, Run, Any]] = []
        for i, m in enumerate(messages):
            try:
                got = prepare(engine, m, len(pending))
            except Busy:
                got = {"accepted": False, "error": "worker busy", "retryable": True}
            if isinstance(got, tuple):
                pending.append((i, *got))
            else:
                results[i] = got
        if pending:
            await start(engine, pending, results)
        recs = [r for r in results if isinstance(r, Inflight)]
        if recs:
            waits = [asyncio.ensure_future(r.done.wait()) for r in recs if r.done is not None]
            await asyncio.wait(waits, timeout=s.reply_within)
            for w in waits:
                w.cancel()
        answers = []
        for r in results:
            if isinstance(r, Inflight):
                if r.outcome is not None and not r.reply_sql:
                    answers.append(r.outcome.answer())
                else:
                    engine.report_later(r)
                    answers.append({"accepted": True})
            else:
                answers.append(r)
        if batched:
            return web.json_response(answers, dumps=_dumps)
        a = answers[0]
        if a.get("accepted") is False:
            if a.get("reason") == "database_unavailable":
                return web.json_response(a, status=503, dumps=_dumps, headers={
                    "Retry-After": "1", "Cronbox-Retry-Reason": "database-unavailable"})
            return web.json_response(a, status=503 if a.get("retryable") else 422, dumps=_dumps)
        return web.json_response(a, status=202 if a == {"accepted": True} else 200, dumps=_dumps)

    async def healthz(request: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(5):
                async with request.app[ENGINE].pool.connection() as conn:
                    await conn.execute("SELECT 1")
        except Exception as exc:
            return web.Response(status=503, text=f"database unreachable: {exc.__class__.__name__}\n")
        return web.Response(text=f"ok: {len(request.app[ENGINE].inflight)} run(s) in flight\n")

    async def declare_batches(request: web.Request, response: web.StreamResponse) -> None:
        response.headers[ACCEPT_BATCH] = accept_batch

    app.router.add_post("/run", receive)
    app.router.add_post("/", receive)
    app.router.add_get("/healthz", healthz)
    app.on_response_prepare.append(declare_batches)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app
