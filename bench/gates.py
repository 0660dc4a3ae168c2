"""The write gates' nearest-row read at scale: the exact comparison against the cells (retrieval/index/cells.py).

    .venv/bin/python bench/gates.py [--real 10000 20000 45000] [--synthetic 100000 300000 1000000] [--batches 6]
                                    [--sessions 40]

A component benchmark: `Vectors.nearest()`, what the write gates ask of a namespace's mirror for each batch, on
500-row batches. Real rows: the local embedder's vectors of 50,000 distinct sentences (bench/real_vectors.py, ~10
minutes the first time); the first N are stored, and batches of the last 5,000 are judged as new writes.
Synthetic rows (tests/synthetic.py, clustered unit vectors), for the sizes the real set cannot reach; each batch
half near copies of stored rows (cosine ~0.9), half new rows; with --sessions, the synthetic rows are written in that
many sessions (row i in session i mod N, a copy in its row's), so each value is compared with its own session's rows
(a cell holds a few of one session's: the small blocks `Vectors.nearest` scores together). Reported per size: p50 ms
per batch, exact (the baseline, same run) and cells; the cells' training time; and how the two agree where the gates
act: of the batch rows whose exact nearest is at or past the conflict gate, the share whose nearest row the cells name
too, and the share of all rows whose verdict (duplicate, conflict, none: by the similarity alone) is the same.
Beside them, the compact mirror's (each value vector as two int8 codes, kept for a namespace past
LOOM_VECTOR_MIRROR_MAX_BYTES): its p50, its share of the gated rows' nearest named, and what the full mirror weighs
against it. And the stored cells' (retrieval/index/stored_cells.py: the cells kept in the embedded engine, for a
namespace no mirror holds): the rows stored into `memory_embeddings` as bare inserts, their training and backfill
timed, then each batch's read (two statements) timed, and its share of the gated rows' nearest named.
"""

import argparse
import statistics
import time

from scratch_django import django_on_scratch

django_on_scratch("loom-bench-gates-")

import numpy as np
from django.conf import settings

from bench.real_vectors import embedded
from retrieval import index, knobs
from retrieval.index import Vectors, stored_training
from retrieval.store import clickhouse, schema
from tests.synthetic import DATED, DIM, mirror, unit, vectors

BATCH = 500
SCOPE = ("default", "", "", "", "fact")


def session_scope(row: int, sessions: int) -> tuple:
    """The write scope of stored row `row` (tests/synthetic.py's `mirror` puts row i in session i mod N)."""
    return ("default", "", f"s{row % sessions}", "", "fact") if sessions else SCOPE


def verdict(hit) -> str:
    similarity = -1.0 if hit is None else hit[1]
    if similarity >= settings.LOOM_DUPLICATE_THRESHOLD:
        return "duplicate"
    return "conflict" if similarity >= settings.LOOM_CONFLICT_THRESHOLD else "none"


def judged(built, batches: list[tuple[np.ndarray, list]], exact_rows: int) -> tuple[list[float], list]:
    knobs.GATES_EXACT_ROWS = exact_rows
    timings, found = [], []
    for n, (batch, scopes) in enumerate(batches):
        keys = [f"new{n}.{i}" for i in range(len(batch))]
        start = time.perf_counter()
        found += built.nearest(batch, keys, scopes)
        timings.append((time.perf_counter() - start) * 1000)
    return timings, found


def in_clickhouse(namespace: str, stored: np.ndarray, sessions: int) -> None:
    """The rows as a namespace's live vector rows (keys m0, m1, ..., as the mirror names them)."""
    for start in range(0, len(stored), 50_000):
        rows = [
            {
                "org": "bench",
                "namespace": namespace,
                "embedding_model": "bench",
                "memory_key": f"m{i}",
                "agent": "default",
                "session_id": f"s{i % sessions}" if sessions else "",
                "version": 1,
                "revision": 1,
                "status": "active",
                "memory_type": "fact",
                "embedding_dim": DIM,
                "value_vector": stored[i],
                "dated_at": DATED,
                "created_at": DATED,
            }
            for i in range(start, min(start + 50_000, len(stored)))
        ]
        clickhouse.insert("memory_embeddings", rows)


def judged_stored(namespace: str, stored: np.ndarray, batches: list[tuple], sessions: int) -> tuple:
    """The stored cells' training (s) and each batch's read (ms), and what they found."""
    in_clickhouse(namespace, stored, sessions)
    start = time.perf_counter()
    stored_training.train("bench", namespace, "bench")
    trained = time.perf_counter() - start
    timings, found = [], []
    for n, (batch, scopes) in enumerate(batches):
        keys = [f"new{n}.{i}" for i in range(len(batch))]
        start = time.perf_counter()
        found += index.stored_nearest("bench", namespace, "bench", batch, keys, scopes, len(stored))
        timings.append((time.perf_counter() - start) * 1000)
    return trained, timings, found


