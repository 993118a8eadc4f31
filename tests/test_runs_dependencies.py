"""Dependencies: add_dependency gates, after => ARRAY[...] pipelines and DAGs, cycles."""

from __future__ import annotations

import psycopg
import pytest

from .runs_support import (T0, active, at, complete, dispatch, fail, future, futures, job,
                           jobrow, notifications, runs, states)


def run_now(conn, name, now, ok=True) -> int:
    """Dispatch what is due and finish the job's one active run."""
    dispatch(conn, now)
    [rid] = active(conn, name)
    if ok:
        complete(conn, rid, now + 1)
    else:
        fail(conn, rid, now + 1, "middle node broke", retryable=False)
    return rid


def after_job(conn, name, upstreams):
    return conn.execute("SELECT cronbox.schedule_at(%s, after => %s, p_now => %s)",
                        (name, upstreams, T0)).fetchone()[0]


def dep(conn, name, upstream, within=None, wait_timeout=None):
    conn.execute("SELECT cronbox.add_dependency(%s, %s, %s, %s)", (name, upstream, within, wait_timeout))


def test_gated_fire_waits_for_an_upstream_success_then_goes(conn):
    job(conn, "extract")
    job(conn, "load")
    dep(conn, "load", "extract")
    future(conn, "load", 100)
    assert dispatch(conn, 100)["held"] == 1
    assert futures(conn, "load")[0]["hold"] == "dependency"
    future(conn, "extract", 110)
    run_now(conn, "extract", 110)  # its success releases the waiting fire at once
    assert futures(conn, "load")[0]["hold"] is None
    assert dispatch(conn, 112)["dispatched"] == 1


def test_without_within_the_success_must_be_newer_than_the_previous_fire(conn):
    job(conn, "extract")
    job(conn, "load")
    dep(conn, "load", "extract")
    future(conn, "extract", 0)
    run_now(conn, "extract", 0)
    future(conn, "load", 100)
    run_now(conn, "load", 100)
    future(conn, "load", 200)  # extract has not succeeded since load fired at 100
    assert dispatch(conn, 200)["held"] == 1
    future(conn, "extract", 250)
    run_now(conn, "extract", 250)
    assert dispatch(conn, 252)["dispatched"] == 1


def test_fire_past_wait_timeout_fails_with_a_clear_error_and_a_notification(conn):
    job(conn, "extract")
    job(conn, "load")
    dep(conn, "load", "extract", within="1 hour", wait_timeout="10 minutes")
    future(conn, "extract", 0)
    run_now(conn, "extract", 0)
    future(conn, "load", 7200)  # extract's success is two hours old
    assert dispatch(conn, 7200)["held"] == 1
    assert conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(7800),)).fetchone()[0] == 1
    assert dispatch(conn, 7800)["failed"] == 1
    [r] = runs(conn, "load")
    assert r["state"] == "failed"
    assert "dependency" in r["error"] and "extract" in r["error"] and "wait_timeout" in r["error"]
    [note] = notifications(conn, "dependency_timeout")
    assert note["job"] == "load" and note["waiting_for"] == "extract" and note["run_id"] == r["run_id"]
    assert futures(conn, "load") == []


def test_a_dependency_timeout_is_one_failed_run_never_retried_and_on_error_does_not_apply(conn):
    """docs/runs.md, Dependencies: a retry would wait on the gate that just timed out."""
    job(conn, "up")
    job(conn, "down", max_attempts=3, on_error="pause")
    dep(conn, "down", "up", wait_timeout="1 minute")
    future(conn, "down", 0)
    assert dispatch(conn, 0)["held"] == 1
    conn.execute("SELECT cronbox.release_holds_at(100, p_now => %s)", (at(61),))
    assert dispatch(conn, 61)["failed"] == 1
    assert futures(conn, "down") == []                       # no retry future, whatever max_attempts
    j = jobrow(conn, "down")
    assert (j["paused"], j["consecutive_failures"], j["last_run_state"]) == (False, 1, "failed")
    future(conn, "down", 3600)                               # the next regular fire waits anew
    assert dispatch(conn, 3600)["held"] == 1


