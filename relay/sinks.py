"""Sinks: send claimed rows to where their queue is routed and record what happened.

A claimed row is a `Row` whose body is the message as JSON text straight from PostgreSQL: a
batch body is the texts joined into a JSON array, so messages are never parsed and
re-serialised here. Results go into one `Report` per claimed batch of one queue (parallel
lists, no object per message), which the relay turns into one ack and at most one nack (and
one hand-back of unsent rows) round trip. Each queue sends through its own lane
(relay/lanes.py): its own aiohttp session, connection limit and timeouts.

HTTP outcomes: 2xx delivered (the body may carry the run's outcome); 408, 429, 5xx,
timeouts and connection errors are retried (Retry-After honoured); other 4xx are final
(dead letter); 1xx/3xx are retried (redirects are not followed). A 503 that says the worker
cannot reach cronbox's database (header `Cronbox-Retry-Reason: database-unavailable`, or
`"reason": "database_unavailable"` in a batch answer's entry, as the worker kit answers) is
no failure of the delivery: those rows are handed back after a short wait (Retry-After, at
most DEFER_MAX), the attempt not counted, no per-row backoff, and the queue's breaker does
not count it: once the database is back (a restart, a failover) they go out at once.

Batches by negotiation (a route's `batch=auto`, the default): a 2xx answer may carry
`Cronbox-Accept-Batch: N`, the worker's word that it takes JSON arrays of up to N messages
(`post` returns it; the lane decides, relay/lanes.py). A batch sent that way and answered with
a final 4xx is retried, not dead-lettered: the worker behind the URL may have been replaced by
one that takes single messages only, and the lane goes back to single messages.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import aiohttp
import orjson

from cronbox import db
from cronbox.log import event
from cronbox.signing import HEADER as SIGNATURE_HEADER, sign
from cronbox.text import json_has_nul, storable
from relay.routes import MAX_BATCH, Route

log = logging.getLogger("cronbox.relay")



class Row(NamedTuple):
    """One claimed outbox row."""
    outbox_id: int
    queue: str
    key: str             # idempotency key (Idempotency-Key header)
    body: str            # the message, JSON text as PostgreSQL wrote it
    age: float | None    # seconds from fire time to claim (database clock); None: notification
    send_at: float       # monotonic time before which it must not be sent (claimed ahead of its
                         # due time, CRONBOX_DISPATCH_LEAD); 0.0 = send now
    due: float = 0.0     # its due time on the database's clock (epoch seconds) when claimed ahead
    claims: int = 1      # times claimed, this claim included (a hand-back of an unsent row takes one back)
    bucket: int | None = None  # its bucket (claim_outbox): what the settling calls name

OUTCOME_STATES = ("succeeded", "failed")
RETRY_STATUSES = frozenset({408, 429})
REASON_HEADER = "Cronbox-Retry-Reason"
ACCEPT_BATCH_HEADER = "Cronbox-Accept-Batch"
DB_UNAVAILABLE = "database_unavailable"  # in a batch entry; "database-unavailable" in the header
DEFER_DEFAULT, DEFER_MAX = 1.0, 5.0      # seconds to hold deferred rows before handing them back
ANSWER_MARGIN = 64 * 1024  # bytes an answer may take beyond its results (JSON around them)
ANSWER_RESULTS = 8         # a batch answer is read up to this many results' worth
ERROR_CHARS = 4000         # characters of a worker's error text kept (finish_runs cuts there too)
SNIPPET = 200              # bytes of a failed answer quoted in the error
LOG_CHARS = 16384          # characters of a message the log sink prints


class Report:
    """What happened to one claimed batch: acked ids, outcomes, and failures (parallel lists)."""

    __slots__ = ("ok", "outcomes", "failed", "errors", "retryable", "retry_after", "unsent", "deferred", "defer_s",
                 "bucket", "row_buckets")

    def __init__(self, rows: Sequence[Row] = ()) -> None:
        # The rows' bucket when they share one (always on plain PostgreSQL: 0), named to the
        # settling calls so each is one bucket's statements (one shard on Citus: docs/citus.md);
        # None for rows of several: `by_bucket` then splits the report, one per bucket.
        self.bucket: int | None = None
        self.row_buckets: dict[int, int | None] = {}  # outbox id -> bucket, when the rows span several
        self.of(rows)
        self.ok: list[int] = []
        self.outcomes: list[dict[str, Any]] = []
        self.failed: list[int] = []
        self.errors: list[str] = []
        self.retryable: list[bool] = []
        self.retry_after: list[float | None] = []
        self.unsent: list[int] = []  # never sent (breaker open, lease too short): handed back
        self.deferred: list[int] = []  # the worker could not reach the database: handed back later
        self.defer_s = 0.0

    def of(self, rows: Sequence[Row]) -> None:
        """Set the bucket from the rows this report settles."""
        buckets = {r.bucket for r in rows}
        self.bucket = buckets.pop() if len(buckets) == 1 else None
        self.row_buckets = {r.outbox_id: r.bucket for r in rows} if len(buckets) > 1 else {}

    def by_bucket(self) -> list[Report]:
        """This report as one per bucket of its rows (itself when they share one), so each
        settling call names one bucket: one shard's statements on Citus (docs/citus.md)."""
        if not self.row_buckets:
            return [self]
        parts: dict[int | None, Report] = {}

        def part(outbox_id: int) -> Report:
            bucket = self.row_buckets.get(outbox_id)
            if bucket not in parts:
                parts[bucket] = Report()
                parts[bucket].bucket, parts[bucket].defer_s = bucket, self.defer_s
            return parts[bucket]

        for oid in self.ok:
            part(oid).ok.append(oid)
        for oc in self.outcomes:
            part(oc["outbox_id"]).outcomes.append(oc)
        for oid, error, retryable, after in zip(self.failed, self.errors, self.retryable, self.retry_after):
            p = part(oid)
            p.failed.append(oid)
            p.errors.append(error)
            p.retryable.append(retryable)
            p.retry_after.append(after)
        for oid in self.unsent:
            part(oid).unsent.append(oid)
        for oid in self.deferred:
            part(oid).deferred.append(oid)
        return list(parts.values())

    def defer(self, ids: Sequence[int], retry_after: float | None) -> None:
        self.deferred.extend(ids)
        self.defer_s = max(self.defer_s, min(DEFER_MAX, retry_after if retry_after is not None else DEFER_DEFAULT))

    def fail(self, ids: Sequence[int], error: str, retryable: bool = True, retry_after: float | None = None) -> None:
        n = len(ids)
        self.failed.extend(ids)
        self.errors.extend([storable(error[:ERROR_CHARS])] * n)
        self.retryable.extend([retryable] * n)
        self.retry_after.extend([retry_after] * n)

    def outcome(self, outbox_id: int, answer: dict[str, Any], nul: bool = False) -> None:
        """Keep a worker's run outcome ({"state": "succeeded"|"failed", ...}) for the ack.
        `nul`: the answer's JSON holds a NUL somewhere, which PostgreSQL stores in neither
        text nor jsonb: an error text gets U+FFFD instead, a result holding one fails the run."""
        state = answer.get("state")
        if state not in OUTCOME_STATES:
            return
        entry: dict[str, Any] = {"outbox_id": outbox_id, "state": state}
        if state == "succeeded":
            result = answer.get("result")
            # None (absent or null) is stored as NULL: nothing to write. Anything else is written
            # once here (the ack embeds the text, orjson.Fragment): what orjson cannot write
            # (nesting past its 254 levels) or PostgreSQL cannot store (a NUL) fails the run.
            if result is not None:
                try:
                    text = orjson.dumps(result)
                except orjson.JSONEncodeError as exc:
                    text, why = None, f"answer refused: the result cannot be written back as JSON ({exc})"
                else:
                    why = ("answer refused: the result holds a NUL character (\\u0000), which PostgreSQL's jsonb "
                           "cannot store") if nul and json_has_nul(text) else None
                if why is not None:
                    entry = {"outbox_id": outbox_id, "state": "failed", "retryable": False, "error": why}
                else:
                    entry["result"] = orjson.Fragment(text)
        else:
            entry["error"] = storable(str(answer.get("error") or "failed (no error given)")[:ERROR_CHARS])
            entry["retryable"] = answer.get("retryable", True) is not False
        self.outcomes.append(entry)

    def too_large(self, ids: Sequence[int], limit: int) -> None:
        """A 2xx answer longer than `limit` bytes: delivered (the worker took the messages), and
        the runs fail with the reason, not retried (the worker did its work; its result is lost)."""
        for oid in ids:
            self.ok.append(oid)
            self.outcomes.append({"outbox_id": oid, "state": "failed", "retryable": False,
                                  "error": f"answer too large: the worker answered more than {limit} bytes "
                                           "(cronbox.max_result_bytes and a margin); not read"})


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def accept_batch(headers: Any) -> int | None:
    """The worker's `Cronbox-Accept-Batch: N` (capped at a route's largest batch=N); None if
    absent or not a positive integer."""
    value = (headers.get(ACCEPT_BATCH_HEADER) or "").strip()
    if not value.isdigit() or int(value) < 1:
        return None
    return min(int(value), MAX_BATCH)


