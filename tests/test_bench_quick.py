"""The benchmark scripts in --quick mode, so they never rot. Not timing tests: each checks
that its script ran the real pipeline to the end and reported what it promises.

The scripts of the selected tests start together (each has its own private PostgreSQL and
processes) and each test waits for its own, so the file costs about as long as the slowest
script; the slow tests' scripts run only when those tests are selected (`pytest -m slow`).
"""

from __future__ import annotations

import inspect
import json
import re
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
    "saturation": ["--quick"],
    "maintenance": ["--quick"],
    "soak": ["--quick", "--seconds", "10"],
    "sqlcost": ["--quick", "--history-days", "2"],
    "rawlimit": ["--quick"],
    "isolation": ["--quick"],
    "canary": ["--quick", "--load", "catchups", "--size", "50", "--watch", "6"],
    "worker_kit": ["--quick", "-n", "1000"],
    "web": ["--quick", "--repeat", "2"],
    # the same file as both versions: the A/B machinery, not a difference
    "ahead_ab": [str(REPO / "sql/functions/internal/dispatch_ahead_at.sql")] * 2 + ["--quick"],
    # against HEAD: no file may differ in a clean checkout, the machinery runs all the same
    "stage_ab": ["HEAD", "--flow", "pull", "--quick"],
    "report_cpu": ["--base", "HEAD", "--quick"],
}
try:  # the peer benchmark needs the optional `bench` extra (PgQueuer)
    import pgqueuer  # noqa: F401
    SCRIPTS["peers"] = ["--quick"]
except ImportError:
    pass


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


def wanted(session: pytest.Session) -> set[str]:
    """The scripts the selected tests of this file read (`benches["name"]` in their source): a
    default run, which leaves the slow ones out, must not pay for their scripts either."""
    names: set[str] = set()
    for item in session.items:
        if isinstance(item, pytest.Function) and item.module.__name__ == __name__:
            names.update(re.findall(r'benches\["(\w+)"\]', inspect.getsource(item.function)))
    return names


@pytest.fixture(scope="module")
def benches(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Bench]]:
    tmp = tmp_path_factory.mktemp("bench")
    names = wanted(request.session)
    started = {name: Bench(name, args, tmp) for name, args in SCRIPTS.items() if name in names}
    yield started
    for b in started.values():
        if b.popen.poll() is None:
            b.popen.terminate()
            b.popen.wait(30)


@pytest.mark.slow
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


@pytest.mark.slow
def test_latency_quick_delivers_every_fire_exactly_once_with_percentiles(benches):
    rc, r = benches["latency"].result()
    assert rc == 0, r
    assert r["expected"] == 50 * 5
    assert r["missed"] == 0 and r["not_arrived"] == 0 and r["doubled"] == 0 and r["redelivered"] == 0
    lat = r["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert r["trigger"].get("available") is False or "latency_ms" in r["trigger"] or "error" in r["trigger"]


@pytest.mark.slow  # about a minute: a hung sink is waited out on purpose
def test_isolation_quick_measures_b_with_a_healthy_and_hung_in_one_run(benches):
    rc, r = benches["isolation"].result()
    assert rc == 0, r
    for window in ("b_healthy", "b_hung"):
        assert r[window]["expected"] == 20 * 4 and r[window]["not_arrived"] == 0
        lat = r[window]["latency_ms"]
        assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]
    assert r["p99_ratio_hung_to_healthy"] > 0
    assert r["a"]["answered_while_healthy"] > 0 and r["a"]["waiting_in_outbox"] > 0  # a really hung


@pytest.mark.slow  # 45 s: a year of catch-ups for 50 schedules beside the canary
def test_canary_quick_reports_the_canarys_lag_and_missed_fires_under_a_load(benches):
    rc, r = benches["canary"].result()
    assert rc == 0
    (load,) = r["loads"]
    assert load["load"] == "catchups" and load["size"] == 50
    c = load["canary"]
    assert c["fires_expected"] == 6 and c["dispatched"] + c["missed"] == 6
    assert set(c["fire_to_dispatch_ms"]) == {"p50", "p99", "max"} and load["longest_transaction_s"] >= 0
    assert load["progress_at_end_of_window"]["catch_up_runs_dispatched"] > 0


@pytest.mark.slow
def test_saturation_quick_saturates_every_schedule_and_splits_the_cpu(benches):
    rc, r = benches["saturation"].result()
    assert rc == 0 and r["ok"], r
    run, = r["runs"]
    assert run["schedules"] >= 2000 and run["futures"] > 0 and run["computed"] < run["schedules"]
    assert run["cpu_us_per_schedule"]["python"] > 0 and run["cpu_us_per_schedule"]["server"] > 0


@pytest.mark.slow
def test_maintenance_quick_times_every_step_of_a_round(benches):
    rc, r = benches["maintenance"].result()
    assert rc == 0 and r["schedules"] == 2000 and r["runs"] == 1000, r
    (only,) = r["rounds"]
    assert set(only["ms"]) >= {"sync_schedule_names", "tally_runs", "fold_job_stats"}
    assert all(v >= 0 for v in only["ms"].values())


