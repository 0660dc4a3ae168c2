"""The scan kernels: exact float32, int8 codes and sign bits, and the partial sorts over their scores.

Pure functions of arrays, no lock: a caller holds its mirror's lock while the arrays it passes may change. The
codes and bits are what a large mirror reads before it rescores at full precision (retrieval/index/nearest.py);
docs/benchmarks.md ("Scale") measures each against the exact scan.
"""

import numpy as np
import simsimd

from retrieval import cores

# A scan of this many query-row pairs (about a millisecond of 384-d float32 on one thread) leaves the CPU the process's
# Python threads keep for its length (retrieval/cores.py); a shorter one costs less than the system calls and the move.
SCAN_ANYWHERE_MIN_PAIRS = 16_384


def nearest_rows(queries: np.ndarray, values: np.ndarray, visible: np.ndarray, count: int) -> np.ndarray:
    """Each query's `count` most similar visible rows, most similar first; in steps, so no (queries x rows) matrix."""
    best = np.full((len(queries), count), -np.inf, dtype=np.float32)
    at = np.zeros((len(queries), count), dtype=np.int64)
    step = 65_536
    for start in range(0, len(values), step):
        sims = queries @ values[start : start + step].T
        sims[:, ~visible[start : start + step]] = -np.inf
        scores = np.concatenate([best, sims], axis=1)
        rows = np.concatenate([at, np.broadcast_to(np.arange(start, start + sims.shape[1]), sims.shape)], axis=1)
        top = np.argpartition(-scores, count - 1, axis=1)[:, :count]
        best, at = np.take_along_axis(scores, top, axis=1), np.take_along_axis(rows, top, axis=1)
    order = np.argsort(-best, axis=1)
    return np.take_along_axis(at, order, axis=1)


def largest(scores: np.ndarray, count: int) -> np.ndarray:
    """The positions of the `count` largest scores, in no order, never one of -inf (a row not eligible): all the
    others when they are fewer. Those at or above a cut a sample of the scores suggests (a pass that only compares),
    partitioned; every eligible one when the cut kept too few: a fraction of partitioning them all. The -inf are
    left out before any partition: numpy partitions many equal numbers slowly (a namespace whose rows are mostly
    duplicates or retired; docs/benchmarks.md, "The index's choices, measured")."""
    size = len(scores)
    sample = scores[:: max(1, size // 8192)]
    keep = 3 * count * len(sample) // size  # ~3x the count above the cut, if the sample is fair
    sample = sample[sample > -np.inf]
    cut = np.partition(sample, len(sample) - 1 - keep)[len(sample) - 1 - keep] if keep < len(sample) else -np.inf
    above = np.flatnonzero(scores >= cut) if cut > -np.inf else np.array([], dtype=np.int64)
    if len(above) < count:
        above = np.flatnonzero(scores > -np.inf)
        if len(above) <= count:
            return above
    return above[np.argpartition(scores[above], len(above) - count)[len(above) - count :]]


def top_two(lines: np.ndarray, rows: np.ndarray, sims: np.ndarray, out_lines: list, out_rows: list) -> None:
    """Each line's two best rows by `sims` (lines x rows; -inf where not eligible; overwritten): a key has one live
    row in a scope, so the best row of another key is among them. Two argmax passes, cheaper than a partition of
    every line (with the float32 in-place pass before it, `nearest` 10-20% faster in A/B runs)."""
    across = np.arange(len(lines))
    for _ in range(min(2, len(rows))):
        top = sims.argmax(axis=1)
        found = sims[across, top] > -np.inf
        out_lines.append(lines[found])
        out_rows.append(rows[top[found]])
        sims[across, top] = -np.inf


def two_best(lines: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The places of each line's two best scores (finite), best first, lines ascending: a key has one live row in a
    scope, so a line's best row of another key is one of its two best. One sort of one number a pair, the line and
    then the score (a sort on the two as keys took twice as long)."""
    span = 2 * float(np.abs(scores).max(initial=0)) + 1  # so no line's numbers reach the next line's
    order = np.argsort(lines * span - scores.astype(np.float64))
    first = np.r_[True, lines[order][1:] != lines[order][:-1]]
    return order[first | np.r_[False, first[:-1]]]


def cdist(queries: np.ndarray, rows: np.ndarray, **kwargs) -> np.ndarray:
    """simsimd's pairwise distances (or dot products), as a float32 (queries x rows) array. Never with `out=`:
    simsimd 6.5 then returns None without taking a reference to it, so every call took one of None's, and a
    long-running process died ("deallocating None") after some hundred thousand searches. A long scan runs on any
    CPU, beside the Python threads' (retrieval/cores.py)."""
    with cores.anywhere(len(queries) * len(rows) >= SCAN_ANYWHERE_MIN_PAIRS):
        return np.asarray(simsimd.cdist(queries, rows, out_dtype="float32", **kwargs))


def signs(vectors: np.ndarray) -> np.ndarray:
    """Each row's signs, a bit a dimension, packed."""
    return np.packbits(vectors > 0, axis=-1)


# A residual code's steps across one step of the first code: each component within half a step of the first code's
# 1/RESIDUAL_STEPS, ~1e-5 for 384-d embeddings.
RESIDUAL_STEPS = 254


def residuals(vectors: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """What the int8 codes of these rows (`coded`) leave over, coded again in int8: each remainder is within half a
    step of the first code, so RESIDUAL_STEPS of the second span it."""
    left = vectors / scales[:, None] - codes  # in [-0.5, 0.5]
    return np.clip(np.round(left * RESIDUAL_STEPS), -127, 127).astype(np.int8)


def coded(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes of these rows, each scaled so its largest component is 127, and each row's scale back."""
    # (Rounded in place, the magnitudes from the extremes: no temporary as large as the rows but the scaled one; a
    # load's codes took 11% of it with three.)
    largest = np.maximum(np.maximum(vectors.max(axis=1), -vectors.min(axis=1)), 1e-12)
    scaled = vectors * (127 / largest)[:, None]
    return np.rint(scaled, out=scaled).astype(np.int8), (largest / 127).astype(np.float32)


class Decoded:
    """A compact mirror's value vectors as its two codes give them (`residuals`: within ~1e-5 of each component), a
    slice or a selection at a time: what its cells are trained and filled with, never all its rows at once."""

    def __init__(self, codes: np.ndarray, residuals: np.ndarray, scales: np.ndarray):
        self.codes, self.residuals, self.scales = codes, residuals, scales
        self.shape = codes.shape

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, rows) -> np.ndarray:
        return (self.codes[rows] + self.residuals[rows] / np.float32(RESIDUAL_STEPS)) * self.scales[rows, None]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self[:] if dtype is None else self[:].astype(dtype)
