"""CRONBOX_SINKS parsing: targets, options, secrets by reference, claim filters."""

from __future__ import annotations

import pytest

from cronbox.config import ConfigError
from relay.routes import parse_routes
from relay.settings import RelaySettings


def test_routes_with_options_and_a_default():
    r = parse_routes("default=http://w:8080/run batch=100 timeout=2s secret_env=W_SECRET; reports=log; *=postgres",
                     {"W_SECRET": "s3cret"})
    route = r.target("default")
    assert (route.kind, route.url, route.batch, route.timeout, route.secret) == ("http", "http://w:8080/run", 100, 2.0, b"s3cret")
    assert r.target("reports").kind == "log"
    assert r.target("anything").kind == "postgres"


def test_the_secret_never_appears_in_descriptions_or_reprs():
    r = parse_routes("q=https://w/run secret_env=W_SECRET", {"W_SECRET": "hunter2"})
    assert "hunter2" not in repr(r) and "hunter2" not in str(r.describe())
    assert r.describe() == ["q=https://w/run batch=auto secret=env:W_SECRET", "cronbox.notifications=log",
                            "cronbox.mail=log", "cronbox.webhooks=log"]


def test_a_secret_can_come_from_a_file(tmp_path):
    f = tmp_path / "secret"
    f.write_text("from-file\n")
    assert parse_routes(f"q=http://w/run secret_file={f}").target("q").secret == b"from-file"