def measure(label: str, stored: np.ndarray, batches: list[tuple], exact_batches: int, sessions: int = 0) -> None:
    built = mirror("ns", stored, None, sessions=sessions)  # the gates read no key vectors
    exact_ms, exact = judged(built, batches[:exact_batches], 10**12)
    start = time.perf_counter()
    knobs.GATES_EXACT_ROWS = 0
    built._gate_cells()
    trained = time.perf_counter() - start
    cells_ms, cells = judged(built, batches, 0)
    full_bytes = built.nbytes
    del built
    compact = mirror("ns", stored, None, Vectors(keyed=False, compact=True), sessions=sessions)
    compact._gate_cells()
    compact_ms, compacts = judged(compact, batches, 0)
    compact_bytes = compact.nbytes
    del compact
    stored_trained, stored_ms, stores = judged_stored(f"{label}-{len(stored)}", stored, batches, sessions)
    pairs = list(zip(exact, cells[: len(exact)], compacts[: len(exact)], stores[: len(exact)]))
    gated = [(e, c, k, t) for e, c, k, t in pairs if e is not None and e[1] >= settings.LOOM_CONFLICT_THRESHOLD]

    def named(at: int) -> float:
        return sum(row[at] is not None and row[at][0] == row[0][0] for row in gated) / max(1, len(gated))

    agree = sum(verdict(e) == verdict(c) for e, c, _, _ in pairs) / len(pairs)
    print(
        f"{label:>22}{len(stored):>10,}{statistics.median(exact_ms):>10.1f}{statistics.median(cells_ms):>9.1f}"
        f"{statistics.median(exact_ms) / statistics.median(cells_ms):>7.1f}x{trained:>9.2f}"
        f"{len(gated):>7}{named(1):>8.3f}{agree:>8.3f}{statistics.median(compact_ms):>9.1f}{named(2):>8.3f}"
        f"{full_bytes / compact_bytes:>7.1f}x"
        f"{statistics.median(stored_ms):>9.1f}{stored_trained:>9.1f}{named(3):>8.3f}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=int, nargs="*", default=[10_000, 20_000, 45_000])
    parser.add_argument("--synthetic", type=int, nargs="*", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=0, help="write the synthetic rows in this many sessions")
    args = parser.parse_args()
    schema.apply()
    stored_training.SETTLE_S = 0  # no other writer to wait for
    print(
        f"the write gates' nearest-row read (Vectors.nearest), {BATCH}-row batches, {DIM}-d; conflict gate "
        f"{settings.LOOM_CONFLICT_THRESHOLD}, duplicate gate {settings.LOOM_DUPLICATE_THRESHOLD}"
    )
    print(
        f"{'rows':>22}{'stored':>10}{'exact p50':>10}{'cells':>9}{'ratio':>8}{'train s':>9}{'gated':>7}"
        f"{'same':>8}{'verdict':>8}{'compact':>9}{'same':>8}{'bytes':>8}{'stored':>9}{'train s':>9}{'same':>8}"
    )
    if args.real:
        real = embedded(50_000)
        held = real[45_000:]
        batches = [(held[at : at + BATCH], [SCOPE] * BATCH) for at in range(0, BATCH * args.batches, BATCH)]
        for size in args.real:
            measure("real (local:minilm)", real[:size], batches, args.batches)
    rng = np.random.default_rng(0)
    for size in args.synthetic:
        stored = vectors(size, rng)
        batches = []
        for _ in range(args.batches):
            picked = rng.integers(0, size, BATCH // 2)
            copies = unit(stored[picked] + 0.025 * rng.standard_normal((len(picked), DIM)).astype(np.float32))
            # A copy in its row's session, the new rows spread over all (no draw: one scope's batches as before).
            rows = [*picked.tolist(), *range(BATCH - len(picked))]
            scopes = [session_scope(row, args.sessions) for row in rows]
            batches.append((np.concatenate([copies, vectors(BATCH - len(copies), rng)]), scopes))
        # The exact comparison at a million rows costs seconds a batch: two are enough for its median.
        label = f"synthetic, {args.sessions} sessions" if args.sessions else "synthetic (clustered)"
        measure(label, stored, batches, args.batches if size < 500_000 else 2, args.sessions)
        del stored


if __name__ == "__main__":
    main()
