"""Generated bad input against every public SQL function, as each role.

Hypothesis draws a function and a value for each parameter from strategies per type: NULL,
extremes (infinity, BC dates, huge intervals, int bounds), huge strings, control characters,
unicode, SQL fragments, wrong shapes (JSON arrays, mismatched arrays). Each call runs in its
own transaction as one cronbox role (SET ROLE: cronbox.caller() follows it). The oracle:
- a value that does not even cast to the parameter's type fails in the cast (PostgreSQL's
  words are right there: the literal is not a value of that type) and the function never runs;
- otherwise the call either succeeds, or fails with one of the API's SQLSTATEs (22004, 22023,
  P0002, 42501, 55000, 53400; docs/sql.md) and, for 22004/22023, a message that starts with the name
  of a parameter; and a failed call leaves every cronbox table unchanged (checksum).
Then a real poller must still fire a canary job on time next to whatever was accepted.
"""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronbox import db

from .procs import Proc, wait_until

API_STATES = {"22004", "22023", "P0002", "42501", "55000", "53400"}
ROLES = ["cronbox_admin", "cronbox_user", "cronbox_worker", "cronbox_reader", "cronbox_process"]

# (function, [(parameter, type)], roles allowed to execute it)
ADMIN = ["cronbox_admin", "cronbox_user"]
WORKER = ["cronbox_worker", "cronbox_process"]
PROCESS = ["cronbox_process"]
FUNCTIONS = [
    ("schedule", [("name", "text"), ("cron", "text"), ("every", "interval"), ("at", "timestamptz"),
                  ("payload", "jsonb"), ("queue", "text"), ("timezone", "text"), ("priority", "integer"),
                  ("overlap", "text"), ("timeout", "interval"), ("retry_delay", "interval"),
                  ("retry_max_delay", "interval"), ("catchup_window", "interval"), ("jitter", "interval"),
                  ("starts_at", "timestamptz"), ("ends_at", "timestamptz"), ("after", "text[]"),
                  ("max_attempts", "integer"), ("reason", "text"), ("max_runs", "integer"), ("exclude", "text"),
                  ("needs", "jsonb"), ("on_unavailable", "text"), ("unavailable_timeout", "interval"),
                  ("notify", "text[]")], ADMIN),
    ("unschedule", [("name", "text"), ("reason", "text")], ADMIN),
    ("preview", [("cron", "text"), ("every", "interval"), ("timezone", "text"), ("starts_at", "timestamptz"),
                 ("n", "integer"), ("exclude", "text")], ADMIN),
    ("next_fires", [("name", "text"), ("n", "integer")], ADMIN),
    ("create_calendar", [("name", "text"), ("dates", "date[]"), ("ranges", "daterange[]"), ("crons", "text[]"),
                         ("timezone", "text")], ADMIN),
    ("drop_calendar", [("name", "text")], ADMIN),
    ("pause", [("name", "text"), ("reason", "text"), ("until", "timestamptz")], ADMIN),
    ("backfill", [("name", "text"), ("from", "timestamptz"), ("to", "timestamptz"), ("overlap", "text"),
                  ("priority", "integer")], ADMIN),
    ("resume", [("name", "text"), ("reason", "text")], ADMIN),
    ("trigger", [("name", "text"), ("payload", "jsonb"), ("reason", "text")], ADMIN),
    ("add_dependency", [("name", "text"), ("upstream", "text"), ("within", "interval"),
                        ("wait_timeout", "interval"), ("job", "text")], ADMIN),
    ("remove_dependency", [("name", "text"), ("upstream", "text"), ("job", "text")], ADMIN),
    ("cancel", [("run_id", "bigint")], ADMIN),
    ("set_queue_limit", [("queue", "text"), ("max_running", "integer")], ["cronbox_admin"]),
    ("set_pool", [("name", "text"), ("capacity", "integer")], ["cronbox_admin"]),
    ("redrive", [("id", "bigint"), ("queue", "text")], ["cronbox_admin"]),
    ("rerun", [("run_id", "bigint"), ("reason", "text")], ADMIN),
    ("delete_dead_letter", [("id", "bigint")], ["cronbox_admin"]),
    ("grant_queue", [("queue", "text"), ("role", "text"), ("kind", "text")], ["cronbox_admin"]),
    ("revoke_queue", [("queue", "text"), ("role", "text"), ("kind", "text")], ["cronbox_admin"]),
    ("set_quota", [("owner", "text"), ("max_schedules", "integer"), ("max_fires_per_second", "numeric"),
                   ("top_priority", "integer")], ["cronbox_admin"]),
    ("pause_schedules", [("queue", "text"), ("owner", "text"), ("name_like", "text"), ("reason", "text")], ADMIN),
    ("resume_schedules", [("queue", "text"), ("owner", "text"), ("name_like", "text"), ("reason", "text")], ADMIN),
    ("start_run", [("run_id", "bigint"), ("worker", "text")], WORKER),
    ("start_runs", [("run_ids", "bigint[]"), ("worker", "text")], WORKER),
    ("heartbeat", [("run_id", "bigint"), ("worker", "text")], WORKER),
    ("complete_run", [("run_id", "bigint"), ("result", "jsonb")], WORKER),
    ("fail_run", [("run_id", "bigint"), ("error", "text"), ("retryable", "boolean")], WORKER),
    ("complete_runs", [("run_ids", "bigint[]"), ("results", "jsonb[]")], WORKER),
    ("fail_runs", [("run_ids", "bigint[]"), ("errors", "text[]"), ("retryable", "boolean")], WORKER),
    ("claim_runs", [("queue", "text"), ("worker", "text"), ("n", "integer"), ("with_message", "boolean")], WORKER),
    ("register_worker", [("name", "text"), ("host", "text"), ("pid", "integer"), ("version", "text"),
                         ("heartbeat_every", "interval"), ("info", "jsonb")], WORKER),
    ("heartbeat_worker", [("process_id", "bigint"), ("info", "jsonb")], WORKER),
    ("deregister_worker", [("process_id", "bigint")], WORKER),
    ("dispatch", [("p_limit", "integer"), ("p_jobs", "bigint[]"), ("p_grace", "interval"), ("p_bucket", "integer")],
     PROCESS),
    ("due_jobs", [("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("touch_process", [("p_process_id", "bigint"), ("p_info", "jsonb")], PROCESS),
    ("reap_lost", [("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("fold_job_stats", [("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("release_holds", [("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("resume_paused", [("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("claim_backfills", [("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("dispatch_ahead", [("p_limit", "integer"), ("p_lead", "interval"), ("p_bucket", "integer"),
                        ("p_walked_to", "timestamptz"), ("p_walked_id", "bigint")], PROCESS),
    ("relock_saturation", [("p_job", "bigint[]"), ("p_bucket", "integer")], PROCESS),
    ("due_ahead", [("p_within", "interval"), ("p_limit", "integer"), ("p_bucket", "integer")], PROCESS),
    ("list_queues", [("p_bucket", "integer")], PROCESS),
    ("claim_saturation", [("p_limit", "integer"), ("p_horizon", "interval"), ("p_bucket", "integer")], PROCESS),
    ("claim_outbox", [("p_owner", "text"), ("p_limit", "integer"), ("p_lease", "interval"),
                      ("p_queues", "text[]"), ("p_exclude", "text[]"), ("p_ahead", "interval"),
                      ("p_bucket", "integer"), ("p_parts", "boolean")], PROCESS),
    ("next_claim_at_due", [("p_ahead", "interval"), ("p_bucket", "integer")], PROCESS),
    ("release_outbox", [("p_owner", "text"), ("p_ids", "bigint[]"), ("p_lease", "interval"),
                        ("p_bucket", "integer")], PROCESS),
    ("ack_outbox", [("p_owner", "text"), ("p_ids", "bigint[]"), ("p_outcomes", "jsonb"), ("p_bucket", "integer")],
     PROCESS),
    ("nack_outbox_unsent", [("p_owner", "text"), ("p_ids", "bigint[]"), ("p_lease", "interval"),
                            ("p_bucket", "integer")], PROCESS),
    ("quarantine_job", [("p_job_id", "bigint"), ("p_error", "text"), ("p_bucket", "integer")], PROCESS),
    ("ensure_run_partitions", [("p_days_ahead", "integer")], PROCESS),
    ("drop_run_partitions", [("p_retention", "interval")], PROCESS),
    ("reconcile_queue_limits", [("p_queues", "text[]")], PROCESS),
    ("tally_runs", [("p_batch", "integer")], PROCESS),
    ("sync_schedule_names", [("p_batch", "integer")], PROCESS),
    ("search_schedules", [("p_text", "text"), ("p_after", "text"), ("p_limit", "integer")], ROLES),
    ("unfinished_runs", [], ROLES),
    ("run_id_time", [("p_run_id", "bigint")], ROLES),
]

# How many leading parameters have no default (pg_proc.pronargs - pronargdefaults).
REQUIRED = {"cancel": 1, "claim_runs": 2, "complete_run": 1, "complete_runs": 1,
            "fail_run": 2, "fail_runs": 2, "heartbeat": 1, "pause": 1, "resume": 1,
            "schedule": 1, "set_queue_limit": 2, "start_run": 2, "start_runs": 2, "trigger": 1, "unschedule": 1,
            "dispatch_ahead": 2, "due_ahead": 2, "claim_saturation": 2, "claim_outbox": 2, "next_claim_at_due": 1, "release_outbox": 1,
            "ack_outbox": 2, "nack_outbox_unsent": 3, "quarantine_job": 2, "due_jobs": 1, "touch_process": 2,
            "search_schedules": 1, "run_id_time": 1, "backfill": 3, "next_fires": 1, "create_calendar": 1, "drop_calendar": 1,
            "grant_queue": 2, "revoke_queue": 2, "set_quota": 1, "set_pool": 2,
            "rerun": 1, "delete_dead_letter": 1, "register_worker": 4, "heartbeat_worker": 1,
            "deregister_worker": 1, "relock_saturation": 1}

STRINGS = st.one_of(
    st.sampled_from(["", " ", "ok", "a b;c", "x'; DROP TABLE cronbox.job; --", "cronbox.notifications",
                     "_cronbox_x", "\x1b[31mred\x1b[0m", "tab\there", "nul-free\u0007bell", "Ünïcødé ✓ 日本",
                     "0 0 31 2 *", "0 0 30 2 *", "0 0 0 1 1 * 2020", "* * * * *", "@yearly", "*/0 * * * *",
                     "Europe/Berlin", "Mars/Olympus", "skip", "allow", "x" * 201, "y" * 100_000]),
    st.text(min_size=0, max_size=40),
)
INTERVALS = st.sampled_from(["0", "-1 second", "1 second", "1 hour", "1 month", "100000000 days",
                             "178000000 years", "1 microsecond", "366 days", "367 days", "not an interval"])
TIMES = st.sampled_from(["infinity", "-infinity", "4713-01-01 BC", "0001-01-01", "1969-12-31",
                         "294276-12-31", "2999-01-01", "now", "yesterday", "tomorrow", "garbage"])
INTEGERS = st.one_of(st.sampled_from([0, -1, 1, 1000, 1001, 2**31 - 1, -(2**31), 2**62]), st.integers(-5, 5))
DATES = st.sampled_from(["2030-01-01", "1969-12-31", "2200-01-01", "infinity", "4713-01-01 BC", "garbage"])
DATERANGES = st.sampled_from(["[2030-01-01,2030-01-05)", "[2030-01-01,2030-01-01]", "empty", "[2030-01-01,)",
                              "(,)", "[2031-01-01,2030-01-01)", "[1900-01-01,2300-01-01)", "garbage"])
NUMERICS = st.sampled_from(["0", "-1", "0.001", "1", "100000", "100001", "1e400", "NaN", "Infinity", "garbage"])
JSONS = st.sampled_from(["{}", '{"a": 1}', "[]", "1", "null", '"s"', "{bad json", '{"big": "' + "z" * 70_000 + '"}'])


def _value(typ: str) -> st.SearchStrategy:
    base = {"text": STRINGS, "interval": INTERVALS, "timestamptz": TIMES, "jsonb": JSONS,
            "integer": INTEGERS.map(str), "bigint": INTEGERS.map(str),
            "boolean": st.sampled_from(["true", "false", "maybe"]), "date": DATES, "daterange": DATERANGES,
            "numeric": NUMERICS}
    if typ.endswith("[]"):
        elem = base[typ[:-2]] if typ[:-2] in base else STRINGS
        return st.one_of(st.none(), st.lists(st.one_of(st.none(), elem), max_size=3))
    return st.one_of(st.none(), base[typ])


@st.composite
def calls(draw):
    fn, params, allowed = draw(st.sampled_from(FUNCTIONS))
    role = draw(st.sampled_from(allowed) if draw(st.integers(0, 4)) else st.sampled_from(ROLES))
    required = REQUIRED.get(fn, 0)  # parameters without a default: always passed
    chosen = [(p, t) for i, (p, t) in enumerate(params) if i < required or draw(st.booleans())]
    args = {p: (t, draw(_value(t))) for p, t in chosen}
    return fn, role, allowed, args


CHECKSUM = """
    SELECT string_agg(c.relname || ':' || coalesce(
        (xpath('/row/m/text()', query_to_xml(format(
            'SELECT md5(coalesce(string_agg(t::text, ''|'' ORDER BY t::text), '''')) AS m FROM %s t', c.oid::regclass),
            false, true, '')))[1]::text, ''), ',' ORDER BY c.relname)
    FROM pg_catalog.pg_class c
    WHERE c.relnamespace = 'cronbox'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      AND c.relname NOT IN ('schema_version', 'schema_code')"""


def _casts(conn: psycopg.Connection, typ: str, value) -> bool:
    try:
        with conn.transaction():
            conn.execute(f"SELECT %s::{typ}", (value,))
        return True
    except psycopg.Error:
        return False


@pytest.mark.slow
def test_generated_bad_calls_fail_cleanly_or_are_harmless_and_the_canary_still_fires(fresh_dsn, tmp_path):
    stats = {"calls": 0, "refused": 0, "cast": 0, "accepted": 0}
    with db.connect(fresh_dsn) as setup:
        setup.execute("SELECT cronbox.schedule('victim', every => '1 hour')")
        setup.execute("SELECT cronbox.schedule('other', every => '1 hour')")
    conn = psycopg.connect(fresh_dsn, autocommit=True, prepare_threshold=None)

    @settings(max_examples=500, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(calls())
    def one(call):
        fn, role, allowed, args = call
        stats["calls"] += 1
        for _p, (typ, value) in args.items():
            vals = value if isinstance(value, list) else [value]
            elem = typ[:-2] if typ.endswith("[]") else typ
            if any(v is not None and not _casts(conn, elem, v) for v in vals):
                stats["cast"] += 1
                return  # not a value of the parameter's type: PostgreSQL refuses the literal itself
        binds = {p: v for p, (t, v) in args.items()}
        sql = ", ".join(f'"{p}" => %({p})s::{t}' for p, (t, v) in args.items())  # "from", "to" are keywords
        before = conn.execute(CHECKSUM).fetchone()[0]
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL ROLE {role}")
                conn.execute(f"SELECT * FROM cronbox.{fn}({sql})", binds).fetchall()
            stats["accepted"] += 1
            assert role in allowed, f"{role} may not call {fn}"
        except psycopg.Error as exc:
            stats["refused"] += 1
            state = exc.sqlstate
            assert state in API_STATES, f"{fn}({args}) as {role}: {state} {exc}"
            if state == "42501":
                assert role not in allowed, f"{fn} refused to {role}, which may call it: {exc}"
            if state in ("22004", "22023"):
                head = str(exc.diag.message_primary).split(":")[0]
                assert head in {fn} | {p for p, _ in FUNCTIONS_BY_NAME[fn]} | {
                    "schedule", "cron", "cycle", "results", "errors", "run_ids", "payload", "result",
                    "name", "queue", "worker", "reason", "outcome"}, f"{fn}: message names no parameter: {exc}"
            after = conn.execute(CHECKSUM).fetchone()[0]
            assert after == before, f"{fn}({args}) as {role} failed but changed the tables"

    one()
    conn.close()
    assert stats["calls"] >= 300, stats
    assert stats["refused"] >= 100, stats

    # Whatever was accepted, a real poller still fires a canary on time.
    with db.connect(fresh_dsn) as c:
        c.execute("SELECT cronbox.schedule('canary', every => '1 second', overlap => 'allow')")
        start = c.execute("SELECT now()").fetchone()[0]
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_POLL_INTERVAL="100ms", CRONBOX_HORIZON="5s") as poller:
        def canary_fired():
            with db.connect(fresh_dsn) as c:
                return c.execute(
                    "SELECT count(*) FROM cronbox.runs r JOIN cronbox.job j USING (job_id) "
                    "WHERE j.name = 'canary' AND r.fire_at > %s AND r.dispatched_at - r.fire_at < interval '2 seconds'",
                    (start,)).fetchone()[0] >= 3
        wait_until(canary_fired, timeout=30, what=f"canary fired on time; poller: {poller.output[-2000:]}")


FUNCTIONS_BY_NAME = {fn: params for fn, params, _ in FUNCTIONS}


def test_enough_functions_are_covered(conn):
    """Every function in sql/functions/admin and worker is in the generated set."""
    from cronbox.migrate import sql_root
    names = {p.stem for folder in ("admin", "worker") for p in (sql_root() / "functions" / folder).glob("*.sql")}
    assert names <= set(FUNCTIONS_BY_NAME), names - set(FUNCTIONS_BY_NAME)