def test_retry_of_a_gated_fire_does_not_wait_for_the_upstream_again(conn):
    job(conn, "extract")
    job(conn, "load", max_attempts=2, retry_delay="1 second")
    dep(conn, "load", "extract")
    future(conn, "extract", 0)
    run_now(conn, "extract", 0)
    future(conn, "load", 100)
    dispatch(conn, 100)
    [rid] = active(conn, "load")
    fail(conn, rid, 101, "flaky")
    assert dispatch(conn, 105)["dispatched"] == 1
    assert [r["attempt"] for r in runs(conn, "load")] == [1, 2]


def test_within_accepts_a_recent_enough_success(conn):
    job(conn, "extract")
    job(conn, "load")
    dep(conn, "load", "extract", within="1 hour")
    future(conn, "extract", 0)
    run_now(conn, "extract", 0)
    future(conn, "load", 3000)
    assert dispatch(conn, 3000)["dispatched"] == 1


def test_remove_dependency_releases_waiting_fires(conn):
    job(conn, "extract")
    job(conn, "load")
    dep(conn, "load", "extract")
    future(conn, "load", 0)
    dispatch(conn, 0)
    assert conn.execute("SELECT cronbox.remove_dependency('load', 'extract')").fetchone()[0] is True
    assert conn.execute("SELECT cronbox.remove_dependency('load', 'extract')").fetchone()[0] is False
    assert dispatch(conn, 1)["dispatched"] == 1


def test_cycle_is_rejected_with_the_cycle_named(conn):
    for name in "abc":
        job(conn, name)
    dep(conn, "a", "b")
    dep(conn, "b", "c")
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        dep(conn, "c", "a")
    assert "would make a cycle: c -> a -> b -> c" in str(err.value)


def test_a_long_cycle_is_named_by_its_ends_in_a_short_error(conn):
    names = [f"j{i:02d}-" + "x" * 150 for i in range(40)]
    for name in names:
        job(conn, name)
    for down, up in zip(names, names[1:]):
        dep(conn, down, up)
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        dep(conn, names[-1], names[0])
    message = err.value.diag.message_primary
    assert len(message) < 2500, len(message)
    assert "... 32 more ..." in message and message.count(" -> ") == 9
    assert message.endswith("would make a cycle: " + " -> ".join([names[39], *names[:4], "... 32 more ...", *names[36:]]))


def test_cycle_through_an_after_list_is_rejected(conn):
    job(conn, "root")
    after_job(conn, "child", ["root"])
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="cycle: root -> child -> root"):
        dep(conn, "root", "child")


def test_add_dependency_validates_names_and_intervals(conn):
    job(conn, "a")
    cases = [(("a", "a"), "upstream: 'a' cannot wait for itself", psycopg.errors.InvalidParameterValue),
             (("a", "nope"), "upstream: no schedule named 'nope'", psycopg.errors.NoDataFound),
             (("nope", "a"), "name: no schedule named 'nope'", psycopg.errors.NoDataFound)]
    for args, message, error in cases:
        with pytest.raises(error, match=message), conn.transaction():
            dep(conn, *args)
    job(conn, "b")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="wait_timeout: must be a positive"), conn.transaction():
        dep(conn, "a", "b", wait_timeout="-1 second")


def test_pipeline_extract_transform_load_runs_in_order_every_night(conn):
    job(conn, "extract", every="1 day")
    after_job(conn, "transform", ["extract"])
    after_job(conn, "load", ["transform"])
    order = []
    for night in range(2):
        base = night * 86400
        future(conn, "extract", base)
        now = base
        for step in ("extract", "transform", "load"):
            run_now(conn, step, now)
            order.append(step)
            now += 10
        assert dispatch(conn, now)["dispatched"] == 0  # nothing more this night
    assert order == ["extract", "transform", "load"] * 2
    for name in ("extract", "transform", "load"):
        assert states(conn, name) == ["succeeded", "succeeded"]
    assert [r["origin"] for r in runs(conn, "load")] == ["dependency", "dependency"]


