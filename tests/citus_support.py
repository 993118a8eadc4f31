"""Which behaviour modules the Citus run (`pytest -m citus`, `pytest -k citus`) also runs,
unchanged, against a database on a Citus coordinator migrated with `cronbox migrate --citus`
(tests/conftest.py), and the tests among them that do not hold there, with the reason
(docs/citus.md lists the same).

The schedule, run, relay and worker-kit behaviour: what a user of the scheduler sees. Their slow
tests (1,000,000-schedule plans, long real-process runs) stay on plain PostgreSQL, as do the
modules that never reach the database (sink parsing, request signing) and the suites about the
server rather than the scheduler (operations, upgrades, the console)."""

from __future__ import annotations

ON_CITUS_MODULES = frozenset({
    "test_schedule_api.py",
    "test_schedule_catchup.py",
    "test_schedule_docs.py",
    "test_schedule_never_quarantined.py",
    "test_schedule_ops.py",
    "test_schedule_ops_procs.py",
    "test_schedule_options.py",
    "test_schedule_pollers.py",
    "test_schedule_scale.py",
    "test_schedule_time.py",
    "test_schedule_validation.py",
    "test_runs_burst.py",
    "test_runs_dependencies.py",
    "test_runs_dispatch.py",
    "test_runs_early.py",
    "test_runs_guards.py",
    "test_runs_history.py",
    "test_runs_integration.py",
    "test_runs_job_lock.py",
    "test_runs_leases.py",
    "test_runs_retry.py",
    "test_runs_trigger.py",
    "test_runs_unfinished.py",
    "test_runs_waiting.py",
    "test_runs_worker_api.py",
    "test_relay_http.py",
    "test_relay_isolation.py",
    "test_relay_mail.py",
    "test_relay_process.py",
    "test_relay_sql.py",
    "test_worker_api.py",
    "test_worker_pull.py",
    "test_worker_push.py",
    "test_worker_shutdown.py",
    "test_client.py",
    "test_pipeline.py",
    "test_tenants.py",
})

# test (module.py::name, or a whole module.py) -> why it does not hold on Citus
ON_CITUS_SKIPS: dict[str, str] = {
}
