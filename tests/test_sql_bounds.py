"""Bounds that are not refusals: a worker's error text is kept but cut with a marker, the
size limits follow the operator's settings within a fixed ceiling, and the cases once
reported by hand each get their clear error."""

from __future__ import annotations

import psycopg
import pytest

from .runs_support import active, at, dispatch, future, job


def _one_run(conn, name: str) -> int:
    job(conn, name)
    future(conn, name, 0)
    dispatch(conn, 0)
    [rid] = active(conn, name)
    return rid


def test_a_ten_megabyte_error_is_kept_cut_with_a_marker(conn):
    rid = _one_run(conn, "big-error")
    conn.execute("SELECT cronbox.fail_run(%s, %s, false)", (rid, "E" * 10_000_000))
    error = conn.execute("SELECT error FROM cronbox.runs WHERE run_id = %s", (rid,)).fetchone()[0]
    assert len(error) <= 4000
    assert error.startswith("EEEE") and error.endswith("[truncated by cronbox: 10000000 characters in all]")


def test_payload_limit_follows_the_setting_within_the_ceiling(conn):
    big = '{"a": "' + "x" * 70_000 + '"}'
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"^payload: must be at most 65536 bytes"), \
            conn.transaction():
        conn.execute("SELECT cronbox.schedule('p', every => '1 hour', payload => %s::jsonb)", (big,))
    conn.execute("SET LOCAL cronbox.max_payload_bytes = '100000'")
    conn.execute("SELECT cronbox.schedule('p', every => '1 hour', payload => %s::jsonb)", (big,))
    conn.execute("SET LOCAL cronbox.max_payload_bytes = '999999999'")  # clamped to 16 MiB
    assert conn.execute("SELECT cronbox.max_payload_bytes()").fetchone()[0] == 16 * 1024 * 1024


@pytest.mark.parametrize("call, message", [
    ("cronbox.schedule('x', every => '100000000 days')", "every: must be at most 366 days"),
    ("cronbox.schedule('x', at => '4713-01-01 BC')", "at: must be a finite time from 1970-01-01"),
    ("cronbox.schedule('x', at => 'infinity')", "at: must be a finite time"),
    ("cronbox.schedule('x', cron => '0 0 31 2 *')", "cron: no listed month has day 31"),
    ("cronbox.schedule('x', cron => '0 0 0 1 1 * 2020,2021')", "cron: every year listed"),
    # croniter would ignore the 15th (every third Friday) or find no date at all (the 1st)
    ("cronbox.schedule('x', cron => '0 0 15 * 5#3')", r"cron: a day-of-month restriction \(15\)"),
    ("cronbox.schedule('x', cron => '0 0 1 * 5L')", r"cron: a day-of-month restriction \(1\)"),
    ("cronbox.schedule('x', cron => '0 0 L * FRI#3')", r"cron: a day-of-month restriction \(L\)"),
    ("cronbox.schedule('x', at => now() - interval '2 days')", "at: .* is before the catch-up window"),
    ("cronbox.schedule('x', every => '1 hour', queue => 'cronbox.notifications')", "queue: queue names starting with"),
    ("cronbox.schedule('cronbox.x', every => '1 hour')", "name: names starting with"),
    ("cronbox.schedule('x', every => '1 hour', timeout => '100000000 days')", "timeout: must be at most 30 days"),
    ("cronbox.set_queue_limit('a b;c', 1)", "queue: must be 1 to 100 characters"),
    ("cronbox.complete_runs(ARRAY[1, 2]::bigint[], ARRAY['{}'::jsonb])", "results: must have one element per run_id"),
    ("cronbox.fail_runs(ARRAY[1]::bigint[], ARRAY['x'], NULL)", "retryable: must be true or false"),
    ("cronbox.fail_runs(ARRAY[1, NULL]::bigint[], ARRAY['x', 'y'])", "run_ids: must not contain NULL"),
    ("cronbox.dispatch(-1)", "p_limit: must be between 1 and 100000"),
])
def test_reported_bad_calls_get_a_clear_error(conn, call, message):
    with pytest.raises(psycopg.Error, match=f"^{message}") as err:
        conn.execute(f"SELECT * FROM {call}")
    assert err.value.sqlstate in ("22004", "22023")


