"""The benchmark scripts in --quick mode, so they never rot. Not timing tests: each checks
that its script ran the real pipeline to the end and reported what it promises.

The scripts start together (each has its own private PostgreSQL and processes) and
each test waits for its own, so the file costs about as long as the slowest script.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = {
    "throughput": ["--quick", "--profile"],
    "latency": ["--quick"],
    "scale": ["--quick"],
    "soak": ["--quick", "--seconds", "10"],
    "sqlcost": ["--quick"],
    "web": ["--quick", "--repeat", "2"],
}


class Bench:
    def __init__(self, name: str, args: list[str], tmp: Path):
        self.name = name
        self.out = tmp / f"{name}.json"
        self.log = tmp / f"{name}.log"
        with open(self.log, "wb") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", f"bench.{name}", *args, "--json", str(self.out)],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT)

    def result(self, timeout: float = 240) -> tuple[int, dict]:
        try:
            rc = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.terminate()
            self.popen.wait(30)
            raise AssertionError(f"bench.{self.name} did not finish in {timeout}s:\n{self.log.read_text()[-3000:]}") from None
        assert self.out.exists(), f"bench.{self.name} wrote no report (exit {rc}):\n{self.log.read_text()[-3000:]}"
        return rc, json.loads(self.out.read_text())


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Bench]]:
    tmp = tmp_path_factory.mktemp("bench")
    started = {name: Bench(name, args, tmp) for name, args in SCRIPTS.items()}
    yield started
    for b in started.values():
        if b.popen.poll() is None:
            b.popen.terminate()
            b.popen.wait(30)


def test_throughput_quick_completes_every_run_once_and_measures_raw_limit_in_same_run(benches):
    rc, r = benches["throughput"].result()
    assert rc == 0, r
    assert r["durable"] is True
    assert r["all_complete_and_unique"] is True
    rep = r["repetitions"][0]
    assert rep["cronbox"]["succeeded"] == rep["raw"]["succeeded"] == r["n"]
    assert rep["cronbox"]["runs_per_s"] > 0 and rep["raw"]["runs_per_s"] > 0
    assert rep["ratio"] == pytest.approx(rep["cronbox"]["runs_per_s"] / rep["raw"]["runs_per_s"], abs=0.001)
    assert set(rep["cronbox"]["cpu_s"]) >= {"poller", "relay", "worker", "postgres"}
    assert r["mode"] in ("report-sql", "respond") and "supported" in r["respond_probe"]
    # pull mode either ran to completion or says plainly why not
    assert r["pull"].get("complete_and_unique") is True or r["pull"].get("available") is False, r["pull"]
    for variant in ("raw", "cronbox"):
        assert r["stages"][variant]["check"] is True
        assert all(r["stages"][variant][s]["rows_per_s"] > 0 for s in ("dispatch", "deliver", "complete"))
    prof = r["profile"]
    assert prof["complete_and_unique"] is True
    assert any("cronbox.dispatch" in s.get("query", "") or "dispatch" in s.get("query", "")
               for s in prof["statements"]), prof["statements"]


def test_latency_quick_delivers_every_fire_exactly_once_with_percentiles(benches):
    rc, r = benches["latency"].result()
    assert rc == 0, r
    assert r["expected"] == 50 * 5
    assert r["missed"] == 0 and r["not_arrived"] == 0 and r["doubled"] == 0 and r["redelivered"] == 0
    lat = r["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert r["trigger"].get("available") is False or "latency_ms" in r["trigger"] or "error" in r["trigger"]


def test_scale_quick_saturates_and_times_dispatch_at_each_future_size(benches):
    rc, r = benches["scale"].result()
    assert rc in (0, 1), r  # 1 = the poller fell behind: a figure, not a broken script
    assert r["ok"] == (rc == 0)
    assert r["insert"]["schedule_fn"]["count"] + r["insert"]["bulk"]["count"] == 10_000
    assert r["saturation"]["futures_written"] > 0
    assert r["steady"]["unsaturated_jobs_at_end"] >= 0 and r["steady"]["poller_rss_mb"] > 0
    sizes = [d["job_future_rows"] for d in r["dispatch_cost"]]
    assert sizes == [10_000, 50_000]
    for d in r["dispatch_cost"]:
        assert d["dispatch_ms"]["median"] > 0
        assert any("job_future" in p["plan"] and "Buffers" in p["plan"] for p in d["plans"]), d["plans"]
    assert r["sizes_end"]["cronbox.job"]["table_bytes"] > 0


def test_soak_quick_samples_rate_table_sizes_and_rss_every_interval(benches):
    rc, r = benches["soak"].result()
    assert rc == 0, r
    assert len(r["samples"]) == 2
    for s in r["samples"]:
        assert s["tables"]["cronbox.job_future"]["bytes"] > 0
        assert s["rss_mb"]["poller"] and s["rss_mb"]["relay"]
    # the pipeline ran: runs of the soak's schedules were dispatched and completed
    assert sum(s["dispatched_per_s"] for s in r["samples"]) > 0
    assert r["worker"]["messages"] > 0 and r["worker"]["report_errors"] == 0
    assert "throughput_steady" in r["verdicts"] and "cronbox.outbox_bounded" in r["verdicts"]


def test_sqlcost_quick_times_each_stage_and_finishes_every_run(benches):
    rc, r = benches["sqlcost"].result()
    assert rc == 0, r
    assert r["durable"] is True and r["complete"] is True
    rep = r["repetitions"][0]
    assert rep["succeeded"] == rep["acked"] == r["n"] == 2000
    assert all(rep["us_per_run"][k] > 0 for k in ("dispatch", "claim", "ack"))
    assert rep["wal_bytes_per_run"]["dispatch"] > 0 and rep["wal_bytes_per_run"]["ack"] > 0


def test_web_quick_serves_every_list_page_at_its_size(benches):
    rc, r = benches["web"].result()
    assert rc == 0, r
    assert r["schedules"] == 2000 and r["runs"] == 50000
    assert {"overview", "schedules", "runs", "runs queue=q7", "runs state=failed", "dead letters"} <= set(r["pages"])
    assert all(p["median_ms"] > 0 and p["bytes"] > 1000 for p in r["pages"].values())
