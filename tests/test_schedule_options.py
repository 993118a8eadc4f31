"""cronbox.schedule_options() is the one declaration of schedule()'s options: these tests read
it and fail when an edit that adding an option needs was forgotten (a parameter of either
signature, the column of cronbox.job, the view, the arguments schedule_at hands on, a bound
check) and prove that a declared option is checked, stored, compared and updated from the
declaration alone (docs/sql.md, "Adding a schedule option")."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg import sql

NULL, INVALID = "22004", "22023"
NOT_OPTIONS = {"schedule": {"name", "reason"}, "schedule_at": {"name", "reason", "p_now"}}


def _options(conn: psycopg.Connection) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT o.* FROM cronbox.schedule_options() o")
    names = [c.name for c in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _function(conn: psycopg.Connection, name: str) -> tuple[int, list[str], list[str], str]:
    """oid, argument names, argument types, definition of the one function cronbox.<name>."""
    rows = conn.execute(
        "SELECT p.oid::integer, p.proargnames, "
        "       ARRAY(SELECT pg_catalog.format_type(t, NULL) FROM unnest(p.proargtypes) t), "
        "       pg_catalog.pg_get_functiondef(p.oid) "
        "FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = %s",
        (name,)).fetchall()
    assert len(rows) == 1, f"cronbox.{name}: {len(rows)} functions"
    return rows[0]


def _same_value(conn: psycopg.Connection, typ: str, declared: str | None, expr: str | None) -> bool:
    """The declared default (a literal of the option's type) equals a default expression."""
    q = sql.SQL("SELECT CAST({} AS {}) IS NOT DISTINCT FROM ({})").format(
        sql.Literal(declared), sql.SQL(typ), sql.SQL(expr or "NULL"))
    return conn.execute(q).fetchone()[0]


def test_the_declaration_is_well_formed(conn):
    opts = _options(conn)
    assert len(opts) >= 20
    assert len({o["option"] for o in opts}) == len(opts)
    for o in opts:
        assert o["check_kind"] in ("custom", "one_of", "range"), o
        if o["check_kind"] == "one_of":
            assert o["type"] == "text" and o["allowed"], o
            assert o["default_value"] is None or o["default_value"] in o["allowed"], o
        if o["check_kind"] == "range":
            assert o["type"] in ("interval", "integer", "bigint", "smallint", "numeric"), o
            assert o["lower_bound"] is not None or o["upper_bound"] is not None, o


@pytest.mark.parametrize("fn", ["schedule", "schedule_at"])
def test_every_declared_option_is_a_parameter_of_the_signature_in_order_with_its_type_and_default(conn, fn):
    oid, names, types, _ = _function(conn, fn)
    params = [(n, t, i) for i, (n, t) in enumerate(zip(names, types)) if n not in NOT_OPTIONS[fn]]
    opts = _options(conn)
    # Same names in the same order: positional calls keep their meaning.
    assert [n for n, _, _ in params] == [o["option"] for o in opts]
    for (name, typ, i), o in zip(params, opts):
        assert typ == o["type"], f"{fn}({name}): type {typ}, declared {o['type']}"
        default = conn.execute("SELECT pg_catalog.pg_get_function_arg_default(%s, %s)", (oid, i + 1)).fetchone()[0]
        assert default is not None, f"{fn}({name}) has no default: every option must be optional"
        assert _same_value(conn, typ, o["default_value"], default), \
            f"{fn}({name}) DEFAULT {default}, declared {o['default_value']!r}"


def test_every_declared_option_is_a_column_of_job_with_its_type_and_default(conn):
    cols = {r[0]: r[1:] for r in conn.execute(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "       pg_catalog.pg_get_expr(d.adbin, d.adrelid) "
        "FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef d "
        "  ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = 'cronbox.job'::regclass AND a.attnum > 0 AND NOT a.attisdropped")}
    for o in _options(conn):
        assert o["option"] in cols, f"no column cronbox.job.{o['option']} (a migration adds it)"
        typ, notnull, default = cols[o["option"]]
        assert typ == o["type"], f"job.{o['option']}: type {typ}, declared {o['type']}"
        assert _same_value(conn, typ, o["default_value"], default), \
            f"job.{o['option']} DEFAULT {default}, declared {o['default_value']!r}"
        if notnull:
            assert o["default_value"] is not None, f"job.{o['option']} is NOT NULL, declared default NULL"


def test_every_declared_option_is_a_column_of_schedule_definitions(conn):
    view = [r[0] for r in conn.execute(
        "SELECT a.attname FROM pg_catalog.pg_attribute a "
        "WHERE a.attrelid = 'cronbox.schedule_definitions'::regclass AND a.attnum > 0 ORDER BY a.attnum")]
    missing = [o["option"] for o in _options(conn) if o["option"] not in view]
    assert missing == [], "re-run cronbox migrate: sql/views/schedule_definitions.sql lists the declared options"


def test_schedule_hands_on_every_argument_and_schedule_at_passes_every_option_to_the_checks(conn):
    _, names, _, body = _function(conn, "schedule")
    called = re.search(r"cronbox\.schedule_at\(([^;]*)\)", body).group(1)
    assert called == ", ".join(f"${i}" for i in range(1, len(names) + 1)) + ", now()"
    _, _, _, body = _function(conn, "schedule_at")
    for o in _options(conn) + [{"option": "name"}]:
        assert re.search(rf"'{o['option']}', schedule_at\.{o['option']}\b", body), \
            f"schedule_at's jsonb_build_object lacks '{o['option']}', schedule_at.{o['option']}"


def test_every_custom_option_is_checked_by_hand_in_validate_schedule_args(conn):
    _, _, _, body = _function(conn, "validate_schedule_args")
    # and the checkers it calls for a group of options (needs, notify: validate_resource_args)
    for helper in re.findall(r"cronbox\.(validate_\w+)\(", body):
        body += _function(conn, helper)[3]
    unchecked = [o["option"] for o in _options(conn)
                 if o["check_kind"] == "custom" and f"'{o['option']}: " not in body]
    assert unchecked == [], "a 'custom' option needs its checks (message '<option>: ...') there"


# Generated from the declaration: a new option with a declared bound is covered with no edit here.

def _base(opt: dict[str, Any]) -> dict[str, object]:
    return {"name": f"opt-{opt['option']}", "every": "1 hour"}


def _call(conn: psycopg.Connection, args: dict[str, object]) -> int:
    q = sql.SQL("SELECT cronbox.schedule({})").format(
        sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in args))
    return conn.execute(q, args).fetchone()[0]


