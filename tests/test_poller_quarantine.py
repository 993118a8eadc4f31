"""One bad job never stops the others: jobs in states today's checks refuse, written straight
into the tables (as an older version or a superuser might have left them), next to healthy
canary jobs, with a real poller process. The canaries keep firing on time; the poisoned jobs
end quarantined (paused 'quarantined: <error>', change log, notification, metric)."""

from __future__ import annotations

import urllib.error
import urllib.request

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, wait_until

POISONS = {
    # job name: (how it is poisoned, expected text in the quarantine reason)
    "p-huge-every": ("UPDATE cronbox.job SET every = '100000000 days' WHERE name = %s", "cannot compute fires"),
    "p-bc-at": ("WITH j AS (UPDATE cronbox.job SET kind = 'at', every = NULL, anchor = NULL, at = '4713-01-01 BC' "
                "WHERE name = %s RETURNING job_id) "
                "UPDATE cronbox.job_fire f SET next_fire = now() FROM j WHERE f.job_id = j.job_id", "cannot read the job row"),
    "p-bad-cron": ("UPDATE cronbox.job SET kind = 'cron', every = NULL, cron = 'x', cron_normalized = '61 * * * * * *' "
                   "WHERE name = %s", "cannot compute fires"),
    "p-gone-zone": ("UPDATE cronbox.job SET kind = 'cron', every = NULL, cron = '* * * * * *', "
                    "cron_normalized = '* * * * * * *', timezone = 'Nowhere/Land' WHERE name = %s",
                    "unknown time zone"),
    "p-null-anchor": ("UPDATE cronbox.job SET anchor = NULL WHERE name = %s", "cannot compute fires"),
    # makes cronbox.dispatch fail for the whole batch (timestamp out of range in the dependency gate)
    "p-dispatch": ("INSERT INTO cronbox.job_dependency (job_id, upstream_id, wait_timeout) "
                   "SELECT j.job_id, u.job_id, interval '100000000 years' FROM cronbox.job j, cronbox.job u "
                   "WHERE j.name = %s AND u.name = 'never-runs'", "cannot dispatch"),
}


def test_poisoned_jobs_are_quarantined_and_canaries_keep_firing_on_time(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('never-runs', at => now() + interval '1 year')")
        for canary in ("canary-a", "canary-b"):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 second', overlap => 'allow')", (canary,))
        for name, (poison, _) in POISONS.items():
            conn.execute("SELECT cronbox.schedule(%s, every => '1 second', overlap => 'allow')", (name,))
            conn.execute(poison, (name,))
        # A manual future due at 'infinity': every poller used to die computing its sleep.
        conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) "
                     "SELECT job_id, bucket, 'infinity', 'infinity', 'manual' FROM cronbox.job WHERE name = 'canary-b'")
    port = free_port()
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_METRICS_PORT=str(port), CRONBOX_HORIZON="10s") as poller:
        def quarantined() -> dict:
            with db.connect(fresh_dsn) as conn:
                return dict(conn.execute("SELECT name, paused_reason FROM cronbox.schedules "
                                         "WHERE status = 'quarantined'").fetchall())

        q = wait_until(lambda: len(s := quarantined()) == len(POISONS) and s, timeout=60,
                       what=f"all poisoned jobs quarantined\n{poller.output}")
        for name, (_, reason) in POISONS.items():
            assert q[name].startswith("quarantined: ") and reason in q[name], (name, q[name])

        def canary_runs() -> list:
            with db.connect(fresh_dsn) as conn:
                return conn.execute(
                    "SELECT job, fire_at, extract(epoch FROM dispatched_at - fire_at) FROM cronbox.runs "
                    "WHERE job LIKE 'canary-%' AND state <> 'missed' "
                    "AND fire_at > (SELECT max(changed_at) FROM cronbox.schedule_changes "
                    "               WHERE action = 'quarantined')").fetchall()

        def both_canaries() -> list:
            s = canary_runs()
            return s if len({r[0] for r in s}) == 2 and len(s) >= 6 else []

        runs = wait_until(both_canaries, timeout=30, what="canaries firing after the quarantines")
        assert all(lag is not None and lag < 1.0 for _, _, lag in runs), runs  # on time
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        counted = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith("cronbox_jobs_quarantined_total{"))
        assert counted == len(POISONS), text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.status == 200
        assert poller.popen.poll() is None, poller.output
        assert poller.terminate() == 0, poller.output
    assert "job quarantined" in poller.output
    with db.connect(fresh_dsn) as conn:
        changes = conn.execute("SELECT job, reason FROM cronbox.schedule_changes WHERE action = 'quarantined'").fetchall()
        assert sorted(c[0] for c in changes) == sorted(POISONS)
        notes = conn.execute("SELECT message->>'job' FROM cronbox.outbox WHERE kind = 'notification' "
                             "AND (message->>'quarantined')::boolean").fetchall()
        assert sorted(n[0] for n in notes) == sorted(POISONS)
        # resume undoes a quarantine like any pause
        conn.execute("SELECT cronbox.resume('p-dispatch')")
        assert conn.execute("SELECT status FROM cronbox.schedules WHERE name = 'p-dispatch'").fetchone()[0] == "active"


def test_a_cleanly_stopped_poller_and_relay_deregister_from_processes(fresh_dsn, tmp_path):
    def kinds() -> list:
        with db.connect(fresh_dsn) as conn:
            return sorted(r[0] for r in conn.execute("SELECT kind FROM cronbox.processes").fetchall())

    with Proc("poller", fresh_dsn, tmp_path) as poller, Proc("relay", fresh_dsn, tmp_path) as relay:
        wait_until(lambda: kinds() == ["poller", "relay"], what="both registered")
        assert poller.terminate() == 0, poller.output
        assert kinds() == ["relay"]
        assert relay.terminate() == 0, relay.output
        assert kinds() == []


def _healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError as exc:  # not listening yet
        return 0, str(exc)


def test_healthz_turns_unhealthy_while_a_loop_keeps_failing_and_names_it(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('canary', every => '1 second', overlap => 'allow')")
    port = free_port()
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_METRICS_PORT=str(port)) as poller:
        wait_until(lambda: _healthz(port)[0] == 200, what="healthy")
        with db.connect(fresh_dsn) as conn:  # a broken schema: dispatch fails whatever the jobs
            conn.execute("ALTER FUNCTION cronbox.dispatch(integer, bigint[], interval, integer) "
                         "RENAME TO dispatch_gone")
        status, text = wait_until(lambda: (h := _healthz(port))[0] == 503 and h, timeout=30,
                                  what="unhealthy")
        assert "loop:dispatch" in text and "failed" in text, text
        assert poller.popen.poll() is None, poller.output  # alive, and nobody was quarantined
        with db.connect(fresh_dsn) as conn:
            conn.execute("ALTER FUNCTION cronbox.dispatch_gone RENAME TO dispatch")
            assert conn.execute("SELECT count(*) FROM cronbox.schedules "
                                "WHERE status = 'quarantined'").fetchone()[0] == 0
        wait_until(lambda: _healthz(port)[0] == 200, timeout=30, what="healthy again")
        assert poller.terminate() == 0, poller.output