@pytest.mark.slow
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
        # the timed calls did the work they claim: a full batch each, nothing skipped as busy
        assert d["setup_held"] and set(d["moved"]) == {d["batch"]}, d
    assert r["sizes_end"]["cronbox.job"]["table_bytes"] > 0
    # the steady window held fires (it starts just before a minute boundary) and says so
    st = r["steady_setup"]
    assert st["fires_due"] > 0 and r["steady"]["fires_dispatched"] > 0, st
    assert r["ok"] == (not r["problems"])


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


def test_sqlcost_quick_reports_each_stages_time_wal_rows_and_index_entries(benches):
    rc, r = benches["sqlcost"].result()
    assert rc == 0, r
    assert r["durable"] is True and r["complete"] is True
    assert set(r["flows"]) == {"push", "push_report", "report_one", "pull", "raw", "raw_one_row"}
    # one report per call: complete_run's own cost, each run its own call; the run's history
    # row inserted once, final (one row in flight: its outbox row deleted)
    one_report = r["flows"]["report_one"]["repetitions"][0]["stages"]["complete_one"]["row_writes_per_run"]
    assert one_report["cronbox.run"] == {"ins": 1} and one_report["cronbox.outbox"] == {"del": 1}
    # yesterday to a week ahead, and the two days before yesterday asked for
    assert r["history_days"] == 2 and r["run_partitions"] == 9 + 2
    # the floor: the same data flow's rows with no cronbox function, nothing but those rows
    raw = r["flows"]["raw"]["repetitions"][0]["stages"]
    assert raw["dispatch"]["row_writes_per_run"] == {
        "cronbox.job_future": {"del": 1}, "cronbox.outbox": {"ins": 1}, "cronbox.run": {"ins": 1}}
    # (heap-only or not: history has no lease index since the runs in flight left it)
    assert set(raw["complete"]["row_writes_per_run"]) == {"cronbox.run"}
    assert raw["complete"]["row_writes_per_run"]["cronbox.run"]["upd"] == 1
    # the floor of the one-row-in-flight flow: one outbox row until the report, history written once
    one = r["flows"]["raw_one_row"]["repetitions"][0]["stages"]
    assert one["dispatch"]["row_writes_per_run"] == {"cronbox.job_future": {"del": 1}, "cronbox_bench.outbox": {"ins": 1}}
    assert one["claim"]["row_writes_per_run"] == {"cronbox_bench.outbox": {"upd": 1, "hot": 1}}
    assert one["finish"]["row_writes_per_run"] == {"cronbox_bench.outbox": {"del": 1}, "cronbox.run": {"ins": 1}}
    for flow, data in r["flows"].items():
        rep = data["repetitions"][0]
        assert rep["succeeded"] == r["n"] == 2000 and rep["left_in_queue"] == 0
        for stage, s in rep["stages"].items():
            assert s["runs"] == 2000, (flow, stage)
            assert s["cpu_us_per_run"] >= 0  # the backend's CPU (10 ms ticks: a quick stage may show none)
            if stage == "fold":
                # the bench's jobs are one-offs: their statistics are derived from their runs,
                # dispatch and the ack write no change row, and the fold has nothing to write
                assert not s["row_writes_per_run"] and s["wal_records_per_run"] < 0.01, (flow, s)
                continue
            assert s["us_per_run"] > 0 and s["wal_bytes_per_run"] > 0 and s["wal_records_per_run"] > 0
            assert s["row_writes_per_run"], (flow, stage)
        if flow == "raw_one_row":
            continue
        # the write path as it stands: dispatch inserts one outbox row per run (raw, today's
        # floor: a run row too) and removes the future; every flow ends with the outbox row
        # deleted and (cronbox's flows: one row in flight) the run's history row inserted once
        dispatch = rep["stages"]["dispatch"]["row_writes_per_run"]
        assert dispatch["cronbox.outbox"]["ins"] == 1
        assert dispatch.get("cronbox.run", {}).get("ins", 0) == (1 if flow == "raw" else 0)
        assert dispatch["cronbox.job_future"]["del"] == 1
        deleted = sum(s["row_writes_per_run"].get("cronbox.outbox", {}).get("del", 0) for s in rep["stages"].values())
        assert deleted == 1
        inserted = sum(s["row_writes_per_run"].get("cronbox.run", {}).get("ins", 0) for s in rep["stages"].values())
        assert inserted == 1
        assert rep["total"]["btree_entries_per_run"] >= 3  # run pkey, outbox pkey, outbox claim index


def test_rawlimit_quick_repeats_the_raw_pipeline_and_checks_for_stalls(benches):
    rc, r = benches["rawlimit"].result()
    assert r["complete"] is True and r["reps"] == 2 and len(r["runs_per_s"]) == 2
    assert all(rep["complete_and_unique"] for rep in r["repetitions"])
    # a stalled repetition makes the script fail; the verdict and the exit code agree
    assert (rc == 0) == (not r["stalled_repetitions"])


