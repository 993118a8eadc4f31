"""A run's message written here from the parts the claim returns (`claim_outbox(p_parts => true)`):
the same text, byte for byte, as PostgreSQL writes (cronbox.run_message_json: jsonb's key order
and spacing, strings escaped as to_json escapes them, times as to_json writes a timestamptz in
the session's time zone). Writing it in the database was the largest part of the claim's CPU
per row (~4 µs: to_json per value, the json check of the text); here ~0.6 µs (timed alone, 1,000-row claims).

The message content is still decided by the row the dispatch transaction wrote: the parts are
that row's columns as the claim reads them, and the deadline the claim computes. Only sessions
whose time zone is UTC ask for parts (`renders_times`): a timestamptz is written with the
session's offset, which this module writes as `+00:00`; any other session gets the message built
by the database, as before. The claim returns parts only for times within 1900-2100, sent as
float8 epoch seconds (exact to the microsecond there: below 2^32 seconds from the epoch).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import NamedTuple

import orjson

# Time zone names whose offset is +00:00 at every instant (PostgreSQL's tz database aliases).
UTC_ZONES = frozenset({"UTC", "Etc/UTC", "UCT", "Etc/UCT", "GMT", "Etc/GMT", "GMT0", "Etc/GMT0", "GMT+0",
                       "Etc/GMT+0", "GMT-0", "Etc/GMT-0", "Greenwich", "Etc/Greenwich", "Universal",
                       "Etc/Universal", "Zulu", "Etc/Zulu"})
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_QUOTE = '"'  # the idempotency key is digits and a colon: quoted as it is, as the database does


def renders_times(time_zone: str | None) -> bool:
    """Whether a session with this TimeZone setting may ask for parts (its times are UTC)."""
    return time_zone in UTC_ZONES


@lru_cache(maxsize=4096)
def _whole_second(seconds: int) -> str:
    """`2026-11-29T08:00:00` for whole epoch seconds: the date and time of day, written once per
    second (strftime and the datetime arithmetic were ~2.5 µs of iso_time's ~3.2)."""
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")


def iso_time(epoch: float) -> str:
    """A timestamptz as to_json writes it in a UTC session, quoted: `"2026-11-29T08:00:00.25+00:00"`
    (fractional seconds without trailing zeros, none when whole). `epoch`: float8 seconds, within
    1900-2100 (the microseconds are exact there). Times that differ within a second (runs claimed
    ahead of their due times each get their own deadline) share the written second."""
    seconds, fraction = divmod(round(epoch * 1_000_000), 1_000_000)
    if fraction:
        return '"' + _whole_second(seconds) + "." + f"{fraction:06d}".rstrip("0") + '+00:00"'
    return '"' + _whole_second(seconds) + '+00:00"'


class Columns(NamedTuple):
    """Where a claimed row holds each part (its position in the row)."""
    message: int   # the message's text, NULL when it came as its parts
    run_id: int
    job: int
    queue: int
    payload: int   # the payload as jsonb writes it
    fire_at: int   # float8 epoch seconds
    attempt: int
    deadline: int  # float8 epoch seconds; NULL: the message came whole
    key: int       # the idempotency key


def bodies(rows: Sequence[tuple], at: Columns) -> list[str]:
    """Each claimed row's message text: as the claim returned it, or, for a run whose message came
    as its parts (a deadline), the text cronbox.run_message_json(run_id, job, queue, payload, fire_at,
    attempt, deadline) writes. Times and queue names repeat within a claim (a burst's fires share
    their time, a claim its deadline): each is written once. One loop, no call per row but the job
    name's escape (a call per row was a third of the time)."""
    times: dict[float, str] = {}
    queues: dict[str, str] = {}
    dumps = orjson.dumps
    out: list[str] = []
    m, i, j, q, p, f, a, d, k = at  # positions as locals: a field of a NamedTuple is a call
    for r in rows:
        deadline = r[d]
        if deadline is None:
            out.append(r[m])
            continue
        until = times.get(deadline)
        if until is None:
            until = times[deadline] = iso_time(deadline)
        fire_at = r[f]
        fire = "null" if fire_at is None else times.get(fire_at)
        if fire is None:
            fire = times[fire_at] = iso_time(fire_at)
        queue = r[q]
        name = queues.get(queue)
        if name is None:
            name = queues[queue] = "null" if queue is None else dumps(queue).decode()
        job, attempt, payload, key = r[j], r[a], r[p], r[k]
        out.append(f'{{"job": {"null" if job is None else dumps(job).decode()}, "queue": {name}, '
                   f'"run_id": {r[i]}, "attempt": {"null" if attempt is None else attempt}, '
                   f'"fire_at": {fire}, "payload": {"null" if payload is None else payload}, '
                   f'"deadline": {until}, "idempotency_key": {"null" if key is None else f"{_QUOTE}{key}{_QUOTE}"}}}')
    return out