def test_diamond_dag_waits_for_both_branches_and_a_failing_middle_node_blocks_the_join(conn):
    #      a
    #    /   \
    #   b     c
    #    \   /
    #      d
    job(conn, "a", every="1 day")
    after_job(conn, "b", ["a"])
    after_job(conn, "c", ["a"])
    after_job(conn, "d", ["b", "c"])
    # round 1: c fails, so d does not fire
    future(conn, "a", 0)
    run_now(conn, "a", 0)
    dispatch(conn, 10)
    b1, c1 = active(conn, "b")[0], active(conn, "c")[0]
    complete(conn, b1, 11)
    assert futures(conn, "d") == []  # b alone is not enough
    fail(conn, c1, 12, "middle node broke", retryable=False)
    assert futures(conn, "d") == [] and dispatch(conn, 20)["dispatched"] == 0
    # round 2: both branches succeed; d fires exactly once
    future(conn, "a", 1000)
    run_now(conn, "a", 1000)
    dispatch(conn, 1010)
    complete(conn, active(conn, "b")[0], 1011)
    assert futures(conn, "d") == []  # c has not succeeded since d was created
    complete(conn, active(conn, "c")[0], 1012)
    assert len(futures(conn, "d")) == 1
    run_now(conn, "d", 1020)
    assert states(conn, "d") == ["succeeded"]
    assert states(conn, "c") == ["failed", "succeeded"]
    # round 3: a new success of only one branch does not fire d again
    future(conn, "a", 2000)
    run_now(conn, "a", 2000)
    dispatch(conn, 2010)
    complete(conn, active(conn, "b")[0], 2011)
    assert futures(conn, "d") == []


def test_add_and_remove_dependency_take_name_and_still_accept_job_for_a_release(conn):
    for n in ("extract", "load", "other"):
        job(conn, n)
    gates = "SELECT count(*) FROM cronbox.dependencies WHERE job = 'load'"
    # positional (name, upstream), name =>, and the old job => all reach the same gate
    conn.execute("SELECT cronbox.add_dependency('load', 'extract')")
    conn.execute("SELECT cronbox.add_dependency(name => 'load', upstream => 'other', within => '1 hour')")
    assert conn.execute(gates).fetchone()[0] == 2
    conn.execute("SELECT cronbox.add_dependency(job => 'load', upstream => 'extract', wait_timeout => '5 minutes')")
    assert conn.execute(gates).fetchone()[0] == 2  # an update of the first gate, not a third
    conn.execute("SELECT cronbox.add_dependency('load', 'extract', '2 hours', '10 minutes')")
    assert conn.execute("SELECT cronbox.remove_dependency(job => 'load', upstream => 'other')").fetchone()[0] is True
    assert conn.execute("SELECT cronbox.remove_dependency(name => 'load', upstream => 'extract')").fetchone()[0] is True
    assert conn.execute("SELECT cronbox.remove_dependency('load', 'extract')").fetchone()[0] is False
    # exactly one of name and job; errors name the parameter the caller used
    bad = [("SELECT cronbox.add_dependency(name => 'load', job => 'load', upstream => 'extract')",
            psycopg.errors.InvalidParameterValue, "^job: give the job as name"),
           ("SELECT cronbox.add_dependency(upstream => 'extract')", psycopg.errors.NullValueNotAllowed,
            "^name: must not be NULL"),
           ("SELECT cronbox.add_dependency(job => 'nope', upstream => 'extract')", psycopg.errors.NoDataFound,
            "^job: no schedule named 'nope'"),
           ("SELECT cronbox.remove_dependency('load', 'extract', 'load')", psycopg.errors.InvalidParameterValue,
            "^job: give the job as name"),
           ("SELECT cronbox.remove_dependency('nope', 'extract')", psycopg.errors.NoDataFound,
            "^name: no schedule named 'nope'"),
           ("SELECT cronbox.remove_dependency(name => 'load')", psycopg.errors.NullValueNotAllowed,
            "^upstream: must not be NULL")]
    for statement, error, message in bad:
        with pytest.raises(error, match=message), conn.transaction():
            conn.execute(statement)
    # one function each: nothing is ambiguous
    assert conn.execute("SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'cronbox'::regnamespace "
                        "AND proname IN ('add_dependency', 'remove_dependency')").fetchone()[0] == 2


