"""The shared query-embedding cache's lookup, as the table's granules grow: the table as migration 0004 made it
(the default 8,192 rows a granule) against 0021's (64 rows), on a ClickHouse server on loopback (tests/chserver.py).

    .venv/bin/python bench/embedding_cache.py [--sizes 3000 30000] [--lookups 300]

Both tables are filled with the same random 384-d vectors in inserts of 1,000 rows (as the service's batched
writes), then looked up key by key with the service's statement (retrieval/providers/embedding_cache.py). The
baseline, timed in the same run: `SELECT 1`, a statement that reads nothing. Medians of alternated passes.
"""

import argparse
import hashlib
import statistics
import time
from datetime import UTC, datetime

from scratch_django import django_on_scratch

django_on_scratch("loom-bench-cache-")

import numpy as np

from retrieval.store import clickhouse
from retrieval.store.schema import migrations
from tests.chserver import Server
from tests.scratch import scratch_dir

LOOKUP = "SELECT vector FROM {table} WHERE key = {{key:String}} AND length(vector) = {{dim:UInt32}} LIMIT 1"


def create(table: str, migration: str) -> None:
    """The cache table as `migration` creates it, under another name."""
    ddl = next(s for name, statements in migrations() if name == migration for s in statements if "CREATE" in s)
    clickhouse.command(ddl.replace("embedding_cache", table))


def timed(statement: str, params: list[dict]) -> float:
    """Median ms of `statement`, once for each of `params`."""
    spent = []
    for bound in params:
        started = time.perf_counter()
        clickhouse.query_rows(statement, bound)
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3_000, 30_000])
    parser.add_argument("--lookups", type=int, default=300)
    args = parser.parse_args()
    server = Server(scratch_dir("loom-bench-chserver-"))
    clickhouse.use(server.url)
    clickhouse.command("CREATE DATABASE IF NOT EXISTS loom")
    tables = {"default granules (0004)": "cache_0004", "64-row granules (0021)": "cache_0021"}
    print("embedding_cache lookup on a ClickHouse server, ms (median)")
    print(f"{'cached rows':>11} {'SELECT 1':>9} " + " ".join(f"{label:>24}" for label in tables) + f" {'ratio':>6}")
    try:
        rng, filled = np.random.default_rng(0), 0
        for table, migration in zip(tables.values(), ("0004_embedding_cache", "0021_embedding_cache_granules")):
            create(table, migration)
        for size in sorted(args.sizes):
            keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(size)]
            for start in range(filled, size, 1000):
                vectors = rng.standard_normal((min(1000, size - start), 384)).astype(np.float32)
                rows = [
                    {"key": key, "model": "fake", "vector": vector, "created_at": datetime.now(UTC)}
                    for key, vector in zip(keys[start : start + 1000], vectors)
                ]
                for table in tables.values():
                    clickhouse.insert(table, rows)
            filled = size
            asked = [{"key": keys[i], "dim": 384} for i in rng.choice(size, args.lookups, replace=False)]
            spent = {table: [] for table in tables.values()}
            base = []
            for _ in range(3):  # alternated passes: the box's speed moves
                base.append(timed("SELECT 1", asked))
                for table in tables.values():
                    spent[table].append(timed(LOOKUP.format(table=table), asked))
            old, new = (statistics.median(spent[table]) for table in tables.values())
            print(f"{size:>11,} {statistics.median(base):>9.2f} {old:>24.2f} {new:>24.2f} {old / new:>6.1f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
