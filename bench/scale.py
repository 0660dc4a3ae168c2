"""The vector leg's scan at scale: a namespace's in-process mirror (retrieval/index/) at 10k, 100k
and 1M rows, and 1M rows over 1,000 namespaces, against numpy and the memory-bandwidth bound.

    .venv/bin/python bench/scale.py [--sizes 10000 100000 1000000] [--spread 1000000:1000] [--queries 200] [--real]
                                    [--noise 0.3 0.1]

A component benchmark: `Vectors.top()` itself, what an unfiltered search's vector leg runs on either backend,
without the rest of the search (bench/search.py times whole searches). Rows are synthetic unit vectors, 384-d, in
200 clusters; a query is a row plus noise, 0.3 a dimension (its cosine to that row ~0.17: a question near no row)
and, a second row per size, 0.1 (~0.45; `--noise`). Reported per size: which read the mirror made (`read`: mirror,
codes from knobs.CODES_MIN_ROWS rows, bits from knobs.BITS_MIN_ROWS once the mirror's
check on its queries, sent once untimed first, found that they keep the nearest rows); p50 and p95 of `top()` (the
value axis, as a namespace without the key axis searches; pool 100);
recall@10 of its order against numpy's exact top-10 (codes-first is approximate until its rescoring); numpy's
`X @ q` with an argpartition over the value matrix (the baseline, same run); the bandwidth bound, the bytes a
float32 scan of the value matrix reads divided by the memory bandwidth a large array copy measures in the same
run; and the process's RSS growth while the mirror was built. `--spread N:M` spreads N rows over M namespaces and
times a search of one namespace, chosen at random. `--real` adds a row on real embeddings: the local embedder's
vectors of 45,000 sentences (bench/real_vectors.py), searched with the vectors of 5,000 others, codes and bits
first whatever the thresholds say: random vectors flatter an approximate read.
"""

import argparse
import time

from scratch_django import django_on_scratch

django_on_scratch("loom-bench-scale-")

import numpy as np

from bench.numpy_threads import numpy_default_threads
from bench.real_vectors import embedded
from retrieval import knobs
from retrieval.index import Vectors
from tests.synthetic import DIM, mirror, unit, vectors

POOL = 100


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def bandwidth_gbs() -> float:
    """Bytes per second a large copy moves (read + write), the best of three."""
    block, into = np.ones(64 << 20, dtype=np.float32), np.zeros(64 << 20, dtype=np.float32)  # 256 MB each, touched
    best = min(_timed(lambda: np.copyto(into, block)) for _ in range(3))
    return 2 * block.nbytes / best / 1e9


def _timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def timed_searches(searched: list[tuple[Vectors, np.ndarray, np.ndarray]]) -> tuple[list, list, list]:
    """For each (mirror, its value matrix, query): top()'s ms, numpy's ms, and top()'s recall@10. Each mirror is
    sent its queries once first, untimed, and any check of its bits they start is waited for."""
    for built, _, q in searched:
        built.top(q, False, POOL)
    bits_from = knobs.BITS_MIN_ROWS
    for built in {id(built): built for built, _, _ in searched}.values():
        if built.first_read(False) != "mirror" and bits_from and len(built.ids) >= bits_from:
            while built.bits_checked is None:  # the queries above started it
                time.sleep(0.05)
    ours, base, recall = [], [], []
    for built, values, q in searched:
        start = time.perf_counter()
        top = built.top(q, False, POOL)
        ours.append((time.perf_counter() - start) * 1000)
        with numpy_default_threads():
            start = time.perf_counter()
            scores = values @ q
            np.argpartition(-scores, 9)[:10]
            base.append((time.perf_counter() - start) * 1000)
        truth = {f"m{i}" for i in np.argsort(-scores)[:10]}
        recall.append(len({hit[0].memory_key for hit in top[:10]} & truth) / 10)
    return ours, base, recall


def report(label: str, read: str, ours, base, recall, rows: int, bound_ms: float, grown_mb: float) -> None:
    p50, p95 = np.percentile(ours, 50), np.percentile(ours, 95)
    print(
        f"{label:>22} {read:>6} {rows:>9,} {p50:>8.2f} {p95:>8.2f} {np.mean(recall):>7.3f} {np.percentile(base, 50):>9.2f} "
        f"{bound_ms:>9.2f} {p50 / np.percentile(base, 50):>6.2f} {grown_mb:>8.0f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--spread", default="1000000:1000", help="N:M, N rows over M namespaces ('' to skip)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real", action="store_true", help="add rows on real embeddings (45,000 rows)")
    parser.add_argument("--noise", type=float, nargs="+", default=[0.3, 0.1], help="a row per size for each")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    bandwidth = bandwidth_gbs()
    print(
        f"the vector leg's scan (Vectors.top, value axis, pool {POOL}), {DIM}-d; memory bandwidth "
        f"{bandwidth:.1f} GB/s; ms"
    )
    print(
        f"{'namespaces':>22} {'read':>6} {'rows':>9} {'p50':>8} {'p95':>8} {'R@10':>7} {'numpy p50':>9} {'bound':>9} "
        f"{'ratio':>6} {'RSS +MB':>8}"
    )
    for size in args.sizes:
        values = vectors(size, rng)
        before = rss_mb()
        built = mirror("ns", values, None)  # value-axis searches only: no key vectors held
        grown = rss_mb() - before
        for noise in args.noise:
            near = values[rng.integers(0, size, args.queries)]
            queries = unit(near + noise * rng.standard_normal((args.queries, DIM)))
            built.bits_checked, built.searched = None, 0  # each set of queries is checked on its own
            ours, base, recall = timed_searches([(built, values, q) for q in queries])
            bound = values.nbytes / (bandwidth * 1e9) * 1000
            report(f"1 (noise {noise})", built.first_read(False), ours, base, recall, size, bound, grown)
        del built, values
    if args.real:
        real = embedded(50_000)
        before = rss_mb()
        built = mirror("real", real[:45_000], None)
        grown = rss_mb() - before
        bound = real[:45_000].nbytes / (bandwidth * 1e9) * 1000
        searched = [(built, real[:45_000], q) for q in real[45_000 : 45_000 + args.queries]]
        knobs.CODES_MIN_ROWS = 1
        for bits_from in (0, 1):  # codes, then bits (once checked)
            knobs.BITS_MIN_ROWS = bits_from
            timed = timed_searches(searched)
            report("1 (real)", built.first_read(False), *timed, 45_000, bound, grown)
        del built
    if args.spread:
        total, count = (int(part) for part in args.spread.split(":"))
        per = total // count
        before = rss_mb()
        spaces = []
        for n in range(count):
            values = vectors(per, rng)
            spaces.append((mirror(f"ns{n}", values, None), values))
        grown = rss_mb() - before
        searched = []
        for pick in rng.integers(0, count, args.queries):
            built, values = spaces[pick]
            searched.append(
                (built, values, unit(values[rng.integers(0, per)][None, :] + 0.3 * rng.standard_normal((1, DIM)))[0])
            )
        ours, base, recall = timed_searches(searched)
        report(
            f"{count:,}",
            spaces[0][0].first_read(False),
            ours,
            base,
            recall,
            total,
            per * DIM * 4 / (bandwidth * 1e9) * 1000,
            grown,
        )


if __name__ == "__main__":
    main()
