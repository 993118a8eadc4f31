"""The hot statements' plans on a distributed table group (docs/citus.md, "Every hot statement a
single-shard query"): on a clone migrated with `cronbox migrate --citus`, the table a family of
hot statements reads is distributed by `bucket` into the buckets' colocation group the way the
Citus layer will distribute it (keys with the bucket first, policies without subqueries), and
the product's own functions are run against it with Citus told to refuse any statement that is
not a single task (`citus.multi_task_query_log_level = error`), then registered for function
call delegation on their bucket argument, whose plan must be one task on the node holding the
bucket. Marker `citus`; each test's clone is its own (the rest of its schema does not work on a
half-distributed database, which is why `--citus` does not distribute these tables yet)."""

from __future__ import annotations

import psycopg
import pytest

from cronbox import db

from .conftest import CitusServer, Server

pytestmark = pytest.mark.citus

# The outbox, as the Citus layer will distribute it: its key with the bucket first, its row
# security without subqueries (Citus refuses a policy with one on a distributed table; the
# owner's check by a function call, as docs/citus.md plans), colocated with the buckets; the
# claim planned with its bucket bound (Citus cannot route a generic plan of a statement this
# shape: `could not create distributed plan`, parameters unresolved).
DISTRIBUTE_OUTBOX = """
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE cronbox.outbox DROP CONSTRAINT outbox_pkey;
ALTER TABLE cronbox.outbox ADD CONSTRAINT outbox_pkey PRIMARY KEY (bucket, outbox_id);
DROP POLICY outbox_read ON cronbox.outbox;
DROP POLICY outbox_update ON cronbox.outbox;
DROP POLICY outbox_delete ON cronbox.outbox;
CREATE POLICY outbox_read ON cronbox.outbox FOR SELECT USING (cronbox.caller_reads_all());
CREATE POLICY outbox_update ON cronbox.outbox FOR UPDATE USING (cronbox.caller_writes_all());
CREATE POLICY outbox_delete ON cronbox.outbox FOR DELETE USING (cronbox.caller_writes_all());
SELECT pg_catalog.create_distributed_table('cronbox.outbox', 'bucket', colocate_with => 'cronbox.bucket_shard');
ALTER FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, integer, timestamptz)
    SET plan_cache_mode = force_custom_plan;
"""


@pytest.fixture
def citus_clone(pg: Server, fresh_dsn: str) -> str:
    if not isinstance(pg, CitusServer):
        pytest.skip("needs the Citus session (pytest -m citus, or CRONBOX_TEST_CITUS=1)")
    return fresh_dsn


def explain(conn: psycopg.Connection, statement: str, args: tuple = ()) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + statement, args))


def node_port(conn: psycopg.Connection, table: str, bucket: int) -> int:
    return conn.execute("SELECT nodeport FROM pg_catalog.citus_shards WHERE table_name = %s::regclass"
                        " AND shardid = pg_catalog.get_shard_id_for_distribution_column(%s, %s)",
                        (table, table, bucket)).fetchone()[0]


def test_citus_the_relay_s_claim_is_one_task_per_bucket_and_runs_on_the_bucket_s_node(citus_clone):
    """cronbox.claim_outbox on an outbox distributed by bucket: with a bucket, every statement it
    runs is one task on that bucket's shard and takes only that bucket's rows; without one, it
    visits every bucket, one single-task statement each, and takes the rows of all of them;
    registered for delegation on p_bucket, the whole call is one task on the node holding the
    bucket (its statements run there against the local shard)."""
    with db.connect(citus_clone) as conn:
        conn.execute(DISTRIBUTE_OUTBOX)
        buckets = [r[0] for r in conn.execute("SELECT bucket FROM cronbox.bucket ORDER BY bucket_index")]
        ports = {node_port(conn, "cronbox.outbox", b) for b in buckets}
        assert len(ports) == 2  # the buckets are spread over both worker nodes
        mine = [buckets[0], buckets[-1]]
        # notifications, one queue each of two, three rows per bucket in the two buckets
        conn.execute("INSERT INTO cronbox.outbox (bucket, queue, kind, message, available_at)"
                     " SELECT b, 'q' || (n %% 2), 'notification', jsonb_build_object('n', n), now() - interval '1 minute'"
                     " FROM unnest(%s::integer[]) b, generate_series(1, 3) n", (mine,))
        conn.execute("SET citus.multi_task_query_log_level = error")  # a statement over several shards fails
        claim = "SELECT bucket, message->>'n' FROM cronbox.claim_outbox('r1', 10, p_bucket => %s)"
        got = conn.execute(claim, (mine[0],)).fetchall()
        assert sorted(got) == [(mine[0], "1"), (mine[0], "2"), (mine[0], "3")]
        assert conn.execute(claim, (mine[0],)).fetchall() == []  # leased: nothing left there
        assert conn.execute(claim, (buckets[1],)).fetchall() == []  # a bucket with no rows
        # every bucket in turn (the relay today): the other bucket's rows, within the limit
        got = conn.execute("SELECT bucket FROM cronbox.claim_outbox('r2', 2)").fetchall()
        assert got == [(mine[1],), (mine[1],)]
        got = conn.execute("SELECT bucket FROM cronbox.claim_outbox('r2', 10)").fetchall()
        assert got == [(mine[1],)]
        conn.execute("RESET citus.multi_task_query_log_level")

        conn.execute("SELECT pg_catalog.create_distributed_function("
                     "'cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer)',"
                     " 'p_bucket', colocate_with => 'cronbox.outbox')")
        plan = explain(conn, "SELECT * FROM cronbox.claim_outbox('r3', 10, p_bucket => %s)", (mine[0],))
        port = node_port(conn, "cronbox.outbox", mine[0])
        assert "Task Count: 1" in plan and f"port={port}" in plan and "claim_outbox" in plan, plan
        # delegated: the rows come back from the bucket's node (lease of r1 still live: none)
        conn.execute("UPDATE cronbox.outbox SET lease_until = NULL WHERE bucket = %s", (mine[0],))
        got = conn.execute("SELECT * FROM cronbox.claim_outbox('r3', 10, p_bucket => %s)", (mine[0],)).fetchall()
        assert len(got) == 3 and {g[-1] for g in got} == {mine[0]}, got
        assert conn.execute("SELECT array_agg(DISTINCT lease_owner) FROM cronbox.outbox WHERE bucket = %s",
                            (mine[0],)).fetchone()[0] == ["r3"]
