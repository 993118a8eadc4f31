"""The cost of bucket leases on a Citus coordinator (docs/citus.md, "No leader: bucket leases"):
N owners of one kind call cronbox.lease_buckets in turn, one autocommit connection each, as N
pollers renewing every third of their lease would; first until the shares have settled (each
owner holding B / n, all B held), then `--calls` rounds timed. Prints how many rounds the
shares took to settle and the median and p99 of one call (client round trip on 127.0.0.1,
a durable commit included), and the same for a newcomer's first calls after the settle.

    python -m bench.citus_cluster start /tmp/leases          # prints the coordinator's DSN
    DATABASE_URL=<dsn> cronbox migrate --citus --buckets 1024
    python -m bench.citus_leases --dsn <dsn> --owners 8 --calls 200
    python -m bench.citus_cluster stop /tmp/leases
"""

from __future__ import annotations

import argparse
import statistics
import time

from cronbox import db


def call(conn, owner: str) -> list[int]:
    return conn.execute("SELECT buckets FROM cronbox.lease_buckets('poller', %s, '10 s')", (owner,)).fetchone()[0]


def settle(conns: dict, buckets: int, limit: int = 20) -> int:
    """Rounds of one call per owner until every owner holds its share and all buckets are held."""
    for n in range(1, limit + 1):
        held = {o: call(c, o) for o, c in conns.items()}
        counts = sorted(len(h) for h in held.values())
        if sum(counts) == buckets and counts[-1] - counts[0] <= 1:
            return n
    raise SystemExit(f"shares not settled after {limit} rounds: {counts}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.citus_leases", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dsn", required=True, help="the coordinator's DSN, after cronbox migrate --citus")
    p.add_argument("--owners", type=int, default=8)
    p.add_argument("--calls", type=int, default=200, help="timed rounds (one call per owner each)")
    args = p.parse_args(argv)
    conns = {f"bench-{i}": db.connect(args.dsn) for i in range(args.owners)}
    try:
        with db.connect(args.dsn) as conn:
            buckets = conn.execute("SELECT count(*) FROM cronbox.bucket").fetchone()[0]
            conn.execute("UPDATE cronbox.bucket_lease SET owner = NULL, held_since = NULL"
                         " WHERE kind = 'poller' AND owner LIKE 'bench-%'")
            conn.execute("DELETE FROM cronbox.bucket_member WHERE kind = 'poller' AND owner LIKE 'bench-%'")
        rounds = settle(conns, buckets)
        times = []
        for _ in range(args.calls):
            for owner, conn in conns.items():
                started = time.perf_counter()
                call(conn, owner)
                times.append((time.perf_counter() - started) * 1000)
        times.sort()
        print(f"{buckets} buckets, {args.owners} owners: shares settled in {rounds} round(s); one renewal "
              f"median {statistics.median(times):.2f} ms, p99 {times[int(len(times) * 0.99) - 1]:.2f} ms "
              f"({len(times)} calls)")
        conns["bench-new"] = db.connect(args.dsn)
        print(f"a newcomer: shares settled again in {settle(conns, buckets)} round(s)")
        for owner, conn in conns.items():
            conn.execute("SELECT cronbox.release_buckets('poller', %s)", (owner,))
    finally:
        for conn in conns.values():
            conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
