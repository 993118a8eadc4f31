"""What a handler receives (`Run`), what it may raise (`Fail`), and what the kit reports."""

from __future__ import annotations

import dataclasses
import threading
import traceback
from datetime import datetime
from typing import Any

import orjson

from cronbox.text import json_has_nul, storable
from cronbox.worker.settings import ERROR_LIMIT

TRUNCATED = " ...[truncated]"
TRACE_CUT = "...[{} characters of the traceback cut]...\n"
HEAD_LIMIT = 500  # characters of an exception's type and message before its traceback
RESULT_LIMIT = 1_000_000  # bytes of JSON a result may take (run history is no blob store)


class Fail(Exception):
    """Raise to fail the run with this message; `retryable=False` skips the remaining attempts
    (the job's on_error still applies)."""

    def __init__(self, message: str = "failed", *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class MessageError(ValueError):
    """A pushed message the kit cannot turn into a run (missing or malformed field)."""


@dataclasses.dataclass(eq=False)
class Run:
    """One run of a job, as the handler sees it.

    `cancelled` is a threading.Event (usable from sync and async handlers): set when the run
    was cancelled (cronbox.cancel), is no longer this worker's (lost, superseded), passed its
    deadline, or the worker is shutting down. `deadline` is the soft timeout from the message.
    """

    run_id: int
    job: str
    queue: str
    payload: Any
    fire_at: datetime | None
    attempt: int
    deadline: datetime | None
    idempotency_key: str
    tries: int = 1  # the handler's calls for this attempt (more under a Retry policy)
    cancel_reason: str | None = dataclasses.field(default=None, repr=False)
    _event: threading.Event | None = dataclasses.field(default=None, repr=False)

    @property
    def cancelled(self) -> threading.Event:
        """Set when the handler should stop (see cancel_reason: cancel, deadline, shutdown).
        Created on first use (most handlers never look); the kit creates it up front for
        sync handlers, so the thread and the loop never race to create it."""
        if self._event is None:
            self._event = threading.Event()
            if self.cancel_reason is not None:
                self._event.set()
        return self._event

    def _cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        if self._event is not None:
            self._event.set()

    @classmethod
    def from_message(cls, m: Any) -> Run:
        """A run from a pushed JSON message (the relay's format, docs/relay.md)."""
        if not isinstance(m, dict):
            raise MessageError("message: expected a JSON object")
        run_id = m.get("run_id")
        if not isinstance(run_id, int) or isinstance(run_id, bool):
            raise MessageError("run_id: expected an integer")
        attempt = m.get("attempt", 1)
        if not isinstance(attempt, int) or isinstance(attempt, bool):
            raise MessageError("attempt: expected an integer")
        return cls(run_id=run_id, job=str(m.get("job") or ""), queue=str(m.get("queue") or ""),
                   payload=m.get("payload"), fire_at=_timestamp(m, "fire_at"), attempt=attempt,
                   deadline=_timestamp(m, "deadline"),
                   idempotency_key=str(m.get("idempotency_key") or f"{run_id}:{attempt}"))


def _timestamp(m: dict[str, Any], key: str) -> datetime | None:
    value = m.get(key)
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise MessageError(f"{key}: expected an ISO 8601 timestamp") from None


def bounded(text: str, limit: int = ERROR_LIMIT) -> str:
    """Error text cut to `limit` characters, with a marker when cut; a NUL (which PostgreSQL
    cannot store in text) becomes U+FFFD, so an exception's text never costs its report."""
    text = storable(text)
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """succeeded (with result) or failed (with error and retryable); `report` False means the
    result is dropped: the run is no longer this worker's."""

    state: str
    result: Any = None
    error: str = ""
    retryable: bool = True

    @staticmethod
    def succeeded(result: Any) -> Outcome:
        if result is None:
            return Outcome("succeeded")
        try:
            text = orjson.dumps(result)
        except TypeError as exc:
            return Outcome("failed", error=bounded(f"result is not JSON: {exc}"), retryable=False)
        size = len(text)
        if json_has_nul(text):
            return Outcome("failed", error="result holds a NUL character (\\u0000), which PostgreSQL's jsonb "
                           "cannot store", retryable=False)
        if size > RESULT_LIMIT:
            return Outcome("failed", error=f"result too large: {size} bytes of JSON (limit {RESULT_LIMIT})",
                           retryable=False)
        return Outcome("succeeded", result=result)

    @staticmethod
    def failed(error: str, retryable: bool = True) -> Outcome:
        return Outcome("failed", error=bounded(error), retryable=retryable)

    @staticmethod
    def from_exception(exc: BaseException, *, tries: int = 1) -> Outcome:
        """A Fail's message; any other exception's type and message, then its traceback (the
        innermost frames kept when it is long), so the run's error says where it failed."""
        after = f" (after {tries} tries in the worker)" if tries > 1 else ""
        if isinstance(exc, Fail):
            return Outcome.failed((str(exc) or "failed") + after, exc.retryable)
        text = str(exc).strip()
        head = bounded(f"{type(exc).__qualname__}: {text}" if text else type(exc).__qualname__, HEAD_LIMIT) + after
        if exc.__traceback__ is None:  # never raised: no frames to show
            return Outcome.failed(head)
        # Each line bounded (a message may be huge), then the innermost frames kept.
        trace = "\n".join(bounded(line, HEAD_LIMIT) for line in "".join(traceback.format_exception(exc)).rstrip().split("\n"))
        room = ERROR_LIMIT - len(head) - 2
        if len(trace) > room:
            cut = len(trace) - room + len(TRACE_CUT) + 12
            trace = TRACE_CUT.format(cut) + trace[cut:]
        return Outcome.failed(f"{head}\n\n{trace}")

    def answer(self) -> dict[str, Any]:
        """The relay's outcome answer (docs/relay.md, Answers)."""
        if self.state == "succeeded":
            return {"state": "succeeded", "result": self.result}
        return {"state": "failed", "error": self.error, "retryable": self.retryable}
