"""bench.scale --burst N: N schedules sharing one minute boundary, fire -> dispatch.

N jobs (`overlap => 'allow'`, the fires early dispatch may take; copies of one made through
cronbox.schedule()) fire once a day at the same minute B, chosen far enough ahead for the
pollers to materialise every fire first. Two real pollers run with default settings except
CRONBOX_HORIZON, which must reach B while they saturate (a million fires cannot be
materialised in the default 2 minutes; the lead cap is then the default
CRONBOX_DISPATCH_LEAD_MAX, 2 minutes since 2026-11-25, 60 s before). No relay runs: the figure is fire -> dispatch
(`dispatched_at - fire_at`, zero when written early as of the due time, positive when late).

The figure is refused (setup held: false) unless every fire was materialised before B minus
the lead cap, and every one of the N fires has a run by the end.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from bench.common import Database, Fleet, extra_env, log, pct, postgres_cpu, wait_until
from bench.database import WaitSampler
from poller.settings import PollerSettings

LEAD_CAP = PollerSettings().dispatch_lead_max.total_seconds()  # CRONBOX_DISPATCH_LEAD_MAX's default
SATURATE_RATE = 800    # futures/s assumed when choosing B (3,500/s for one poller on a quiet machine,
                       # ~900/s for two on the shared one)


def burst(database: Database, args: argparse.Namespace, logdir: Any, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"schedules": n}
    t_insert = time.monotonic()
    # B: a minute boundary after the saturation estimate plus the lead cap and a margin.
    ahead = n / (args.saturate_rate or SATURATE_RATE) + LEAD_CAP + 60
    with database.connect() as conn:
        b, minute, hour = conn.execute(
            "SELECT b, extract(minute FROM b AT TIME ZONE 'UTC')::int, extract(hour FROM b AT TIME ZONE 'UTC')::int "
            "FROM (SELECT date_trunc('minute', now() + make_interval(secs => %s)) + interval '1 minute' AS b) x",
            (ahead,)).fetchone()
        conn.execute("SELECT cronbox.schedule('burst-0', cron => %s, overlap => 'allow')", (f"{minute} {hour} * * *",))
    database.clone_jobs("burst-0", "burst-", n - 1)
    out["insert_s"] = round(time.monotonic() - t_insert, 1)
    to_b = database.scalar("SELECT extract(epoch FROM %s::timestamptz - now())::float8", (b,))
    horizon = int(math.ceil(to_b + 120))
    out.update({"boundary": str(b), "horizon_s": horizon, "seconds_to_boundary_at_start": round(to_b, 1)})
    env = {"CRONBOX_HORIZON": f"{horizon}s", **extra_env(args)}
    log(f"burst: {n} fires at {b} ({to_b:.0f} s away), horizon {horizon} s, two pollers")
    with Fleet(logdir) as fleet:
        t0 = time.monotonic()
        pollers = [fleet.cronbox("poller", database.dsn, env, name=f"poller{i}") for i in (1, 2)]
        pg0 = postgres_cpu(database.postmaster)
        wait_until(lambda: fleet.check_alive() or not database.scalar(
            "SELECT EXISTS (SELECT 1 FROM cronbox.job j JOIN cronbox.job_fire f USING (job_id) "
            "WHERE j.name LIKE 'burst-%%' AND f.next_fire <= %s)", (b,)),
            to_b + 60, "burst fires materialised", interval=1.0)
        out["saturation_s"] = round(time.monotonic() - t0, 1)
        margin = database.scalar("SELECT extract(epoch FROM %s::timestamptz - now())::float8", (b,))
        out["materialised_s_before_boundary"] = round(margin, 1)
        log(f"materialised in {out['saturation_s']} s, {margin:.0f} s before the boundary")
        c0 = [p.cpu() for p in pollers]
        # the profile of the dispatch: statements inside the functions too, and server waits
        database.set_statement_tracking("all")
        database.reset_statements()
        # every fire of B has a run (or the wait ends: refused below)
        with WaitSampler(database, interval=0.5) as waits:
            try:
                wait_until(lambda: fleet.check_alive() or database.scalar(
                    "SELECT count(*) >= %s FROM cronbox.runs WHERE fire_at = %s", (n, b)),
                    max(0.0, margin) + 600, "burst dispatched", interval=1.0)
            except TimeoutError as exc:
                out["wait_error"] = str(exc)
        out["server_waits"] = waits.top(8)
        out["top_statements"] = database.top_statements(8)
        c1 = [p.cpu() for p in pollers]
        pg1 = postgres_cpu(database.postmaster)
        out["rss_mb"] = {p.name: p.rss() for p in pollers}
    with database.connect() as conn:
        lags = [float(r[0]) for r in conn.execute(
            "SELECT extract(epoch FROM dispatched_at - fire_at) * 1000 FROM cronbox.runs "
            "WHERE fire_at = %s AND dispatched_at IS NOT NULL", (b,)).fetchall()]
        states = dict(conn.execute("SELECT state, count(*) FROM cronbox.runs WHERE fire_at = %s GROUP BY state",
                                   (b,)).fetchall())
        # when the runs were written (the clock at the insert, read from the run id), in
        # seconds before the fire (negative: after it)
        written = [float(r[0]) for r in conn.execute(
            "SELECT extract(epoch FROM fire_at - cronbox.run_id_time(run_id)) FROM cronbox.runs WHERE fire_at = %s",
            (b,)).fetchall()]
        doubled = conn.execute("SELECT count(*) FROM (SELECT job_id FROM cronbox.runs WHERE fire_at = %s "
                               "GROUP BY job_id HAVING count(*) > 1) d", (b,)).fetchone()[0]
    out.update({
        "runs": sum(states.values()), "states": states, "doubled": doubled,
        "fire_to_dispatch_ms": {"p50": pct(lags, 50), "p99": pct(lags, 99), "max": max(lags) if lags else None},
        "written_s_before_fire": {"first": round(max(written), 2) if written else None,
                                  "median": round(pct(written, 50), 2) if written else None,
                                  "last": round(min(written), 2) if written else None},
        "poller_cpu_s": [round(b1 - a1, 2) for a1, b1 in zip(c0, c1, strict=True)],
        "postgres_cpu_s": round(pg1 - pg0, 2) if pg0 is not None and pg1 is not None else None,
    })
    problems = []
    if margin < LEAD_CAP:
        problems.append(f"the fires were materialised only {margin:.0f} s before the boundary (< lead cap {LEAD_CAP:.0f} s)")
    if out["runs"] < n or states.get("dispatched", 0) < n:
        problems.append(f"{n - states.get('dispatched', 0)} of {n} fires have no dispatched run")
    if doubled:
        problems.append(f"{doubled} fires dispatched twice")
    out["problems"] = problems
    out["setup_held"] = not problems
    return out


def summary(r: dict[str, Any]) -> list[str]:
    b = r["burst"]
    lag = b["fire_to_dispatch_ms"]
    return [f"burst: {b['schedules']} fires at {b['boundary']}, two pollers, horizon {b['horizon_s']} s, "
            f"{'durable' if r['durable'] else 'NOT durable'}",
            f"  materialised in {b['saturation_s']} s ({b['materialised_s_before_boundary']} s before the boundary)",
            f"  fire -> dispatch ms: p50 {lag['p50']}, p99 {lag['p99']}, max {lag['max']}; runs {b['runs']} "
            f"{b['states']}, doubled {b['doubled']}",
            f"  early runs written from {b['written_s_before_fire']['first']} s to {b['written_s_before_fire']['last']} s "
            f"before the fire; poller CPU s {b['poller_cpu_s']}, postgres {b['postgres_cpu_s']}",
            f"  setup held: {b['setup_held']}" + ("" if b["setup_held"] else " -- NOT VALID: " + "; ".join(b["problems"]))]
