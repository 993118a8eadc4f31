"""`cronbox status` on Citus shows which buckets each live poller and relay holds (the
processes section's `buckets`: "n of B: index ranges", from the view cronbox.buckets); on plain
PostgreSQL the section is as it was. Real processes, run as the real command."""

from __future__ import annotations

import orjson
import pytest

from cronbox import db
from cronbox.status import bucket_ranges

from .conftest import CitusServer, Server
from .procs import Proc, wait_until
from .test_ops_status import _status

ENV = {"CRONBOX_POLLER_BUCKET_LEASE": "2s", "CRONBOX_RELAY_BUCKET_LEASE": "2s", "CRONBOX_POLL_INTERVAL": "100ms",
       "CRONBOX_SINKS": "*=log"}


def test_bucket_ranges_name_how_many_of_how_many_and_which():
    assert bucket_ranges([5, 0, 1, 3, 4, 9], 32) == "6 of 32: 0-1, 3-5, 9"
    assert bucket_ranges([], 32) == "0 of 32"
    assert bucket_ranges(list(range(32)), 32) == "32 of 32: 0-31"


def processes(dsn: str) -> dict[str, dict]:
    doc = orjson.loads(_status(dsn, "--json"))
    return {p["name"]: p for p in doc["processes"] or [] if p["live"]}


def test_status_shows_the_buckets_each_poller_and_relay_holds_on_citus_only(pg: Server, fresh_dsn: str, tmp_path):
    dsn = fresh_dsn
    with Proc("poller", dsn, tmp_path, **ENV) as a, Proc("poller", dsn, tmp_path, **ENV) as b, \
            Proc("relay", dsn, tmp_path, **ENV) as r:
        pids = {a.popen.pid: "poller", b.popen.pid: "poller", r.popen.pid: "relay"}

        def registered() -> dict[str, dict] | None:
            now = processes(dsn)
            return now if {int(n.rsplit(":", 1)[1]) for n in now} >= set(pids) else None

        if not isinstance(pg, CitusServer):
            rows = wait_until(registered, timeout=60, what="the three processes registered")
            assert all("buckets" not in p for p in rows.values()), rows  # plain PostgreSQL: as before
            assert "buckets" not in _status(dsn)
            return

        with db.connect(dsn) as conn:
            total = conn.execute("SELECT count(*) FROM cronbox.bucket").fetchone()[0]

        def settled() -> dict[str, dict] | None:
            now = registered()
            if now is None:
                return None
            held = sorted(now[n]["buckets"] for n in now if int(n.rsplit(":", 1)[1]) in pids)
            half = f"{total // 2} of {total}: "
            return now if (held[-1] == f"{total} of {total}: 0-{total - 1}"  # the relay: every bucket
                           and all(h.startswith(half) for h in held[:2])) else None
        rows = wait_until(settled, timeout=60, what="status showing the pollers' halves and the relay's whole")
        of = {n: p["buckets"] for n, p in rows.items() if int(n.rsplit(":", 1)[1]) in pids}
        assert of[next(n for n in of if n.startswith("relay:"))] == f"{total} of {total}: 0-{total - 1}"
        # the pollers' shares are disjoint and cover every bucket
        halves = [p for n, p in of.items() if n.startswith("poller:")]
        indexes = []
        for h in halves:
            for part in h.split(": ", 1)[1].split(", "):
                lo, _, hi = part.partition("-")
                indexes += range(int(lo), int(hi or lo) + 1)
        assert sorted(indexes) == list(range(total)), halves
        text = _status(dsn)
        assert "buckets" in text and f"{total} of {total}: 0-{total - 1}" in text, text
