"""The plans of every statement a call runs, nested ones included (auto_explain), for the
tests that check which index a hot statement walks and how far."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg


def plans_of(conn: psycopg.Connection, sql: str, params=(), *, analyze: bool = False) -> list[dict]:
    """The plans of every statement run by `sql`, nested ones included (auto_explain; with
    `analyze`, with the rows each node returned). `conn` must be inside a transaction: the
    settings are SET LOCAL."""
    found: list[dict] = []

    def on_notice(diag: psycopg.errors.Diagnostic) -> None:
        text = diag.message_primary or ""
        if "Query Text" in text:
            found.append(json.loads(text[text.index("{"):]))

    conn.execute("LOAD 'auto_explain'")
    settings = [("log_min_duration", "0"), ("log_nested_statements", "on"), ("log_format", "json")]
    if analyze:
        settings += [("log_analyze", "on"), ("log_timing", "off")]
    for setting, value in settings:
        conn.execute(f"SET LOCAL auto_explain.{setting} = {value}")
    conn.execute("SET LOCAL client_min_messages = log")
    conn.add_notice_handler(on_notice)
    try:
        conn.execute(sql, params)
    finally:
        conn.remove_notice_handler(on_notice)
        conn.execute("SET LOCAL client_min_messages = notice")
        conn.execute("SET LOCAL auto_explain.log_min_duration = -1")
    return found


def nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def run_partitions_planned(conn, sql: str, params=()) -> set[str]:
    """The run partitions that the statements run by `sql` opened: the scans of their plans,
    nested statements and row-security subplans included, after the partitions pruned when a
    statement started (a kept plan names those it will skip only as "Subplans Removed")."""
    return {n["Relation Name"] for p in plans_of(conn, sql, params) for n in nodes(p["Plan"])
            if n.get("Relation Name", "").startswith("run_")}
