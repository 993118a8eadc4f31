"""The chaos bench's end checks, from the tables and the workers' delivery records, and the
recovery time of each fault (see bench/chaos.py and docs/benchmarks.md)."""

from __future__ import annotations

import bisect
from typing import Any

from bench.common import pct
from cronbox import db

SLOW_QUEUE = "slow"  # worker answers 202 and completes through SQL: the one that dies mid-run
FINAL = ("succeeded", "failed", "lost", "cancelled", "skipped", "missed")

# Outbox rows of kind run that are not a run in flight (no state): a run is its outbox row
# until its final report, so a final run leaves no row behind; nothing should be here.
ORPHANS = """
    SELECT count(*) FROM cronbox.outbox o
    WHERE o.kind = 'run' AND o.state IS NULL AND o.fire_at <= to_timestamp(%s)"""


def check(dsn: str, names: list[str], start: float, cutoff: float, records: list[dict[str, Any]]) -> dict[str, Any]:
    with db.connect(dsn) as conn:
        fires = conn.execute("""
            WITH exp AS (
                SELECT j.name, g AS fire_at
                FROM unnest(%(names)s::text[]) j(name),
                     generate_series(to_timestamp(%(start)s), to_timestamp(%(cutoff)s), interval '1 second') g),
            got AS (
                SELECT job, fire_at, count(*) AS n, bool_or(state = 'missed') AS missed
                FROM cronbox.runs WHERE run_id IS NOT NULL AND origin = 'schedule' GROUP BY 1, 2)
            SELECT count(*), count(*) FILTER (WHERE got.n IS NULL), count(*) FILTER (WHERE got.n > 1),
                   count(*) FILTER (WHERE got.missed)
            FROM exp LEFT JOIN got ON got.job = exp.name AND got.fire_at = exp.fire_at""",
            {"names": names, "start": start, "cutoff": cutoff}).fetchone()
        states = dict(conn.execute(
            "SELECT state, count(*) FROM cronbox.runs WHERE run_id IS NOT NULL AND fire_at <= to_timestamp(%s) GROUP BY 1",
            (cutoff,)).fetchall())
        stuck, leased = conn.execute("""
            SELECT count(*) FILTER (WHERE lease_until IS NULL OR lease_until <= now()),
                   count(*) FILTER (WHERE lease_until > now())
            FROM cronbox.runs WHERE run_id IS NOT NULL AND fire_at <= to_timestamp(%s) AND state <> ALL(%s)""",
            (cutoff, list(FINAL))).fetchone()
        orphans = conn.execute(ORPHANS, (cutoff,)).fetchone()[0]
        unrescued = conn.execute("""
            SELECT count(*) FROM cronbox.runs r WHERE r.state = 'lost' AND r.attempt < 5
              AND NOT EXISTS (SELECT 1 FROM cronbox.runs x WHERE x.retry_of = r.run_id)""").fetchone()[0]
        succeeded_push = {r[0] for r in conn.execute(
            "SELECT run_id FROM cronbox.runs WHERE state = 'succeeded' AND queue <> %s", (SLOW_QUEUE,)).fetchall()}
        # A run a worker received that the database does not know: a dispatch whose commit was
        # lost (a crash with synchronous_commit off, a failover to an asynchronous standby).
        unknown = conn.execute(
            "SELECT count(*) FROM unnest(%s::bigint[]) d(run_id) WHERE NOT EXISTS"
            " (SELECT 1 FROM cronbox.runs r WHERE r.run_id = d.run_id)",
            (sorted({r["run_id"] for r in records}),)).fetchone()[0]
    keys: dict[int, set[str]] = {}
    owners: dict[str, set[int]] = {}
    mismatched = 0
    for r in records:
        keys.setdefault(r["run_id"], set()).add(r["key"])
        owners.setdefault(r["key"], set()).add(r["run_id"])
        mismatched += r["key"] != r["body_key"]
    per_run = {}
    for r in records:
        per_run[r["run_id"]] = per_run.get(r["run_id"], 0) + 1
    return {
        "expected_fires": fires[0], "lost": fires[1], "doubled": fires[2], "missed": fires[3],
        "states": states, "stuck": stuck, "leased": leased, "orphan_outbox_rows": orphans,
        "lost_runs_not_retried": unrescued,
        "deliveries": len(records), "runs_delivered_more_than_once": sum(1 for n in per_run.values() if n > 1),
        "duplicates_with_another_key": sum(1 for k in keys.values() if len(k) > 1),
        "keys_shared_by_two_runs": sum(1 for r in owners.values() if len(r) > 1),
        "header_key_differs_from_body": mismatched,
        "succeeded_without_delivery": len(succeeded_push - set(keys)),
        "delivered_runs_unknown": unknown,
    }


def recovery(faults: list[dict[str, Any]], dispatches: list[float], deliveries: list[float]) -> dict[str, Any]:
    """Per fault: seconds from the fault (for PostgreSQL also from the server being up again)
    to the first dispatch and first delivery after it; p50/max per kind."""
    per_kind: dict[str, dict[str, list[float]]] = {}
    for f in faults:
        for label, since in (("", f["t"]), ("_from_up", f.get("up_at"))):
            if since is None:
                continue
            for what, times in (("dispatch", dispatches), ("delivery", deliveries)):
                i = bisect.bisect_right(times, since)
                if i < len(times):
                    per_kind.setdefault(f["kind"], {}).setdefault(what + label, []).append(times[i] - since)
    return {kind: {k: {"n": len(v), "p50_s": round(pct(v, 50), 3), "max_s": round(max(v), 3)} for k, v in d.items()}
            for kind, d in per_kind.items()}