@pytest.mark.parametrize("text, message", [
    ("", "no routes"),
    ("q", "expected queue=target"),
    ("q=ftp://x", "must be an http"),
    ("q=log batch=5", "only apply to http"),
    ("q=http://w batch=0", "batch must be"),
    ("q=http://w batch=x", "batch must be"),
    ("q=http://w colour=red", "unknown option"),
    ("q=http://w secret_env=MISSING", r"\$MISSING is not set"),
    ("q=http://w secret_env=1bad", "must name an environment variable"),
    ("q=http://w secret_file=/nonexistent/x", "cannot read secret_file"),
    ("q=log; q=http://w", "routed twice"),
    ("q=http://w timeout=fast", "timeout"),
])
def test_bad_routes_are_refused_with_a_message_naming_the_problem(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_routes(text, {})


def test_claim_filter_excludes_pull_queues_under_a_push_default():
    r = parse_routes("*=http://w/run; ml=postgres; other=elsewhere; logs=log")
    assert r.claim_filter() == (None, ["ml", "other"])


def test_claim_filter_includes_only_push_queues_without_a_push_default():
    # always pushed, to the log unless a route names them: notifications, a job's own recipients
    notes = ["cronbox.mail", "cronbox.notifications", "cronbox.webhooks"]
    assert parse_routes("a=log; b=http://w; c=postgres").claim_filter() == (["a", "b", *notes], None)
    assert parse_routes("a=log; *=postgres").claim_filter() == (["a", *notes], None)


def test_claim_filter_leaves_out_blocked_queues():
    assert parse_routes("*=http://w/run; ml=postgres").claim_filter(["a", "b"]) == (None, ["a", "b", "ml"])
    assert parse_routes("a=log; b=http://w").claim_filter(["b"]) == (
        ["a", "cronbox.mail", "cronbox.notifications", "cronbox.webhooks"], None)


def test_notifications_never_follow_the_catch_all_route():
    r = parse_routes("*=http://worker/run")
    assert r.target("cronbox.notifications").kind == "log"
    assert r.target("anything").url == "http://worker/run"
    named = parse_routes("*=http://worker/run; cronbox.notifications=https://hooks/x timeout=2s")
    assert named.target("cronbox.notifications").url == "https://hooks/x"


def test_a_relay_dedicated_to_one_queue_leaves_notifications_to_the_others():
    dedicated = parse_routes("slow=http://slow/run; *=elsewhere")
    assert dedicated.target("cronbox.notifications").kind == "elsewhere"
    assert dedicated.claim_filter() == (["slow"], None)
    assert dedicated.unrouted(["cronbox.notifications", "other"]) == []
    named = parse_routes("slow=http://slow/run; cronbox.notifications=log; *=elsewhere")
    assert named.claim_filter() == (["cronbox.notifications", "slow"], None)


def test_per_route_timeouts_connections_and_breaker_are_validated():
    r = parse_routes("a=http://w connect_timeout=500ms timeout=2s connections=3 inflight=50 breaker=0").by_queue["a"]
    assert (r.connect_timeout, r.timeout, r.connections, r.inflight, r.breaker) == (0.5, 2.0, 3, 50, 0)
    for bad, word in (("connections=0", "connections"), ("inflight=x", "inflight"), ("timeout=0s", "timeout"),
                      ("timeout=2h", "timeout"), ("connect_timeout=3s timeout=1s", "connect_timeout"),
                      ("breaker=-1", "breaker")):
        with pytest.raises(ConfigError, match=word):
            parse_routes(f"a=http://w {bad}")


def test_unrouted_queues_are_those_with_no_route_and_no_default():
    r = parse_routes("a=log; b=postgres")
    assert r.unrouted(["a", "b", "c", "d", "c"]) == ["c", "d"]
    assert parse_routes("*=log").unrouted(["x"]) == []


def test_relay_settings_from_the_environment():
    s = RelaySettings.from_env({"CRONBOX_RELAY_MAX_ATTEMPTS": "3", "CRONBOX_RELAY_BACKOFF": "250ms",
                                "CRONBOX_HTTP_TIMEOUT": "2s"})
    assert (s.max_attempts, s.backoff, s.http_timeout) == (3, 0.25, 2.0)
    with pytest.raises(ConfigError, match="CRONBOX_RELAY_MAX_ATTEMPTS"):
        RelaySettings.from_env({"CRONBOX_RELAY_MAX_ATTEMPTS": "0"})
    with pytest.raises(ConfigError, match="CRONBOX_RELAY_BACKOFF_MAX"):
        RelaySettings.from_env({"CRONBOX_RELAY_BACKOFF": "1m", "CRONBOX_RELAY_BACKOFF_MAX": "1s"})
    with pytest.raises(ConfigError, match="CRONBOX_RELAY_BREAKER_PROBE_MAX"):
        RelaySettings.from_env({"CRONBOX_RELAY_BREAKER_PROBE": "1m", "CRONBOX_RELAY_BREAKER_PROBE_MAX": "1s"})
    assert RelaySettings.from_env({"CRONBOX_RELAY_BREAKER_FAILURES": "0"}).breaker_failures == 0


def test_a_settled_batch_counts_each_row_once_by_queue_sink_and_outcome():
    from prometheus_client import REGISTRY

    from relay.metrics import observe_batch
    from relay.sinks import Row

    def value(name, **labels):
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = {o: value("cronbox_messages_total", queue="mq", sink="http", outcome=o)
              for o in ("delivered", "retried", "dead_lettered")}
    lat_before = value("cronbox_delivery_latency_seconds_count", sink="http")
    sum_before = value("cronbox_delivery_latency_seconds_sum", sink="http")
    send_before = value("cronbox_send_duration_seconds_count", sink="http")
    rows = [Row(i, "mq", f"k{i}", "{}", 1.0 if i != 4 else None, 5.0 if i == 3 else 0.0) for i in range(1, 7)]
    observe_batch(rows, delivered={1, 2, 3, 4}, dead={5}, sink_of=lambda q: "http://127.0.0.1:1/x", seconds=0.5)
    assert {o: value("cronbox_messages_total", queue="mq", sink="http", outcome=o) - before[o]
            for o in before} == {"delivered": 4, "retried": 1, "dead_lettered": 1}
    # delivered runs with an age: 1 and 2 (1.0 + 0.5 each) and 3, held to its due time (0.5);
    # 4 is a notification (no age)
    assert value("cronbox_delivery_latency_seconds_count", sink="http") - lat_before == 3
    assert value("cronbox_delivery_latency_seconds_sum", sink="http") - sum_before == 3.5
    assert value("cronbox_send_duration_seconds_count", sink="http") - send_before == 1


def test_a_batch_of_rows_of_several_queues_counts_each_under_its_own_queue_and_sink():
    from prometheus_client import REGISTRY

    from relay.metrics import observe_batch
    from relay.sinks import Row

    def value(name, **labels):
        return REGISTRY.get_sample_value(name, labels) or 0.0

    labels = [(q, s, o) for q, s in (("qa", "http"), ("qb", "log")) for o in ("delivered", "retried", "dead_lettered")]
    before = {k: value("cronbox_messages_total", queue=k[0], sink=k[1], outcome=k[2]) for k in labels}
    lat_before = {s: value("cronbox_delivery_latency_seconds_sum", sink=s) for s in ("http", "log")}
    # the queues interleaved, as rows of several queues would come: each row under its own
    rows = [Row(i, "qa" if i % 2 else "qb", f"k{i}", "{}", 2.0, 0.0) for i in range(1, 9)]
    observe_batch(rows, delivered={1, 2, 3, 8}, dead={5, 6}, sink_of=lambda q: "http://x/y" if q == "qa" else "log",
                  seconds=-5.0)
    assert {k: value("cronbox_messages_total", queue=k[0], sink=k[1], outcome=k[2]) - before[k] for k in labels} == {
        ("qa", "http", "delivered"): 2, ("qa", "http", "retried"): 1, ("qa", "http", "dead_lettered"): 1,
        ("qb", "log", "delivered"): 2, ("qb", "log", "retried"): 1, ("qb", "log", "dead_lettered"): 1}
    # a latency below zero (clocks) counts as zero
    assert {s: value("cronbox_delivery_latency_seconds_sum", sink=s) - lat_before[s] for s in lat_before} == \
        {"http": 0.0, "log": 0.0}


def test_latencies_observed_in_bulk_land_in_the_buckets_one_by_one_observations_do():
    from prometheus_client import CollectorRegistry, Histogram

    from cronbox.metrics import LAG_BOUNDS
    from relay.metrics import observe_many

    registry = CollectorRegistry()
    one = Histogram("one_by_one", "x", buckets=LAG_BOUNDS, registry=registry)
    bulk = Histogram("in_bulk", "x", buckets=LAG_BOUNDS, registry=registry)
    values = [0.0, 0.005, 0.0051, 0.01, 0.3, 0.3, 0.3, 1.0, 299.9, 300.0, 300.1, 1e9] * 3
    for v in values:
        one.observe(v)
    observe_many(bulk, values)

    def samples(h, suffix):
        return {tuple(s.labels.items()): s.value for s in h.collect()[0].samples if s.name.endswith(suffix)}

    assert samples(one, "_bucket") == samples(bulk, "_bucket") and len(samples(one, "_bucket")) == len(LAG_BOUNDS) + 1
    assert samples(one, "_count") == samples(bulk, "_count")
    assert samples(one, "_sum")[()] == pytest.approx(samples(bulk, "_sum")[()])


def test_a_report_names_its_rows_bucket_only_when_they_share_one():
    """The settling calls get the bucket of a batch whose rows share one (the claim returns each
    row's), and none (every bucket) for rows of several or rows without one."""
    from relay.sinks import Report, Row

    def row(i: int, bucket: int | None) -> Row:
        return Row(i, "q", f"k{i}", "{}", None, 0.0, bucket=bucket)

    same = [row(1, 5), row(2, 5)]
    assert Report(same).bucket == 5
    assert Report([row(1, 0)]).bucket == 0  # plain PostgreSQL's one bucket is named too
    assert Report([*same, row(3, 7)]).bucket is None
    assert Report([row(1, None)]).bucket is None and Report().bucket is None
    grown = Report(same)
    grown.of([*same, row(3, 7)])  # a departure's rows grew with a later claim
    assert grown.bucket is None


def test_an_ack_sends_one_answer_for_all_only_when_every_row_acked_has_a_plain_success():
    from relay.sinks import Report
    from relay.store import ALL_SUCCEEDED, ack_outcomes, id_array

    def report(ok, answers):
        r = Report()
        r.ok.extend(ok)
        for oid, answer in answers:
            r.outcome(oid, answer)
        return r

    plain = {"run_id": 1, "state": "succeeded"}
    assert ack_outcomes(report([1, 2], [(1, plain), (2, {"state": "succeeded", "result": None})])) is ALL_SUCCEEDED
    assert ack_outcomes(report([1, 2], [])) is None  # answered 202: delivered, no outcome
    # a row without an answer, a result, a failure: the answers one by one
    assert ack_outcomes(report([1, 2], [(1, plain)])).obj == [{"outbox_id": 1, "state": "succeeded"}]
    assert ack_outcomes(report([1], [(1, {"state": "succeeded", "result": 0})])).obj[0]["state"] == "succeeded"
    assert ack_outcomes(report([1], [(1, {"state": "failed"})])).obj == [
        {"outbox_id": 1, "state": "failed", "error": "failed (no error given)", "retryable": True}]
    assert id_array([3, 1, 2]) == "{3,1,2}" and id_array([]) == "{}"