def test_peers_quick_runs_pgqueuer_and_cronbox_on_one_cluster_and_reports_ratios(benches):
    if "peers" not in benches:
        pytest.skip("PgQueuer is not installed (pip install -e '.[bench]')")
    rc, r = benches["peers"].result()
    assert rc == 0 and r["complete"] is True, r
    rep = r["repetitions"][0]
    for system in ("pgqueuer_b10", "pgqueuer_b100", "cronbox_push", "cronbox_pull", "raw_sql"):
        assert rep[system]["complete"] and rep[system]["runs_per_s"] > 0, (system, rep[system])
    assert rep["pgqueuer_b100"]["left_in_queue"] == 0 and rep["pgqueuer_b100"]["jobs"] == r["n"]
    assert r["ratio_push_to_pgq_b100"]["median"] == rep["ratio_push_to_pgq_b100"] > 0
    assert r["ratio_raw_to_pgq_b100"]["median"] == rep["ratio_raw_to_pgq_b100"] > 0
    # CPU per job, server and clients, for every system but the raw pipeline's clients (none)
    for system in ("pgqueuer_b100", "cronbox_push", "cronbox_pull"):
        cpu = rep[system]["cpu_us_per_job"]
        assert cpu["postgres"] > 0 and cpu["clients"] > 0, (system, cpu)
        assert cpu["total"] == pytest.approx(cpu["postgres"] + cpu["clients"], abs=0.2)
    assert rep["cpu_ratio_pgq_b100_to_push"] == pytest.approx(
        rep["pgqueuer_b100"]["cpu_us_per_job"]["total"] / rep["cronbox_push"]["cpu_us_per_job"]["total"], abs=0.001)
    assert r["median_cpu_us_per_job"]["cronbox_push"]["total"] == rep["cronbox_push"]["cpu_us_per_job"]["total"]


def test_worker_kit_quick_drains_with_both_workers_and_reports_the_ratio(benches):
    rc, r = benches["worker_kit"].result()
    assert rc == 0, r
    assert r["complete_and_unique"] is True and r["mode"] == "drain"
    rep = r["reps_detail"][0]
    for variant in ("hand", "kit"):
        assert rep[variant]["succeeded"] == r["n"] == 1000 and rep[variant]["runs_per_s"] > 0
        assert rep[variant]["worker_cpu_us_per_run"] > 0
    assert r["kit_over_hand"]["median"] == pytest.approx(rep["kit"]["runs_per_s"] / rep["hand"]["runs_per_s"], abs=0.001)


def test_ahead_ab_quick_dispatches_every_job_once_per_version(benches):
    rc, r = benches["ahead_ab"].result()
    assert rc == 0, r
    assert [(x["version"], x["runs"]) for x in r["rounds"]] == [("old", 2000), ("new", 2000)]
    assert all(x["call_ms_median"] > 0 and x["runs_per_s"] > 0 for x in r["rounds"])


def test_stage_ab_quick_runs_every_stage_of_both_versions(benches):
    rc, r = benches["stage_ab"].result()
    assert rc == 0, r
    assert r["flow"] == "pull" and r["n"] == 2000
    for version in ("new", "old"):
        assert set(r["us_per_run"][version]) == {"dispatch", "claim_runs", "complete", "total"}
        assert all(x > 0 for x in r["us_per_run"][version].values())
        assert set(r["cpu_us_per_run"][version]) == {"dispatch", "claim_runs", "complete", "total"}


def test_web_quick_serves_every_list_page_at_its_size(benches):
    rc, r = benches["web"].result()
    assert rc == 0, r
    assert r["schedules"] == 2000 and r["runs"] == 50000
    assert {"overview", "schedules", "runs", "runs queue=q7", "runs state=failed", "dead letters",
            "overview (as owner)", "runs (as owner)"} <= set(r["pages"])
    assert r["failed_pages"] == {}
    assert all(0 < p["p50_ms"] <= p["p95_ms"] and p["bytes"] > 1000 for p in r["pages"].values())


def test_web_bench_refuses_to_report_when_its_setup_did_not_hold(fresh_dsn):
    """--reuse of a database that does not hold the asked sizes: no figures, exit status 1."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "bench.web", "--quick", "--dsn", fresh_dsn, "--reuse", "--repeat", "1"],
                         capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 1 and out.stdout == "", out
    assert "setup did not hold, nothing measured: schedules: asked 2,000, the database holds 0" in out.stderr


def test_report_cpu_quick_measures_single_reports_in_both_databases(benches):
    rc, r = benches["report_cpu"].result()
    assert rc == 0, r
    assert r["files"] == []  # against HEAD in a clean checkout: the same functions
    assert len(r["samples_us"]["this"]) == len(r["samples_us"]["base"]) == 2 * 200 // 100
    assert r["cpu_us_per_call_median"]["this"] >= 0