def _nested(levels: int) -> str:
    """A JSON object `levels` deep: the object, then levels - 1 arrays inside one another."""
    inner = levels - 1
    return '{"d": ' + "[" * inner + "]" * inner + "}"


# Deeper than 2,048 levels is refused at every door a JSON value comes in by; what is stored is
# then always shallow enough for what reads it next: the claim copies a payload into its message
# (jsonb_build_object), which needs more stack per level than the parse that stored it, so a
# payload near the parser's limit (~14,500 levels at the default max_stack_depth) used to be
# stored and then fail every claim that reached its row, other queues' rows included.
@pytest.mark.parametrize("call", [
    "SELECT cronbox.schedule('deep', every => '1 hour', payload => %s::jsonb)",
    "SELECT cronbox.trigger('plain', payload => %s::jsonb)",
    "SELECT cronbox.schedule('plain', every => '1 hour', payload => %s::jsonb)",  # a schedule's update
])
@pytest.mark.parametrize("levels", [2049, 14_000])
def test_a_payload_nested_past_2048_levels_is_refused_with_nothing_written(conn, call, levels):
    conn.execute("SELECT cronbox.schedule('plain', every => '1 hour')")
    before = conn.execute("SELECT (SELECT count(*) FROM cronbox.job), (SELECT count(*) FROM cronbox.job_future),"
                          " (SELECT payload::text FROM cronbox.job WHERE name = 'plain')").fetchone()
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match=r"^payload: must be nested at most 2048 levels deep"), conn.transaction():
        conn.execute(call, (_nested(levels),))
    assert conn.execute("SELECT (SELECT count(*) FROM cronbox.job), (SELECT count(*) FROM cronbox.job_future),"
                        " (SELECT payload::text FROM cronbox.job WHERE name = 'plain')").fetchone() == before


def test_a_payload_2048_levels_deep_is_stored_claimed_and_sent_as_it_was(conn):
    deep = _nested(2048)
    job(conn, "deepest", payload=deep)
    future(conn, "deepest", 0)
    dispatch(conn, 0)
    [(message, key)] = conn.execute(
        "SELECT message::text, idempotency_key FROM cronbox.claim_outbox_at('relay-a', 10, p_now => %s)",
        (at(1),)).fetchall()
    assert "[" * 2047 + "]" * 2047 in message and key


@pytest.mark.parametrize("call", [
    "SELECT cronbox.complete_run(%(rid)s, %(v)s::jsonb)",
    "SELECT * FROM cronbox.complete_runs(ARRAY[%(rid)s]::bigint[], ARRAY[%(v)s::jsonb])",
])
def test_a_result_nested_past_2048_levels_is_refused_and_the_run_stays_in_flight(conn, call):
    rid = _one_run(conn, "deep-result")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"^results?: (each )?must be nested at most 2048"), \
            conn.transaction():
        conn.execute(call, {"rid": rid, "v": _nested(5000)})
    assert active(conn, "deep-result") == [rid]
    conn.execute(call, {"rid": rid, "v": _nested(2048)})
    assert active(conn, "deep-result") == []


def test_process_info_nested_past_2048_levels_is_refused_at_registration_and_ignored_by_heartbeats(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"^info: .*nested at most 2048 levels deep"), \
            conn.transaction():
        conn.execute("SELECT cronbox.register_worker('w:h:1', 'h', 1, 'test', info => %s::jsonb)", (_nested(3000),))
    pid = conn.execute("SELECT cronbox.register_worker('w:h:1', 'h', 1, 'test', info => '{\"a\": 1}')").fetchone()[0]
    assert conn.execute("SELECT cronbox.heartbeat_worker(%s, %s::jsonb)", (pid, _nested(3000))).fetchone()[0]
    assert conn.execute("SELECT info FROM cronbox.process WHERE process_id = %s", (pid,)).fetchone()[0] == {"a": 1}