def _step(typ: str) -> str:
    return "1 second" if typ == "interval" else "1"


def _bad_values(conn: psycopg.Connection, o: dict[str, Any]) -> list[tuple[object, str]]:
    """(value, SQLSTATE) pairs the declaration says must be refused."""
    bad: list[tuple[object, str]] = []
    if o["default_value"] is not None:
        bad.append((None, NULL))
    if o["check_kind"] == "one_of":
        bad.append(("no-such-" + o["option"], INVALID))
    if o["check_kind"] == "range":
        t = o["type"]
        if o["lower_bound"] is not None:
            q = "SELECT (CAST(%s AS {t}) - CAST(%s AS {t}))::text" if not o["lower_exclusive"] else "SELECT CAST(%s AS {t})::text"
            args = (o["lower_bound"], _step(t)) if not o["lower_exclusive"] else (o["lower_bound"],)
            bad.append((conn.execute(q.replace("{t}", t), args).fetchone()[0], INVALID))
        if o["upper_bound"] is not None:
            q = "SELECT (CAST(%s AS {t}) + CAST(%s AS {t}))::text".replace("{t}", t)
            bad.append((conn.execute(q, (o["upper_bound"], _step(t))).fetchone()[0], INVALID))
    return bad


def _good_values(conn: psycopg.Connection, o: dict[str, Any]) -> list[str]:
    """Values other than the default that the declaration allows (some may clash with another option)."""
    if o["check_kind"] == "one_of":
        vals = list(o["allowed"])
    else:
        vals = [o["upper_bound"]]
        if o["lower_bound"] is not None:
            q = "SELECT (CAST(%s AS {t}) + CAST(%s AS {t}))::text".replace("{t}", o["type"])
            vals += [o["lower_bound"], conn.execute(q, (o["lower_bound"], _step(o["type"]))).fetchone()[0]]
    return [v for v in vals if v is not None and v != o["default_value"]]


def test_every_declared_bound_is_checked_before_writing_with_the_option_named(conn):
    failures = []
    for o in _options(conn):
        if o["check_kind"] == "custom":
            continue
        for value, state in _bad_values(conn, o):
            args = {**_base(o), o["option"]: value}
            try:
                with conn.transaction():
                    _call(conn, args)
            except psycopg.Error as exc:
                msg = exc.diag.message_primary or ""
                if exc.sqlstate != state or not msg.startswith(o["option"] + ": "):
                    failures.append(f"{o['option']} => {value!r}: {exc.sqlstate} {msg!r}, want {state}")
            else:
                failures.append(f"{o['option']} => {value!r}: accepted")
    assert failures == []
    assert conn.execute("SELECT count(*) FROM cronbox.job WHERE name LIKE 'opt-%'").fetchone()[0] == 0


def test_every_declared_option_is_stored_compared_and_updated_from_the_declaration(conn):
    definition = "SELECT to_jsonb(d) FROM cronbox.schedule_definitions d WHERE d.name = %s"
    for o in _options(conn):
        if o["check_kind"] == "custom":
            continue
        name = _base(o)["name"]
        for value in _good_values(conn, o):
            try:
                with conn.transaction():
                    _call(conn, {**_base(o), o["option"]: value})
                break
            except psycopg.errors.InvalidParameterValue:
                continue  # refused by a check between two options: try the next value
        else:
            pytest.fail(f"{o['option']}: no allowed value other than the default is accepted")
        stored = conn.execute(definition, (name,)).fetchone()[0]
        want = conn.execute(sql.SQL("SELECT to_jsonb(CAST(%s AS {}))").format(sql.SQL(o["type"])),
                            (value,)).fetchone()[0]
        assert stored[o["option"]] == want, o["option"]
        assert stored["definition_version"] == 1
        # The same call again is a no-op; back to the default is an update.
        _call(conn, {**_base(o), o["option"]: value})
        assert conn.execute(definition, (name,)).fetchone()[0] == stored
        _call(conn, _base(o))
        again = conn.execute(definition, (name,)).fetchone()[0]
        assert again["definition_version"] == 2, o["option"]
        default = conn.execute(sql.SQL("SELECT to_jsonb(CAST(%s AS {}))").format(sql.SQL(o["type"])),
                               (o["default_value"],)).fetchone()[0]
        assert again[o["option"]] == default, o["option"]
