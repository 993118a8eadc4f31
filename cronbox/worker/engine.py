"""The part pull and push mode share: run a handler under its deadline and cancellation,
heartbeat every running run, and report outcomes in batches.

One `Inflight` per run. `_supervise` awaits the handler (a task for async handlers, the
thread pool for sync ones); the soft deadline, a heartbeat answering 'cancel', or the end of
the shutdown timeout set `run.cancelled`, and an async handler that is still running
`cancel_grace` later is cancelled. A sync handler cannot be interrupted: its run is reported
at the end of the grace, and its slot stays taken until the thread returns, so the
concurrency limit is never exceeded. Outcomes go through one reporter task that sends
everything pending as one `complete_runs` and at most two `fail_runs` calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from prometheus_client import Counter, Gauge, Histogram

from cronbox import db, metrics
from cronbox.log import event
from cronbox.registry import keep_registered
from cronbox.worker.run import Fail, Outcome, Run, bounded
from cronbox.worker.settings import WorkerSettings

log = logging.getLogger("cronbox.worker")

RUNS = Counter("cronbox_worker_runs_total", "Runs this worker finished, by queue and outcome "
               "(succeeded, failed, cancelled, deadline, shutdown)", ["queue", "outcome"])
LATE = Counter("cronbox_worker_late_reports_total", "Reports for runs that were no longer this worker's "
               "(lost, cancelled or finished elsewhere): recorded as late, never applied")
INFLIGHT = Gauge("cronbox_worker_inflight", "Runs being handled now (all workers of this process)")
_engines: list[Engine] = []
INFLIGHT.set_function(lambda: sum(len(e.inflight) for e in _engines))
DURATION = Histogram("cronbox_worker_handler_seconds", "Handler duration", ["queue"], buckets=metrics.LAG_BOUNDS)
REPORT_BUDGET = 120.0  # seconds a report batch is retried on connection errors (the lease rescues the rest)


@dataclasses.dataclass(frozen=True)
class Handler:
    queue: str
    fn: Callable[[Run], Any]
    is_async: bool
    enforce_deadline: bool = True
    job: str | None = None  # None: the queue's default handler


@dataclasses.dataclass(eq=False)
class Route:
    """The handlers of one queue: one per job name, plus the queue's default. A run whose job
    has no handler here goes to the default, then to the '*' route's, else fails (not
    retryable) saying so."""

    queue: str
    default: Handler | None = None
    jobs: dict[str, Handler] = dataclasses.field(default_factory=dict)
    fallback: Route | None = None  # the '*' route, for queues with job handlers only

    def add(self, handler: Handler) -> None:
        if handler.job is None:
            if self.default is not None:
                raise ValueError(f"queue {self.queue!r} already has a handler ({self.default.fn.__qualname__})")
            self.default = handler
        elif handler.job in self.jobs:
            raise ValueError(f"job {handler.job!r} of queue {self.queue!r} already has a handler "
                             f"({self.jobs[handler.job].fn.__qualname__})")
        else:
            self.jobs[handler.job] = handler

    def resolve(self, run: Run) -> Handler:
        found = self.jobs.get(run.job) or self.default
        if found is None and self.fallback is not None and self.fallback is not self:
            found = self.fallback.jobs.get(run.job) or self.fallback.default
        return found or _missing(self.queue, run.job)


def _missing(queue: str, job: str) -> Handler:
    def no_handler(run: Run) -> Any:
        raise Fail(f"no handler for job {job!r} in queue {queue!r} (this worker handles "
                   "only some of its jobs and has no default for the queue)", retryable=False)
    return Handler(queue, no_handler, False, True, job)


@dataclasses.dataclass(eq=False, slots=True)
class Inflight:
    run: Run
    handler: Handler
    soft_deadline: float | None        # monotonic time of run.deadline
    beat_every: float
    next_beat: float
    reply_sql: bool = True             # False while a push request may still answer with the outcome
    outcome: Outcome | None = None
    done: asyncio.Event | None = None  # push mode: a request waiting for the outcome
    task: asyncio.Task[None] | None = None
    abandon: asyncio.Future[None] | None = None  # sync handlers: set when the grace ran out
    hard_cancelled: bool = False


class Engine:
    def __init__(self, settings: WorkerSettings, pool: Any) -> None:
        self.settings = settings
        self.pool = pool
        self.inflight: dict[int, Inflight] = {}
        self.slot_freed = asyncio.Event()
        self.threads = ThreadPoolExecutor(settings.threads, thread_name_prefix="cronbox-worker")
        self._pending: list[tuple[Inflight, Outcome]] = []
        self._pending_event = asyncio.Event()
        self._reporting = 0  # runs in the report being sent now
        self._closing = False
        self._tasks: list[asyncio.Task[None]] = []
        self._registry: asyncio.Task[None] | None = None
        self._unregister = asyncio.Event()
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        _engines.append(self)

    # --- lifecycle -------------------------------------------------------------------------
    def start_background(self) -> None:
        self._tasks = [asyncio.create_task(self._heartbeats(), name="worker-heartbeats"),
                       asyncio.create_task(self._reporter(), name="worker-reporter")]
        self._unregister = asyncio.Event()
        self._registry = asyncio.create_task(self._registered(), name="worker-registry")

    async def _registered(self) -> None:
        """This worker in cronbox.processes (kind worker) while it runs; a database that
        refuses it (an older schema, a role without cronbox_worker) only costs the entry."""
        try:
            await keep_registered(self.pool, "worker", self.settings.name, self._unregister,
                                  info=lambda: {"inflight": len(self.inflight)})
        except psycopg.Error as exc:
            event(log, "not shown in cronbox.processes", level=logging.WARNING, error=db.explain(exc))

    async def close(self, timeout: float) -> None:
        """Wait up to `timeout` for in-flight runs, cancel the rest (reported as retryable
        failures), flush every report, stop the background tasks."""
        tasks = [rec.task for rec in self.inflight.values() if rec.task]
        if tasks:
            event(log, "finishing in-flight runs", runs=len(tasks), timeout=timeout)
            await asyncio.wait(tasks, timeout=timeout)
        left = [rec for rec in self.inflight.values() if rec.task and not rec.task.done()]
        for rec in left:
            self.cancel(rec, "shutdown")
        if left:
            await asyncio.wait([r.task for r in left if r.task], timeout=self.settings.cancel_grace + 1.0)
        self._closing = True
        self._pending_event.set()
        await asyncio.wait(self._tasks, timeout=REPORT_BUDGET)
        for t in self._tasks:
            t.cancel()
        if self._registry is not None:
            self._unregister.set()
            await asyncio.wait([self._registry], timeout=5)
            self._registry.cancel()
        self.threads.shutdown(wait=False, cancel_futures=True)
        if self in _engines:
            _engines.remove(self)

    # --- running a handler ------------------------------------------------------------------
    def start(self, run: Run, handler: Handler | Route, remaining: float | None, *, reply_sql: bool = True) -> Inflight:
        """Start handling `run` (by its queue's route: the handler of its job, else the
        queue's default); `remaining` = seconds until its deadline by the database clock."""
        if isinstance(handler, Route):
            handler = handler.resolve(run)
        now = time.monotonic()
        beat = self.settings.heartbeat if remaining is None else min(self.settings.heartbeat, max(remaining, 0.3) / 3)
        rec = Inflight(run, handler, None if remaining is None else now + remaining, beat, now + beat, reply_sql)
        if not handler.is_async:
            run.cancelled  # noqa: B018  (created here, in the loop's thread, before the handler's)
        self.inflight[run.run_id] = rec
        rec.task = asyncio.create_task(self._supervise(rec))
        return rec

    def cancel(self, rec: Inflight, reason: str) -> None:
        """Set run.cancelled; a handler still running after the grace is cancelled (async) or
        given up (sync: its run is reported, its thread keeps the slot until it returns)."""
        if rec.run.cancel_reason is not None:
            return
        rec.run._cancel(reason)
        asyncio.get_running_loop().call_later(self.settings.cancel_grace, self._hard_cancel, rec)

    def _hard_cancel(self, rec: Inflight) -> None:
        if rec.outcome is not None or rec.task is None or rec.task.done():
            return
        rec.hard_cancelled = True
        if rec.handler.is_async:
            rec.task.cancel()
        elif rec.abandon is not None and not rec.abandon.done():
            rec.abandon.set_result(None)

    async def _supervise(self, rec: Inflight) -> None:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            if rec.handler.is_async:
                outcome = await self._call_async(rec)
                self._finish(rec, outcome, started)
            else:
                await self._call_sync(rec, loop, started)
        finally:
            self.inflight.pop(rec.run.run_id, None)
            self.slot_freed.set()

    async def _call_async(self, rec: Inflight) -> Outcome:
        """The handler awaited in this task: no extra task or future per run."""
        try:
            result = await rec.handler.fn(rec.run)
        except asyncio.CancelledError:
            if not rec.hard_cancelled:
                raise  # the process is being torn down, not this run
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            return self._outcome(rec, None, None, cancelled=True)
        except Exception as exc:
            return self._outcome(rec, None, exc)
        return self._outcome(rec, result, None)

    async def _call_sync(self, rec: Inflight, loop: asyncio.AbstractEventLoop, started: float) -> None:
        call = loop.run_in_executor(self.threads, rec.handler.fn, rec.run)
        rec.abandon = loop.create_future()
        await asyncio.wait({call, rec.abandon}, return_when=asyncio.FIRST_COMPLETED)
        if call.done():
            exc = call.exception()
            self._finish(rec, self._outcome(rec, None if exc else call.result(), exc), started)
            return
        self._finish(rec, self._outcome(rec, None, None, cancelled=True), started)
        await asyncio.wait({call})  # a thread cannot be interrupted: keep its slot until it returns
        call.exception()  # retrieved

    def _outcome(self, rec: Inflight, result: Any, exc: BaseException | None, *, cancelled: bool = False) -> Outcome:
        reason = rec.run.cancel_reason
        if reason is not None:  # once cancelled, whatever the handler returned is not the outcome
            if reason == "deadline":
                when = rec.run.deadline.isoformat() if rec.run.deadline else "its deadline"
                return Outcome.failed(f"deadline exceeded: still running at {when}")
            if reason == "shutdown":
                return Outcome.failed("worker shut down before the run finished")
            return Outcome.failed("cancelled", retryable=False)
        if cancelled:
            return Outcome.failed("handler was cancelled")
        if exc is not None:
            self._log_failure(rec, exc)
            return Outcome.from_exception(exc, tries=rec.run.tries)
        return Outcome.succeeded(result)

    @staticmethod
    def _log_failure(rec: Inflight, exc: BaseException) -> None:
        """A handler's exception, logged with its traceback (a Fail is a decision: one line)."""
        run = rec.run
        fields = {"run_id": run.run_id, "job": run.job, "queue": run.queue, "attempt": run.attempt}
        if run.tries > 1:
            fields["tries"] = run.tries
        if isinstance(exc, Fail):
            log.warning("handler failed the run", extra={"fields": {**fields, "error": str(exc),
                                                                    "retryable": exc.retryable}})
        else:
            log.error("handler raised", exc_info=(type(exc), exc, exc.__traceback__), extra={"fields": fields})

    def _finish(self, rec: Inflight, outcome: Outcome, started: float) -> None:
        queue = rec.handler.queue
        label = rec.run.cancel_reason or outcome.state
        key = (queue, "cancelled" if label == "cancel" else label)
        children = self._children.get(key)
        if children is None:  # labelled children looked up once, not per run
            children = self._children[key] = (DURATION.labels(queue), RUNS.labels(*key))
        children[0].observe(time.monotonic() - started)
        children[1].inc()
        rec.outcome = outcome
        if rec.reply_sql:
            self._pending.append((rec, outcome))
            self._pending_event.set()
        if rec.done is not None:
            rec.done.set()

    @property
    def backlog(self) -> int:
        """Runs finished but not yet reported: pull mode claims no more while this exceeds the
        concurrency, so a slow database slows claiming instead of piling up unreported runs."""
        return len(self._pending) + self._reporting

    def report_later(self, rec: Inflight) -> None:
        """Push mode: the HTTP answer went out without the outcome; report it through SQL."""
        rec.reply_sql = True
        if rec.outcome is not None:
            self._pending.append((rec, rec.outcome))
            self._pending_event.set()

    # --- heartbeats ------------------------------------------------------------------------
    async def _heartbeats(self) -> None:
        """Also the deadline clock: one loop for every run, no timer per run."""
        while not self._closing:
            now = time.monotonic()
            upcoming = now + 1.0
            due = []
            for r in list(self.inflight.values()):
                if r.outcome is not None or r.run.cancel_reason is not None:
                    continue
                if r.handler.enforce_deadline and r.soft_deadline is not None:
                    if r.soft_deadline <= now:
                        self.cancel(r, "deadline")
                        continue
                    upcoming = min(upcoming, r.soft_deadline)
                if r.next_beat <= now:
                    due.append(r)
                upcoming = min(upcoming, r.next_beat)
            if due:
                await self._beat(due)
            metrics.tick("worker")
            await asyncio.sleep(max(0.02, upcoming - time.monotonic()))

    async def _beat(self, due: list[Inflight]) -> None:
        ids = [r.run.run_id for r in due]
        try:
            async with self.pool.connection() as conn:
                cur = await conn.execute("SELECT id, cronbox.heartbeat(id, %s) FROM unnest(%s::bigint[]) id",
                                         (self.settings.name, ids))
                answers = dict(await cur.fetchall())
        except psycopg.errors.NoDataFound:
            answers = {i: "cancel" for i in ids}  # a run that no longer exists is not ours
        except (psycopg.OperationalError, psycopg.InterfaceError, TimeoutError) as exc:
            event(log, "heartbeat failed, retrying", level=logging.WARNING, runs=len(ids), error=db.explain(exc))
            for r in due:
                r.next_beat = time.monotonic() + min(1.0, r.beat_every)
            return
        now = time.monotonic()
        for r in due:
            r.next_beat = now + r.beat_every
            if answers.get(r.run.run_id) == "cancel":
                event(log, "heartbeat answered cancel", run_id=r.run.run_id, job=r.run.job)
                self.cancel(r, "cancel")

    # --- reports ---------------------------------------------------------------------------
    async def _reporter(self) -> None:
        while True:
            await self._pending_event.wait()
            self._pending_event.clear()
            batch, self._pending = self._pending, []
            self._reporting = len(batch)
            if batch:
                await self._report_safely(batch)
            self._reporting = 0
            self.slot_freed.set()
            if self._closing and not self._pending:
                return

    async def _report_safely(self, batch: list[tuple[Inflight, Outcome]]) -> None:
        """One batch; if the database refuses it (a value out of its bounds), each run alone,
        so one bad result never costs the others their report. A run refused even alone is
        failed (not retryable) with the database's reason."""
        try:
            await db.retrying(lambda: self._report(batch), budget=REPORT_BUDGET, what="report runs")
            return
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            event(log, "report failed, the lease will rescue these runs", level=logging.ERROR,
                  runs=len(batch), error=db.explain(exc))
            return
        except psycopg.Error as exc:
            if len(batch) == 1:
                rec, outcome = batch[0]
                if outcome.state == "failed" and outcome.error.startswith("report refused"):
                    event(log, "report refused, the lease will rescue the run", level=logging.ERROR,
                          run_id=rec.run.run_id, error=db.explain(exc))
                    return
                why = bounded(f"report refused by the database: {db.explain(exc)}")
                await self._report_safely([(rec, Outcome.failed(why, retryable=False))])
                return
        for item in batch:
            await self._report_safely([item])

    async def _report(self, batch: list[tuple[Inflight, Outcome]]) -> None:
        ok = [(r.run.run_id, o.result) for r, o in batch if o.state == "succeeded"]
        failed = {flag: [(r.run.run_id, o.error) for r, o in batch if o.state == "failed" and o.retryable is flag]
                  for flag in (True, False)}
        verdicts: list[tuple[int, str]] = []
        async with self.pool.connection() as conn, conn.transaction():
            if ok:
                cur = await conn.execute(
                    "SELECT run_id, verdict FROM cronbox.complete_runs(%s::bigint[], %s::jsonb[])",
                    ([i for i, _ in ok], [None if r is None else db.Jsonb(r) for _, r in ok]))
                verdicts += await cur.fetchall()
            for retryable, rows in failed.items():
                if rows:
                    cur = await conn.execute(
                        "SELECT run_id, verdict FROM cronbox.fail_runs(%s::bigint[], %s::text[], %s)",
                        ([i for i, _ in rows], [e for _, e in rows], retryable))
                    verdicts += await cur.fetchall()
        late = [run_id for run_id, verdict in verdicts if verdict != "finished"]
        if late:
            LATE.inc(len(late))
            event(log, "result dropped: run no longer this worker's", level=logging.INFO,
                  runs=len(late), run_ids=late[:20])
