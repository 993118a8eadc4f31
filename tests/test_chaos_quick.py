"""The chaos bench, shortened: real pollers, relays and HTTP workers on a durable private
cluster; a handful of SIGKILLs, a PostgreSQL crash restart (WAL recovery), a round of
pg_terminate_backend and a worker killed with runs in flight. The same end checks as the full
`python -m bench.chaos`: nothing lost, doubled or stuck, duplicates only with the same key, no
orphan outbox rows, no process that gave up by itself. (Recovery times are reported by the
bench, never asserted here.)"""

from __future__ import annotations

import pytest
import json
import subprocess
import sys

from .conftest import REPO


FAULTS = ["--kills", "5", "--pg-restarts", "1", "--terminations", "1", "--worker-deaths", "1"]


def run_chaos(tmp_path, *extra: str) -> dict:
    """bench.chaos for 20 s (6 jobs a second) with FAULTS and `extra` arguments; its report,
    after the end checks: nothing lost, doubled, stuck or orphaned, no process exit by itself."""
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.chaos", "--duration", "20", "--jobs", "6", *FAULTS, "--settle", "60",
         "--seed", "3", "--json", str(out), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=420)  # the 2 shared cores: start-up alone can take a minute
    assert out.exists(), proc.stderr[-3000:]
    report = json.loads(out.read_text())
    c = report["checks"]
    assert report["faults"] == {"sigkill": 5, "pg_restart": 1, "terminate": 1, "worker_death": 1}
    assert c["expected_fires"] > 0 and c["deliveries"] > 0
    assert (c["lost"], c["doubled"], c["stuck"], c["orphan_outbox_rows"]) == (0, 0, 0, 0), c
    assert c["duplicates_with_another_key"] == 0 and c["keys_shared_by_two_runs"] == 0, c
    assert c["header_key_differs_from_body"] == 0 and c["succeeded_without_delivery"] == 0, c
    assert c["lost_runs_not_retried"] == 0, c
    assert report["unexpected_exits"] == {}, report["unexpected_exits"]
    assert report["ok"] and proc.returncode == 0, proc.stderr[-3000:]
    return report


@pytest.mark.slow
def test_chaos_quick_loses_doubles_and_strands_nothing(tmp_path):
    run_chaos(tmp_path)
