"""cronbox.normalize_cron against a real database: it must agree with poller/cron.py exactly."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import errors

from poller.cron import CronError, normalize
from tests.cron_cases import INVALID, VALID

SQL_FILE = Path(__file__).resolve().parents[1] / "sql" / "functions" / "internal" / "normalize_cron.sql"


def sql_normalize(conn: psycopg.Connection, expr: str | None) -> str:
    row = conn.execute("SELECT cronbox.normalize_cron(%s)", (expr,)).fetchone()
    assert row is not None
    return row[0]


def python_message(expr: str) -> str:
    with pytest.raises(CronError) as info:
        normalize(expr)
    return str(info.value)


@pytest.mark.parametrize(("expr", "expected"), VALID)
def test_valid_expression_normalizes_like_python(conn: psycopg.Connection, expr: str, expected: str) -> None:
    assert sql_normalize(conn, expr) == expected == normalize(expr)


@pytest.mark.parametrize(("expr", "fragment"), INVALID)
def test_invalid_expression_raises_22023_with_python_message(
    conn: psycopg.Connection, expr: str, fragment: str
) -> None:
    with pytest.raises(errors.InvalidParameterValue) as info:
        sql_normalize(conn, expr)
    assert info.value.sqlstate == "22023"
    assert info.value.diag.message_primary == python_message(expr)
    assert fragment in python_message(expr)


def test_null_expression_raises_22004(conn: psycopg.Connection) -> None:
    with pytest.raises(errors.NullValueNotAllowed) as info:
        sql_normalize(conn, None)
    assert info.value.sqlstate == "22004"
    assert info.value.diag.message_primary == "cron: expression must not be NULL"


def test_function_is_immutable_pinned_and_documented(conn: psycopg.Connection) -> None:
    row = conn.execute(
        """
        SELECT p.provolatile, p.proconfig, pg_catalog.obj_description(p.oid, 'pg_proc')
          FROM pg_catalog.pg_proc AS p
         WHERE p.oid = 'cronbox.normalize_cron(text)'::pg_catalog.regprocedure
        """
    ).fetchone()
    assert row is not None
    volatility, config, comment = row
    assert volatility == "i"
    assert config == ["search_path=pg_catalog, pg_temp"]
    # The COMMENT repeats the file's opening comment, word for word.
    header = []
    for line in SQL_FILE.read_text().splitlines():
        if not line.startswith("--"):
            break
        header.append(line.removeprefix("--").strip())
    assert comment == "\n".join(header)


def test_file_reapplies_cleanly_with_empty_search_path(conn: psycopg.Connection) -> None:
    conn.execute("SET LOCAL search_path = ''")
    conn.execute(SQL_FILE.read_text())
    assert sql_normalize(conn, "@daily") == "0 0 0 * * * *"


_CRONISH = st.sampled_from(
    ["*", "?", "L", "l", "W", "#", "/", "-", ",", " ", " ", " ", "\t", "\n", "0", "00", "1", "5",
     "7", "8", "12", "13", "23", "24", "31", "59", "60", "1969", "2030", "MON", "fri", "sun", "JAN",
     "dec", "@", "@daily", "@Hourly", "@reboot", "H", "\u00a0", "\u017f", "\u0663", "x", "L5", "5L"]
)
_GARBAGE = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30),
    st.lists(_CRONISH, max_size=25).map("".join),
    st.lists(st.lists(_CRONISH, min_size=1, max_size=4).map("".join), min_size=4, max_size=8).map(" ".join),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=_GARBAGE)
def test_random_input_gets_the_same_answer_in_sql_and_python(conn: psycopg.Connection, expr: str) -> None:
    try:
        expected: str | None = normalize(expr)
        message = None
    except CronError as exc:
        expected, message = None, str(exc)
    try:
        with conn.transaction():  # a savepoint, so one error does not abort the next example
            got = sql_normalize(conn, expr)
    except errors.InvalidParameterValue as exc:
        assert message is not None, f"SQL rejected {expr!r} that Python accepted as {expected!r}"
        assert exc.diag.message_primary == message
    else:
        assert message is None, f"SQL accepted {expr!r} as {got!r}; Python said {message}"
        assert got == expected
