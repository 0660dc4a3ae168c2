"""ClickHouse's own vector index against the reads the service makes: should a search use `vector_similarity`?

    .venv/bin/python bench/ann.py [--synthetic 100000] [--real] [--queries 200] [--search-list 64 256]

A component benchmark on the embedded engine (the same engine a server runs). For each set of rows it makes a table
with a `vector_similarity('hnsw', 'cosineDistance', 384, 'bf16', 32, 128)` index (ClickHouse's HNSW, usearch), times
building it, and times `ORDER BY cosineDistance(v, q) LIMIT 10` with the index at each search list size
(`hnsw_candidate_list_size_for_search`), reporting p50/p95 and recall@10 against numpy's exact top-10. In the same
run, the two reads the service makes instead: the same statement with the index off (`use_skip_indexes = 0`: the
exact scan in SQL), and the vector mirror's read (`Vectors.top`, int8 codes first past
knobs.CODES_MIN_ROWS). Synthetic rows are clustered unit vectors (tests/synthetic.py), queries a row
plus noise 0.3 a dimension (a question near no row); `--real` adds the local embedder's vectors of 45,000 sentences,
searched with those of others held out (bench/real_vectors.py): random vectors flatter an approximate read.
"""

import argparse
import statistics
import time

from scratch_django import django_on_scratch

django_on_scratch("loom-bench-ann-")

import numpy as np

from bench.real_vectors import embedded
from retrieval.store import clickhouse
from tests.synthetic import DIM, mirror, unit, vectors

TOP = 10
INDEX = f"vector_similarity('hnsw', 'cosineDistance', {DIM}, 'bf16', 32, 128)"
SEARCH = """
    SELECT id FROM ann_rows ORDER BY cosineDistance(v, {q:Array(Float32)}) LIMIT {top:UInt32}
    SETTINGS hnsw_candidate_list_size_for_search = {search_list:UInt64}, use_skip_indexes = {indexed:UInt8}
"""


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    answer = fn(*args)
    return time.perf_counter() - start, answer


def recall(found: list[list[int]], exact: np.ndarray) -> float:
    return float(np.mean([len(set(ids) & set(truth.tolist())) / TOP for ids, truth in zip(found, exact)]))


def load(stored: np.ndarray) -> None:
    for at in range(0, len(stored), 50_000):
        clickhouse.insert("ann_rows", [{"id": at + i, "v": row} for i, row in enumerate(stored[at : at + 50_000])])
    clickhouse.command("OPTIMIZE TABLE ann_rows FINAL")  # one part, one index: as a settled table holds its rows


def measure(label: str, stored: np.ndarray, queries: np.ndarray, search_lists: list[int]) -> None:
    clickhouse.command("DROP TABLE IF EXISTS ann_rows")
    clickhouse.command(
        f"CREATE TABLE ann_rows (id UInt32, v Array(Float32), INDEX ann v TYPE {INDEX} GRANULARITY 100000000) "
        "ENGINE = MergeTree ORDER BY id"
    )
    build, _ = timed(load, stored)
    exact = np.argsort(-(queries @ stored.T), axis=1)[:, :TOP]
    reads = [(f"index, search list {size}", {"search_list": size, "indexed": 1}) for size in search_lists]
    reads.append(("exact scan in SQL (index off)", {"search_list": search_lists[0], "indexed": 0}))
    for name, settings in reads:
        times, found = [], []
        for query in queries:
            took, rows = timed(clickhouse.query_rows, SEARCH, {"q": query, "top": TOP, **settings})
            times.append(took)
            found.append([row[0] for row in rows])
        report(label, len(stored), name, times, recall(found, exact), build if settings["indexed"] else None)
    built = mirror("ann", stored, None)
    times, found = [], []
    for query in queries:
        took, hits = timed(built.top, query, False, TOP)
        times.append(took)
        found.append([int(hit[0].memory_key[1:]) for hit in hits[:TOP]])
    report(label, len(stored), f"vector mirror ({built.first_read(False)})", times, recall(found, exact), None)
    clickhouse.command("DROP TABLE ann_rows")


def report(label: str, rows: int, read: str, times: list[float], found: float, build: float | None) -> None:
    p50, p95 = (1000 * statistics.quantiles(times, n=20)[at] for at in (9, 18))
    built = f"{build:.1f}" if build is not None else ""
    print(f"{label:<12}{rows:>9,}  {read:<32}{p50:>9.2f}{p95:>9.2f}{found:>11.3f}{built:>9}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, nargs="*", default=[100_000])
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--search-list", type=int, nargs="*", default=[64, 256])
    args = parser.parse_args()
    print(f"{'rows':<12}{'count':>9}  {'read':<32}{'p50 ms':>9}{'p95 ms':>9}{'recall@10':>11}{'build s':>9}")
    rng = np.random.default_rng(0)
    for size in args.synthetic:
        stored = vectors(size, rng)
        noise = 0.3 * rng.standard_normal((args.queries, DIM)).astype(np.float32)
        queries = unit(stored[rng.integers(0, size, args.queries)] + noise)
        measure("synthetic", stored, queries, args.search_list)
    if args.real:
        real = embedded(50_000)
        measure("real", real[:45_000], real[45_000 : 45_000 + args.queries], args.search_list)


if __name__ == "__main__":
    main()
