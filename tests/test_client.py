"""cronbox.client: every admin function has a typed call whose parameters are exactly the SQL
function's (read from pg_proc, so an option added in SQL fails here until the client offers it),
calls join the caller's transaction, results are typed, errors are typed per SQLSTATE; the
async twins do the same on an AsyncConnection."""

from __future__ import annotations

import inspect
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from cronbox import client
from cronbox.client import calls, reads

ADMIN = Path(__file__).resolve().parent.parent / "sql" / "functions" / "admin"
SHORT = {"timestamptz": "timestamp with time zone"}


def test_every_admin_function_has_a_call_with_exactly_its_parameters_and_types(conn):
    functions = sorted(p.stem for p in ADMIN.glob("*.sql"))
    assert sorted(calls.SQL_TYPES) == functions, "add a call in cronbox/client/calls.py for each admin function"
    for function in functions:
        rows = conn.execute(
            "SELECT p.proargnames, p.proargmodes, "
            "       array(SELECT pg_catalog.format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) t) "
            "FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = %s",
            (function,)).fetchall()
        assert len(rows) == 1, f"cronbox.{function}: {len(rows)} overloads"
        names, modes, types = rows[0]
        inputs = [n for n, m in zip(names, modes or ["i"] * len(names)) if m in ("i", "b", "v")]
        declared = calls.SQL_TYPES[function]
        assert inputs == list(declared), f"cronbox.{function}: parameters {inputs} in SQL, {list(declared)} in the client"
        assert [SHORT.get(t, t) for t in declared.values()] == types, f"cronbox.{function}: types"
        offered = {calls.PYTHON_NAMES.get(n, n) for n in inputs} - calls.NOT_OFFERED.get(function, set())
        params = set(inspect.signature(calls.OPS[function].build).parameters)
        assert params == offered, f"client.{function}: {sorted(offered - params)} missing, {sorted(params - offered)} extra"
        assert getattr(client, function) is calls.OPS[function] and getattr(client.aio, function)


def test_the_record_dataclasses_name_columns_of_their_views(conn):
    for view, cls in (("schedules", reads.ScheduleRecord), ("runs", reads.RunRecord)):
        columns = [c.name for c in conn.execute(f"SELECT * FROM cronbox.{view} LIMIT 0").description]
        fields = [f.name for f in __import__("dataclasses").fields(cls) if f.name != "extra"]
        assert fields == columns, f"{cls.__name__} vs cronbox.{view}"


def test_calls_run_in_the_callers_transaction_with_typed_results(conn):
    job = client.schedule(conn, "client-report", every=timedelta(seconds=30), payload={"kind": "daily"},
                          max_attempts=3, retry_delay="5 seconds")
    assert job.name == "client-report" and isinstance(job.job_id, int)
    fires = client.next_fires(conn, "client-report", 3)
    assert len(fires) == 3 and fires[1] - fires[0] == timedelta(seconds=30) and fires[0].tzinfo is not None
    assert client.preview(conn, cron="30 2 * * *", timezone="Europe/Berlin", n=2)[0].astimezone(timezone.utc).hour in (0, 1)
    assert client.pause(conn, "client-report", reason="freeze") is True
    rec = client.get_schedule(conn, "client-report")
    assert rec.status == "paused" and rec.paused_reason == "freeze" and rec.queue == "default"
    assert client.resume(conn, "client-report") is True and client.resume(conn, "client-report") is False
    fired = client.trigger(conn, "client-report", payload={"kind": "adhoc"})
    run_id = conn.execute("SELECT run_id FROM cronbox.runs WHERE job = 'client-report'").fetchone()[0]
    run = client.get_run(conn, run_id)
    assert isinstance(fired.future_id, int) and run.state == "dispatched" and run.payload == {"kind": "adhoc"}
    assert client.cancel(conn, run_id) == "cancelled"
    cal = client.create_calendar(conn, "client-holidays", dates=[date(2030, 12, 25)],
                                 ranges=[(date(2031, 1, 1), date(2031, 1, 3))])
    assert isinstance(cal, int) and client.drop_calendar(conn, "client-holidays") is True
    client.schedule(conn, "client-upstream", cron="0 3 * * *")
    assert client.add_dependency(conn, "client-report", "client-upstream", within=timedelta(hours=1)) is None
    assert client.remove_dependency(conn, "client-report", "client-upstream") is True
    assert client.set_queue_limit(conn, "client-q", 5) == 0 and client.set_queue_limit(conn, "client-q", None) is None
    assert client.redrive(conn, queue="client-q") == 0
    assert client.pause_schedules(conn, name_like="client-up%") == 1
    assert client.resume_schedules(conn, name_like="client-up%", reason="thaw") == 1
    assert client.unschedule(conn, "client-report") is True and client.get_schedule(conn, "client-report") is None
    conn.execute("SAVEPOINT before_commit")  # still one transaction: the fixture rolls it all back


def test_errors_are_typed_per_sqlstate_and_name_the_parameter(conn):
    conn.execute("SAVEPOINT s")
    with pytest.raises(client.InvalidValue) as bad:
        client.schedule(conn, "client-bad", cron="61 * * * *")
    assert bad.value.sqlstate == "22023" and bad.value.param == "cron" and isinstance(bad.value, ValueError)
    assert isinstance(bad.value.__cause__, psycopg.errors.InvalidParameterValue)
    conn.execute("ROLLBACK TO SAVEPOINT s")
    with pytest.raises(client.NotFound) as missing:
        client.pause(conn, "client-nobody")
    assert missing.value.sqlstate == "P0002" and isinstance(missing.value, LookupError)
    conn.execute("ROLLBACK TO SAVEPOINT s")
    with pytest.raises(TypeError, match="timezone-aware"):
        client.schedule(conn, "client-naive", at=datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="every"):
        client.schedule(conn, "client-int", every=30)


async def test_async_calls_on_an_async_connection(shared_dsn):
    async with await psycopg.AsyncConnection.connect(shared_dsn) as aconn:
        job = await client.aio.schedule(aconn, "client-async", at=datetime.now(timezone.utc) + timedelta(days=1))
        assert (await client.aio.get_schedule(aconn, "client-async")).job_id == job.job_id
        with pytest.raises(client.InvalidValue):
            await client.aio.schedule(aconn, "client-async", every=timedelta(0))
        await aconn.rollback()
        assert await client.aio.get_schedule(aconn, "client-async") is None  # never committed


def test_pools_and_stakeholders_through_the_client(conn):
    assert client.set_pool(conn, "client-gpu", 4) == 0
    job = client.schedule(conn, "client-train", every=timedelta(hours=1), needs={"client-gpu": 2},
                          on_unavailable="retry", unavailable_timeout="1 hour", notify=["mailto:ml@example.com"])
    row = conn.execute("SELECT needs, on_unavailable, notify FROM cronbox.job WHERE job_id = %s", (job.job_id,)).fetchone()
    assert row == ({"client-gpu": 2}, "retry", ["mailto:ml@example.com"])
    with pytest.raises(client.WrongState):
        client.set_pool(conn, "client-gpu", None)