def edges(conn) -> set[tuple[str, str]]:
    """The after-job edges kept beside the jobs' after lists: (job, upstream name), each with
    its job's bucket (checked here)."""
    rows = conn.execute("""SELECT j.name, e.upstream, e.bucket = j.bucket
                           FROM cronbox.job_after_edge e JOIN cronbox.job j USING (job_id)""").fetchall()
    assert all(same_bucket for _, _, same_bucket in rows)
    assert conn.execute("SELECT count(*) FROM cronbox.job_after_edge").fetchone()[0] == len(rows)
    return {(name, upstream) for name, upstream, _ in rows}


def test_after_job_edges_follow_schedule_alter_and_unschedule(conn):
    for name in ("a", "b", "c"):
        job(conn, name)
    after_job(conn, "d", ["a", "b"])
    after_job(conn, "e", ["d"])
    assert edges(conn) == {("d", "a"), ("d", "b"), ("e", "d")}
    after_job(conn, "d", ["b", "c"])  # altered: a dropped, c added
    assert edges(conn) == {("d", "b"), ("d", "c"), ("e", "d")}
    after_job(conn, "d", ["b", "c"])  # the same again: a no-op
    assert edges(conn) == {("d", "b"), ("d", "c"), ("e", "d")}
    conn.execute("SELECT cronbox.schedule_at('e', every => '1 hour', p_now => %s)", (T0,))  # no longer an after-job
    assert edges(conn) == {("d", "b"), ("d", "c")}
    assert conn.execute("SELECT cronbox.unschedule_at('b', p_now => %s)", (T0,)).fetchone()[0]
    assert edges(conn) == {("d", "b"), ("d", "c")}  # the name stays listed, as in d's after list
    assert conn.execute("SELECT cronbox.unschedule_at('d', p_now => %s)", (T0,)).fetchone()[0]
    assert edges(conn) == set()
    after_job(conn, "e", ["a", "c"])
    assert edges(conn) == {("e", "a"), ("e", "c")}
    # a job inserted with a bare INSERT gets its edges from cronbox.add_job_rows, as its other rows
    [(jid,)] = conn.execute("""INSERT INTO cronbox.job (name, bucket, kind, after, created_at, updated_at)
                               VALUES ('f', cronbox.job_bucket('f'), 'after', ARRAY['c'], %s, %s)
                               RETURNING job_id""", (T0, T0)).fetchall()
    conn.execute("SELECT cronbox.add_job_rows(ARRAY[%s]::bigint[])", (jid,))
    assert edges(conn) == {("e", "a"), ("e", "c"), ("f", "c")}


