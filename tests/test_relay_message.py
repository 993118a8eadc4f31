"""The relay writes a run's message from the parts the claim returns (relay/message.py): the same
text, byte for byte, as the database writes (cronbox.run_message_json), whatever the job's name,
payload and times hold; what it cannot write exactly (a session not in UTC, times outside
1900-2100, a redriven run's message) the database still writes."""

from __future__ import annotations

import random

from cronbox import db
from relay.message import iso_time, renders_times
from relay.message import bodies as write_bodies
from relay.store import _CLAIM, _PARTS

from .relay_support import enqueue

# every character PostgreSQL text holds below 0x80 (no NUL), and some beyond
ODD_NAME = "".join(map(chr, range(1, 128))) + "ünï€😀\u2028\u2029\ufeff"


def expected_texts(conn, ids: list[int]) -> dict[int, str]:
    """Each run's message as the database writes it, deadline as the claim will compute it."""
    return dict(conn.execute(
        "SELECT o.outbox_id, cronbox.run_message_json(o.outbox_id, o.job_name, o.queue, o.payload, o.fire_at, "
        "o.attempt, greatest(o.available_at, now()) + o.timeout)::text FROM cronbox.outbox o "
        "WHERE o.outbox_id = ANY (%s)", (ids,)).fetchall())


def relay_claim(conn, limit: int = 1000, parts: bool = True) -> list[tuple]:
    """The relay's own claim statement, in binary as the relay reads it."""
    return conn.execute(_CLAIM, ("r1", limit, "30 seconds", None, None, "0", None, parts), binary=True).fetchall()


def test_the_relay_writes_each_runs_message_as_the_database_does(conn):
    conn.execute("SET LOCAL TimeZone = 'UTC'")
    runs = enqueue(conn, 12, job='quo"te \\ ünïcode')
    runs += enqueue(conn, 3, job="plain", queue="q.b:c-d_e")
    # schedule() refuses control characters in a name; a row written before it did holds any text
    conn.execute("UPDATE cronbox.outbox SET job_name = %s WHERE outbox_id = ANY (%s)", (ODD_NAME, runs[:6]))
    # times with every kind of fraction, both sides of the epoch, at the range's ends
    times = ["2026-11-29 08:00:00+00", "2026-11-29 08:00:00.5+00", "2026-11-29 08:00:00.000001+00",
             "2026-11-29 08:00:59.999999+00", "1969-12-31 23:59:59.999999+00", "1900-01-01 00:00:00+00",
             "2099-12-31 23:59:59.999999+00", "1970-01-01 00:00:00+00", "2038-01-19 03:14:08.12+00"]
    for run_id, at in zip(runs, times):
        conn.execute("UPDATE cronbox.outbox SET fire_at = %s WHERE outbox_id = %s", (at, run_id))
    payloads = [{"a": [1, 2.5, None, True], "é": {"n": "x\"y\u0001"}, "": 1e20}, None, {"k": ODD_NAME},
                [1, "two"], "text", 12.5e-7, {"deep": [[[{"x": []}]]]}]
    for run_id, payload in zip(runs[3:], payloads):
        conn.execute("UPDATE cronbox.outbox SET payload = %s WHERE outbox_id = %s",
                     (None if payload is None else db.Jsonb(payload), run_id))
    conn.execute("UPDATE cronbox.outbox SET attempt = 7 WHERE outbox_id = %s", (runs[-1],))
    expected = expected_texts(conn, runs)
    raw = relay_claim(conn)
    assert sorted(r[0] for r in raw) == runs
    assert all(r[3] is None for r in raw)  # every message came as its parts
    assert dict(zip((r[0] for r in raw), write_bodies(raw, _PARTS))) == expected


def test_times_are_written_to_the_microsecond_across_the_range(conn):
    conn.execute("SET LOCAL TimeZone = 'UTC'")
    rng = random.Random(34)
    micros = [rng.randrange(-2208988800_000000, 4102444800_000000) for _ in range(2000)]
    micros += [m - m % 10 ** rng.randrange(0, 7) for m in micros[:500]]  # trailing zeros in the fraction
    got = conn.execute(
        "SELECT to_json(t)::text, date_part('epoch', t) "
        "FROM unnest(%s::bigint[]) m, LATERAL (SELECT timestamptz 'epoch' + m * interval '1 microsecond' AS t) x",
        (micros,), binary=True).fetchall()
    assert [iso_time(epoch) for _, epoch in got] == [text for text, _ in got]


def test_the_database_writes_what_the_relay_would_not_write_exactly(conn):
    conn.execute("SET LOCAL TimeZone = 'UTC'")
    runs = enqueue(conn, 3, job="edges")
    conn.execute("UPDATE cronbox.outbox SET fire_at = '2100-01-01 00:00:00+00' WHERE outbox_id = %s", (runs[0],))
    conn.execute("UPDATE cronbox.outbox SET fire_at = '1899-12-31 23:59:59.999999+00' WHERE outbox_id = %s", (runs[1],))
    redriven = '{"run_id": 1, "job": "x", "idempotency_key": "1:1", "fire_at": "2026-01-01T00:00:00+00:00"}'
    conn.execute("UPDATE cronbox.outbox SET message = %s::jsonb WHERE outbox_id = %s", (redriven, runs[2]))
    expected = expected_texts(conn, runs[:2])
    expected[runs[2]] = conn.execute(
        "SELECT (o.message || jsonb_build_object('deadline', greatest(o.available_at, now()) + o.timeout))::text "
        "FROM cronbox.outbox o WHERE o.outbox_id = %s", (runs[2],)).fetchone()[0]
    raw = relay_claim(conn)
    assert all(r[3] is not None for r in raw)  # none came as parts
    assert dict(zip((r[0] for r in raw), write_bodies(raw, _PARTS))) == expected


def test_a_session_not_in_utc_gets_the_message_the_database_writes(conn):
    # a timestamptz is written with the session's offset: only a UTC session asks for parts
    assert renders_times("UTC") and renders_times("Etc/UTC") and not renders_times("Europe/London")
    assert not renders_times("Asia/Kolkata") and not renders_times(None)
    conn.execute("SET LOCAL TimeZone = 'Asia/Kolkata'")
    runs = enqueue(conn, 2, job="kolkata")
    expected = expected_texts(conn, runs)
    raw = relay_claim(conn, parts=renders_times(conn.info.parameter_status("TimeZone")))
    assert all(r[3] is not None for r in raw) and "+05:30" in raw[0][3]
    assert dict(zip((r[0] for r in raw), write_bodies(raw, _PARTS))) == expected