def refused(status: int) -> bool:
    """A final refusal (4xx but 408/429): no retry would change it, unless the worker changed."""
    return 400 <= status < 500 and status not in RETRY_STATUSES


class Answer(NamedTuple):
    """What one request came to, for the breaker and the lane's batch negotiation."""
    sane: bool               # any status but 408/429/5xx, and no timeout or connection error
    status: int | None       # None: no HTTP answer at all
    accepts: int | None      # the answer's Cronbox-Accept-Batch


def _snippet(payload: bytes) -> str:
    text = payload[:SNIPPET].decode(errors="replace").strip()
    return f": {text}" if text else ""


class Unreadable(NamedTuple):
    """An answer that looks like JSON (an object or an array) and does not load: a number past
    a double's range, nesting past 1,024 levels, invalid UTF-8, broken JSON."""
    reason: str

    def outcome(self) -> dict[str, Any]:
        return {"state": "failed", "retryable": False,
                "error": f"answer unreadable: the worker's answer is no JSON the relay can load ({self.reason})"}


def _json(payload: bytes) -> Any:
    """The answer's JSON; None when there is none or it is no JSON at all (plain text: no
    outcome, the run is delivered and reports through SQL); Unreadable for JSON that does not
    load (the run fails with the reason: its outcome is lost)."""
    stripped = payload.strip()
    if not stripped:
        return None
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        return Unreadable(str(exc)) if stripped[:1] in (b"{", b"[") else None


