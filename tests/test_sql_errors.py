"""What a user sees in psql when a call is refused: the message, and at most one CONTEXT line
naming the function they called (the admin functions re-raise their errors themselves;
docs/sql.md, "Errors"). psql runs as a subprocess with its default settings."""

from __future__ import annotations

import subprocess

import psycopg
import pytest

from .test_sql_layout import _psql

ADMIN_CALLS = [
    ("SELECT cronbox.schedule('x', cron => '61 * * * *')", "22023", "cron: minute field", "schedule"),
    ("SELECT cronbox.schedule('x', every => '-1 second')", "22023", "every: must be a positive interval", "schedule"),
    ("SELECT cronbox.schedule('x', every => '1 hour', after => ARRAY['nope'])", None, None, "schedule"),
    ("SELECT cronbox.pause('nope')", "P0002", "name: no schedule named 'nope'", "pause"),
    ("SELECT cronbox.resume(NULL)", "22004", "name: must not be NULL", "resume"),
    ("SELECT cronbox.trigger('nope')", "P0002", "name: no schedule named 'nope'", "trigger"),
    ("SELECT cronbox.unschedule(repeat('x', 201))", "22023", "name: must be 1 to 200 characters", "unschedule"),
    ("SELECT cronbox.add_dependency('nope', 'other')", "P0002", "name: no schedule named 'nope'", "add_dependency"),
    ("SELECT cronbox.remove_dependency(job => 'nope', upstream => 'x')", "P0002", "job: no schedule named", "remove_dependency"),
    ("SELECT cronbox.cancel(1)", "P0002", "run_id: no run 1", "cancel"),
    ("SELECT cronbox.set_queue_limit('q', -1)", "22023", None, "set_queue_limit"),
    ("SELECT cronbox.redrive()", None, "redrive: say which dead letters", "redrive"),
]


def psql_error(dsn: str, statement: str) -> list[str]:
    out = subprocess.run([_psql(), "-X", dsn, "-c", statement], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0, out.stdout
    return out.stderr.strip().splitlines()


@pytest.mark.parametrize("statement, sqlstate, message, function", ADMIN_CALLS,
                         ids=[c[3] + str(i) for i, c in enumerate(ADMIN_CALLS)])
def test_a_refused_admin_call_prints_the_message_and_one_context_line_naming_it(fresh_dsn, statement, sqlstate,
                                                                                 message, function):
    lines = psql_error(fresh_dsn, statement)
    assert lines[0].startswith("ERROR:  "), lines
    if message:
        assert lines[0].startswith(f"ERROR:  {message}"), lines
    context = [line for line in lines if line.startswith("CONTEXT:")]
    assert len(context) <= 1 and len(lines) <= 3, lines  # message, at most DETAIL/HINT, one CONTEXT
    assert not context or f"function cronbox.{function}(" in context[0], lines
    assert not any(line.startswith("SQL statement") for line in lines), lines
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:  # the SQLSTATE is the API's, unchanged
        with pytest.raises(psycopg.Error) as err:
            conn.execute(statement)
        if sqlstate:
            assert err.value.sqlstate == sqlstate
        assert err.value.diag.message_primary == lines[0].removeprefix("ERROR:  ")


def test_detail_and_hint_survive_the_re_raise(fresh_dsn):
    """No body raises with DETAIL or HINT today; a stand-in body (this throwaway database only)
    shows the wrapper passes them on, with the SQLSTATE."""
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("""CREATE OR REPLACE FUNCTION cronbox.cancel_at(run_id bigint, p_now timestamptz DEFAULT now())
            RETURNS text LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'run_id: probe' USING ERRCODE = '55000', DETAIL = 'the detail', HINT = 'the hint'; END $$""")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as err:
            conn.execute("SELECT cronbox.cancel(1)")
        assert (err.value.diag.message_detail, err.value.diag.message_hint) == ("the detail", "the hint")
    lines = psql_error(fresh_dsn, "SELECT cronbox.cancel(1)")
    assert [line.split(":")[0] for line in lines] == ["ERROR", "DETAIL", "HINT", "CONTEXT"], lines


def test_worker_functions_keep_two_context_lines_and_no_exception_block(fresh_dsn):
    """The hot worker path takes no subtransaction per call: a refused complete_run shows the
    body that raised and the wrapper (documented), never more."""
    lines = psql_error(fresh_dsn, "SELECT cronbox.complete_run(1)")
    assert lines[0] == "ERROR:  run_id: no run 1"
    assert [line.split(" ")[0] for line in lines[1:]] == ["CONTEXT:", "PL/pgSQL"]
    assert "cronbox.complete_run_at(" in lines[1] and "cronbox.complete_run(" in lines[2], lines
    with psycopg.connect(fresh_dsn) as conn:
        src = conn.execute("SELECT prosrc FROM pg_catalog.pg_proc WHERE oid = ANY (ARRAY["
                           "'cronbox.complete_runs(bigint[],jsonb[])'::regprocedure, "
                           "'cronbox.claim_runs(text,text,integer,boolean)'::regprocedure])").fetchall()
    assert all("EXCEPTION" not in s.upper() for (s,) in src)
