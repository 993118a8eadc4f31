"""A real failover, shortened (bench/failover.py): a primary and a synchronous streaming
standby on this machine, pollers, relays and HTTP workers on a multi-host DSN, jobs firing
every second; the primary is killed, the standby promoted, the old primary rebuilt with
pg_rewind, and back again. The processes are never told: they follow the promoted server by
themselves. The same end checks as the bench: nothing lost, doubled or stuck, no run delivered
that the surviving database does not know (a lost commit), no process that gave up. (Recovery
times are reported by the bench, never asserted here.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import REPO


@pytest.mark.slow
def test_failover_to_a_synchronous_standby_and_back_loses_and_doubles_nothing(tmp_path):
    out = tmp_path / "failover.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.failover", "--duration", "8", "--jobs", "4", "--failovers", "2",
         "--pollers", "1", "--relays", "1", "--settle", "60", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=420)  # the 2 shared cores: start-up alone can take a minute
    assert out.exists(), proc.stderr[-3000:]
    report = json.loads(out.read_text())
    c = report["checks"]
    assert [f["to"] for f in report["failovers"]] == ["nodeb", "nodea"], report["failovers"]
    assert all(f["rebuilt_with"] in ("pg_rewind", "pg_basebackup") for f in report["failovers"])
    assert c["expected_fires"] > 0 and c["deliveries"] > 0
    assert (c["lost"], c["doubled"], c["stuck"], c["orphan_outbox_rows"]) == (0, 0, 0, 0), c
    assert c["delivered_runs_unknown"] == 0, c
    assert c["duplicates_with_another_key"] == 0 and c["keys_shared_by_two_runs"] == 0, c
    assert c["succeeded_without_delivery"] == 0 and c["lost_runs_not_retried"] == 0, c
    assert report["unexpected_exits"] == {}, report["unexpected_exits"]
    # dispatches and deliveries resumed after every failover, on the promoted server
    assert report["recovery"]["failover"]["dispatch"]["n"] == 2 and report["recovery"]["failover"]["delivery"]["n"] == 2
    assert report["ok"] and proc.returncode == 0, proc.stderr[-3000:]