def answer_limit(max_result: int, messages: int) -> int:
    """The most bytes of a 2xx answer read: the results it may carry and a margin."""
    return max_result * min(messages, ANSWER_RESULTS) + ANSWER_MARGIN


async def read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The answer's body, or None past `limit` bytes (then the connection is closed, never
    read to the end: a sink streaming gigabytes costs `limit` bytes of memory)."""
    if resp.content_length is not None and resp.content_length > limit:
        return None
    chunks, size = [], 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _accept_batch(ids: Sequence[int], payload: bytes, report: Report) -> None:
    """A 2xx for a batch: the body may say per message whether it was accepted."""
    answer = _json(payload)
    nul = json_has_nul(payload)
    if isinstance(answer, Unreadable):
        for oid in ids:
            report.ok.append(oid)
            report.outcome(oid, answer.outcome())
        return
    if not isinstance(answer, list):
        report.ok.extend(ids)  # no per-message answer: the whole batch was accepted
        return
    if len(answer) != len(ids):
        report.fail(ids, f"batch answer has {len(answer)} entries for {len(ids)} messages")
        return
    ok, outcomes = report.ok, report.outcomes
    for oid, entry in zip(ids, answer):
        # the common answer first, as Report.outcome records it: a plain success (no result)
        if type(entry) is dict and entry.get("state") == "succeeded" and entry.get("result") is None \
                and entry.get("accepted") is not False:
            ok.append(oid)
            outcomes.append({"outbox_id": oid, "state": "succeeded"})
            continue
        if isinstance(entry, dict) and entry.get("accepted") is False and entry.get("reason") == DB_UNAVAILABLE:
            report.defer([oid], None)
            continue
        if entry is False or (isinstance(entry, dict) and entry.get("accepted") is False):
            detail = entry if isinstance(entry, dict) else {}
            report.fail([oid], str(detail.get("error") or "not accepted by the worker"),
                        detail.get("retryable", True) is not False)
            continue
        report.ok.append(oid)
        if isinstance(entry, dict) and "state" in entry:
            report.outcome(oid, entry, nul)


def classify(status: int, headers: Any, payload: bytes, ids: Sequence[int], batched: bool, report: Report,
             negotiated: bool = False) -> None:
    """Record one answer in report. `negotiated`: a batch sent because the worker declared it
    takes batches; a final 4xx to it is retried (one by one), as the worker may have changed."""
    if 200 <= status < 300:
        if batched:
            _accept_batch(ids, payload, report)
        else:
            report.ok.append(ids[0])
            if status != 202:
                answer = _json(payload)
                if isinstance(answer, Unreadable):
                    report.outcome(ids[0], answer.outcome())
                elif isinstance(answer, dict) and "state" in answer:
                    report.outcome(ids[0], answer, json_has_nul(payload))
    elif status == 503 and (headers.get(REASON_HEADER) or "").lower() == "database-unavailable":
        report.defer(ids, retry_after_seconds(headers.get("Retry-After")))
    elif status in RETRY_STATUSES or status >= 500:
        report.fail(ids, f"HTTP {status}{_snippet(payload)}", True, retry_after_seconds(headers.get("Retry-After")))
    elif refused(status) and batched and negotiated:
        report.fail(ids, f"HTTP {status} to a batch{_snippet(payload)} (the worker no longer declares "
                         f"{ACCEPT_BATCH_HEADER}: sent again one by one)", True)
    elif 400 <= status < 500:
        report.fail(ids, f"HTTP {status}{_snippet(payload)}", False)
    else:
        report.fail(ids, f"HTTP {status} (redirects are not followed)")


async def post(session: aiohttp.ClientSession, route: Route, ids: Sequence[int], body: bytes,
               key: str | None, batched: bool, report: Report, negotiated: bool = False,
               max_result: int = 1048576) -> Answer:
    """One request; the result lands in report. Returns whether the sink answered sanely (any
    status but 408/429/5xx, no timeout or connection error: what the circuit breaker counts),
    the status and the batch size the answer declares. Answers are read bounded: a 2xx up to
    `answer_limit` (past it the runs fail, `answer too large`; a 202 to one message carries no
    outcome, so it is only delivered), any other status up to ANSWER_MARGIN (its first SNIPPET
    bytes are quoted in the error)."""
    headers = {"Content-Type": "application/json", "User-Agent": "cronbox-relay"}
    if key is not None:
        headers["Idempotency-Key"] = key
    if route.secret:
        headers[SIGNATURE_HEADER] = sign(route.secret, body)
    assert route.url is not None
    try:
        async with session.post(route.url, data=body, headers=headers, allow_redirects=False) as resp:
            deferred = len(report.deferred)
            ok = 200 <= resp.status < 300
            limit = answer_limit(max_result, len(ids)) if ok else ANSWER_MARGIN
            payload = await read_bounded(resp, limit)
            if payload is None:
                resp.close()
                if ok and (batched or resp.status != 202):
                    report.too_large(ids, limit)
                    return Answer(True, resp.status, accept_batch(resp.headers))
                payload = b"(answer too large: not read)"
            classify(resp.status, resp.headers, payload, ids, batched, report, negotiated)
            accepts = accept_batch(resp.headers)
            if len(report.deferred) > deferred:
                # the worker is up, cronbox's database is not: not the sink's failure
                return Answer(True, resp.status, accepts)
            return Answer(not (resp.status in RETRY_STATUSES or resp.status >= 500), resp.status, accepts)
    except TimeoutError:
        report.fail(ids, "timeout: no answer within the request timeout")
    except aiohttp.ClientError as exc:
        report.fail(ids, f"{exc.__class__.__name__}: {exc}")
    return Answer(False, None, None)


def send_log(rows: Sequence[Row], report: Report) -> None:
    """The log sink: one line per message, the message cut to LOG_CHARS characters."""
    for oid, queue, key, body, *_ in rows:
        message = db.loads(body)  # an UnreadableJson (1e400, deep nesting) is logged as its text
        fields = message if isinstance(message, dict) else {}
        if len(body) > LOG_CHARS:
            message = f"{body[:LOG_CHARS]}... [{len(body)} characters in all]"
        try:
            event(log, "message", run_id=fields.get("run_id"), job=fields.get("job"), queue=queue,
                  idempotency_key=key, message=message)
        except RecursionError:  # nested too deep to print as an object (logging re-raises this one)
            event(log, "message", run_id=fields.get("run_id"), job=fields.get("job"), queue=queue,
                  idempotency_key=key, message=body[:LOG_CHARS])
        report.ok.append(oid)