def test_dispatch_finds_the_after_jobs_naming_its_jobs_by_their_edges_not_by_every_after_job(conn):
    """Whether an after-job lists a dispatched job (then its statistics are written at dispatch,
    not left to the fold: the after-job reads them) is a probe of cronbox.job_after_edge's key per
    name, whatever the number of after-jobs; the after-jobs' lists (job_has_after_idx) are not
    walked. Both of dispatch's write paths: the plain one and the general one (a queue limit)."""
    from .plan_support import nodes, plans_of
    for k in range(300):
        job(conn, f"elsewhere{k}")
        after_job(conn, f"waits{k}", [f"elsewhere{k}"])
    job(conn, "extract", overlap="allow")  # 'allow': statistics no policy of its own reads
    after_job(conn, "load", ["extract"])
    job(conn, "solo", overlap="allow")
    job(conn, "limited", overlap="allow", queue="narrow")
    conn.execute("SELECT cronbox.set_queue_limit('narrow', 5)")
    for name in ("extract", "solo", "limited"):
        future(conn, name, 100)
    conn.execute("ANALYZE cronbox.job")
    conn.execute("ANALYZE cronbox.job_after_edge")
    plans = plans_of(conn, "SELECT * FROM cronbox.dispatch_at(1000, p_now => %s)", (at(100),), analyze=True)
    scans = [n for p in plans for n in nodes(p["Plan"])]
    assert not [n for n in scans if n.get("Index Name") == "job_has_after_idx"], "the after-jobs' lists walked"
    edge_rows = [n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in scans
                 if n.get("Relation Name") == "job_after_edge"]
    assert edge_rows and sum(edge_rows) <= 2, edge_rows  # extract's one edge (per write path asked)
    assert sorted(r["job"] for r in runs(conn)) == ["extract", "limited", "solo"]
    # extract's statistics were written at dispatch (load reads them); solo's left to the fold
    folded = dict(conn.execute("SELECT j.name, s.last_fire_at IS NOT NULL FROM cronbox.job j "
                               "JOIN cronbox.job_stat s USING (job_id) WHERE j.name IN ('extract', 'solo')"))
    assert folded == {"extract": True, "solo": False}, folded


def test_a_batch_of_successes_beside_after_jobs_naming_other_jobs_ends_in_the_fast_path(conn):
    """complete_runs of jobs no policy reads, in a database with after-jobs that name other
    jobs: whether an after-job names a finished job is a probe of cronbox.job_after_edge's key
    per name (step 0b), so the batch ends in step 0b's two statements (its runs read by key
    twice, no job bookkeeping statement), not the general way that any after-job in the
    database used to send it. A batch with a job an after-job names still fires that after-job."""
    from .plan_support import nodes, plans_of
    for k in range(300):
        job(conn, f"elsewhere{k}")
        after_job(conn, f"waits{k}", [f"elsewhere{k}"])
    names = [f"solo{k}" for k in range(10)]
    for name in names:
        job(conn, name, overlap="allow")  # 'allow': statistics no policy of its own reads
    job(conn, "extract", overlap="allow")
    after_job(conn, "load", ["extract"])
    for name in names + ["extract"]:
        future(conn, name, 100)
    dispatch(conn, 100)
    ids = [active(conn, name)[0] for name in names]
    conn.execute("ANALYZE cronbox.job_after_edge")
    plans = plans_of(conn, "SELECT * FROM cronbox.complete_runs_at(%s, NULL, %s)", (ids, at(101)), analyze=True)
    texts = [p["Query Text"] for p in plans]
    assert not [t for t in texts if "decide AS MATERIALIZED" in t], "the general way's bookkeeping ran"
    scans = [n for p in plans for n in nodes(p["Plan"]) if n["Node Type"].endswith("Scan")]
    outbox_rows = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in scans
                      if n.get("Relation Name") == "outbox")
    assert outbox_rows <= 2 * len(names), outbox_rows
    edge_rows = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in scans
                    if n.get("Relation Name") == "job_after_edge")
    assert edge_rows <= 1, edge_rows  # the probe that there is an edge at all; none by these names
    assert [s for name in names for s in states(conn, name)] == ["succeeded"] * len(names)
    # the upstream of an after-job, in a batch with one of the others: the general way, it fires
    future(conn, "solo0", 200)
    dispatch(conn, 200)
    both = [active(conn, "extract")[0], active(conn, "solo0")[0]]
    assert [v for _, _, v in conn.execute("SELECT * FROM cronbox.complete_runs_at(%s, NULL, %s)",
                                          (both, at(201))).fetchall()] == ["finished", "finished"]
    assert [f["origin"] for f in futures(conn, "load")] == ["dependency"]
