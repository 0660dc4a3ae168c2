"""Cells: a large vector mirror's rows partitioned by their nearest centroid (an inverted file), so the write gates
compare a batch with the rows of the few cells nearest each of its vectors instead of with every stored row.

Why: the exact comparison is (batch x namespace) dot products, so ingest slowed as a namespace grew. The gates only
act on a row at least as close as the conflict gate (cosine 0.85 by default), and a row that close to a vector lies
in one of the cells nearest it: with cells of ~ROWS_PER_CELL rows a batch reads about (batch x PROBES x
ROWS_PER_CELL) rows whatever the namespace's size (bench/gates.py measures the time and the agreement with the exact
comparison; docs/benchmarks.md). Each cell keeps its rows' int8 codes side by side, so reading one is a contiguous
pass over a quarter of the bytes (gathering a cell's rows from the mirror's write order cost more than comparing
them); the rows added since the last merge (below) are read from the mirror's codes. One compiled pass scores every
(value, row) pair a batch reads and keeps each value's two best (`two_best`).

Two levels, so that training stays linear in the rows: ~sqrt(cells) coarse centroids (k-means over a sample),
each split into fine centroids trained on its share of the sample; a row goes to the nearest fine centroid of its
nearest coarse one, and a vector's probes are sought among the fine centroids of its COARSE_PROBES nearest coarse
ones. Centroids are means, compared by Euclidean distance: real embeddings share a large common direction, which unit
centroids blur (fewer of the gated rows' nearest found). A row far from every centroid (a topic the training never
saw) has no meaningful cell: it goes to the strays, which every vector reads. Rows added later join their cell at once
(the next batch reads them); the centroids are retrained once the rows have grown by half, or the strays grown,
since (`due`).

A cell's rows are kept in order of their write scope (the gates only compare a value with rows of its own scope), so
a scope's rows in a cell are one contiguous slice (`blocks`): a batch writing into many sessions of a namespace
compares only the pairs it judges. All the cells' rows are one run of arrays, in order of (cell, scope)
(`SCOPE_BITS`). Rows added later are first kept apart in a run of their own (their places and keys only; their codes
are read from the mirror's), merged into the first once they are RECENT_SHARE of it, one pass over every row: placing
each batch's rows in the cells they joined cost a pass over each such cell, and the ingest rate fell with the cells.
"""

import functools
import math
from contextlib import AbstractContextManager, nullcontext
from typing import NamedTuple

import numpy as np

ROWS_PER_CELL = 256
PROBES = 8  # cells read per vector, besides its own and the strays
COARSE_PROBES = 8  # coarse cells among whose fine ones a vector's probes are found
SAMPLE_PER_CELL = 32  # sample rows per cell the centroids are trained on
ROUNDS = 8  # k-means iterations
# Strays, which every vector reads, stay few: at training, the worst-fitting 1% of the rows, at most two cells' worth;
# the centroids are trained again once a few cells' worth more have come.
STRAYS_TRAINED = 0.01, 2 * ROWS_PER_CELL
STRAYS_GROWN = 4 * PROBES * ROWS_PER_CELL
# The centroids are trained again once the rows are this many times those they were trained on: until then the cells
# fill past ROWS_PER_CELL, and a batch compares as many more pairs: 1.5 trades some background training for a
# quicker read (docs/benchmarks.md, "The index's choices, measured").
RETRAIN_GROWTH = 1.5
# A row's key: (its cell << SCOPE_BITS) + its write scope; the rows are kept in order of it.
SCOPE_BITS = 32
# The rows added since the last merge are merged in once they are this share of the rest: a merge passes over every
# row, and the recent rows' codes are gathered from the mirror's when read.
RECENT_SHARE = 1 / 8


class Blocks(NamedTuple):
    """What a batch reads of one run of rows, block by block: block b is the rows `members[start[b]:end[b]]` (those
    of one cell and one write scope), read by the vectors `readers[first[b]:][:count[b]]` (ascending)."""

    start: np.ndarray
    end: np.ndarray
    first: np.ndarray
    count: np.ndarray
    readers: np.ndarray
    members: np.ndarray


class Cells:
    def __init__(self, coarse: np.ndarray, fine: list[np.ndarray], dim: int):
        self.coarse = coarse  # (coarse cells, dim)
        self.fine = np.concatenate(fine)  # (cells, dim): coarse cell c's are fine[starts[c]:starts[c + 1]]
        self.starts = np.cumsum([0] + [len(part) for part in fine])
        self.widest = max(len(part) for part in fine)  # the most fine centroids of one coarse cell
        # Half the centroids' squared norms, which every fit subtracts: made once, not for each batch's fits.
        self.coarse_half, self.fine_half = _half_norms(self.coarse), _half_norms(self.fine)
        self.stray = len(self.fine)  # the last cell: rows that fit no centroid
        # The rows, in order of their keys (cell, write scope): their positions in the mirror, their keys, their int8
        # codes and the codes' scales.
        self.members = np.zeros(0, dtype=np.int64)
        self.keys = np.zeros(0, dtype=np.int64)
        self.codes = np.zeros((0, dim), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        # The rows added since (rows merged..rows-1 of the mirror), in order of their keys too: positions and keys;
        # their codes and scales in the order they came, for the merge.
        self.recent_members = np.zeros(0, dtype=np.int64)
        self.recent_keys = np.zeros(0, dtype=np.int64)
        self.recent_codes: list[np.ndarray] = []
        self.recent_scales: list[np.ndarray] = []
        self.fit_floor = -1.0  # set by `trained`
        self.rows = self.merged = 0  # rows 0..rows-1 are in a cell; 0..merged-1 in the first run
        self.merging = False  # a merge under way in the background (`Vectors._merge_cells`)
        # The vectors `probed` last placed, and their cells and fits: a write's gates probe its rows just before the
        # mirror places them (`cell_of`): placed once, not probed twice.
        self.placed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.trained_on = self.strays_trained = 0  # rows and strays when trained

    @classmethod
    def fitted(cls, vectors: np.ndarray, rows: int | None = None) -> "Cells":
        """Centroids for these rows (unit vectors), ~ROWS_PER_CELL rows a cell (of `rows`, when these are a sample of
        them), and the fit below which a row is a stray; no row placed."""
        rows = rows or len(vectors)
        count = max(1, rows // ROWS_PER_CELL)
        rng = np.random.default_rng(len(vectors))  # the same rows, the same cells
        sample = vectors[np.sort(rng.choice(len(vectors), min(len(vectors), sample_size(rows)), replace=False))]
        coarse = _kmeans(sample, max(1, round(math.sqrt(count))), rng)
        owner = _nearest(sample, coarse)[0]
        fine = []
        for c in range(len(coarse)):
            share = sample[owner == c]
            wanted = max(1, round(count * len(share) / len(sample)))
            fine.append(_kmeans(share, wanted, rng) if len(share) else coarse[c : c + 1])
        cells = cls(coarse, fine, vectors.shape[1])
        fit = cells.cell_of(vectors)[1]
        share, most = STRAYS_TRAINED
        # Of every row (the sample fits its centroids better), and of a sample its share of them.
        worst = int(min(share * rows, most) * len(fit) / rows)
        cells.fit_floor = float(np.partition(fit, worst)[worst]) if worst else -np.inf
        return cells

    @classmethod
    def trained(cls, vectors: np.ndarray, codes: np.ndarray, scales: np.ndarray, scopes: np.ndarray) -> "Cells":
        """Centroids for these rows (unit vectors), and the rows placed in their cells with their codes and write
        scopes."""
        cells = cls.fitted(vectors)
        keys = _keys(cells.home(vectors), scopes)
        order = np.argsort(keys, kind="stable")
        cells.keys, cells.members, cells.codes, cells.scales = keys[order], order, codes[order], scales[order]
        cells.rows = cells.merged = len(vectors)
        cells.trained_on, cells.strays_trained = len(vectors), len(cells.held(cells.stray))
        return cells

    def home(self, vectors: np.ndarray) -> np.ndarray:
        """Each vector's cell: its centroid's, or the strays' when it fits it worse than the training's worst few."""
        cell, fit = self.cell_of(vectors)
        cell[fit < self.fit_floor] = self.stray
        return cell

    def read_by(self, vectors: np.ndarray) -> np.ndarray:
        """The cells each vector reads, (vectors, PROBES + 2): its PROBES nearest, its own (`probed`) and the
        strays."""
        return np.column_stack([*self.probed(vectors), np.full(len(vectors), self.stray)])

    @property
    def nbytes(self) -> int:
        """The centroids and what the cells keep of their rows."""
        kept = [self.members, self.keys, self.codes, self.scales, self.recent_members, self.recent_keys]
        kept += self.recent_codes + self.recent_scales
        return self.coarse.nbytes + self.fine.nbytes + sum(part.nbytes for part in kept)

    def held(self, cell: int) -> np.ndarray:
        """The positions in the mirror of a cell's rows."""
        edges = np.array([cell << SCOPE_BITS, (cell + 1) << SCOPE_BITS])
        first, recent = np.searchsorted(self.keys, edges), np.searchsorted(self.recent_keys, edges)
        return np.concatenate([self.members[first[0] : first[1]], self.recent_members[recent[0] : recent[1]]])

    def due(self) -> bool:
        """Whether the centroids should be trained again: the rows grew RETRAIN_GROWTH times since, or the strays grew."""
        grown = len(self.held(self.stray)) - self.strays_trained
        return self.rows >= RETRAIN_GROWTH * self.trained_on or grown > STRAYS_GROWN

    def extend(self, vectors: np.ndarray, codes: np.ndarray, scales: np.ndarray, scopes: np.ndarray) -> None:
        """Place rows self.rows.. (these vectors, their codes and write scopes) in their cells, among the recent rows
        (`merge` moves them into the first run, once `merge_due`)."""
        # Copies: these are views of the mirror's arrays, which a view would keep once they grow.
        self._place(self.home(vectors), codes.copy(), scales.copy(), scopes)

    def merge_due(self) -> bool:
        """Whether the recent rows are RECENT_SHARE of the first run, and no merge is under way."""
        return not self.merging and len(self.recent_keys) > RECENT_SHARE * self.merged

    def _place(self, cell: np.ndarray, codes: np.ndarray, scales: np.ndarray, scopes: np.ndarray) -> None:
        """Rows self.rows.. (in these cells) among the recent ones, in order of their keys."""
        keys = _keys(cell, scopes)
        order = np.argsort(keys, kind="stable")
        at = np.searchsorted(self.recent_keys, keys[order], side="right")
        self.recent_keys = np.insert(self.recent_keys, at, keys[order])
        self.recent_members = np.insert(self.recent_members, at, order + self.rows)
        self.recent_codes.append(codes)
        self.recent_scales.append(scales)
        self.rows += len(cell)

    def merge(self, lock: AbstractContextManager | None = None) -> None:
        """The recent rows into the first run (`_merged`), built outside `lock` (the mirror's, when it merges in the
        background: a large merge under the lock held its writes and searches for seconds): the rows are read, and
        the new run put in, under it; the rows placed meanwhile stay recent. Nothing a merge reads changes in place
        (a placement makes new recent arrays)."""
        lock = lock or nullcontext()
        with lock:
            first = self.keys, self.members, self.codes, self.scales
            recent = self.recent_keys, self.recent_members, list(self.recent_codes), list(self.recent_scales)
            merged, rows = self.merged, self.rows
        if not len(recent[0]):
            return
        run = _merged(first, recent, merged)
        with lock:
            self.keys, self.members, self.codes, self.scales = run
            since = self.recent_members >= rows
            self.recent_keys, self.recent_members = self.recent_keys[since], self.recent_members[since]
            came = len(recent[2])
            self.recent_codes, self.recent_scales = self.recent_codes[came:], self.recent_scales[came:]
            self.merged = rows

    def cell_of(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each vector's cell (the nearest fine centroid of its nearest coarse one), and how well it fits it."""
        if (placed := self.placed) is not None and placed[0].shape == vectors.shape and (placed[0] == vectors).all():
            return placed[1].copy(), placed[2].copy()
        owner = _nearest(vectors, self.coarse, self.coarse_half)[0]
        cell, fit = np.empty(len(vectors), dtype=np.int64), np.empty(len(vectors), dtype=np.float32)
        for c in np.unique(owner):
            at = np.flatnonzero(owner == c)
            start, end = self.starts[c], self.starts[c + 1]
            near, fit[at] = _nearest(vectors[at], self.fine[start:end], self.fine_half[start:end])
            cell[at] = start + near
        return cell, fit

    def probed(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each vector's PROBES nearest fine centroids, looked for among those of its COARSE_PROBES nearest coarse
        cells: the comparison grows with the square root of the cells, not with the cells (every fine centroid
        compared, and partitioned, cost a batch far more at a million rows). And its own cell, as `cell_of`
        places it: the nearest coarse cell is among those compared. Each coarse cell's fine centroids are compared
        with its readers in one product, into `widest` slots per (vector, coarse cell), and each vector's PROBES
        nearest are partitioned out of its slots once, not once per coarse cell (docs/benchmarks.md, "The index's
        choices, measured")."""
        count, k = len(vectors), min(COARSE_PROBES, len(self.coarse))
        coarse_fits = _fit(vectors, self.coarse, self.coarse_half)
        coarse = _top(coarse_fits, k)  # (vectors, k)
        # Each vector's distance (-fit) to each fine centroid of each of its coarse cells, padded with inf: a vector's
        # nearest are then the few smallest of a row, a partition that padding slows little (its largest, past runs
        # of padding -inf, took 5x as long).
        gaps = np.full((count, k, self.widest), np.inf, dtype=np.float32)
        # Each coarse cell's readers (vector, slot), grouped by one sort: not a pass over all of them per cell.
        order = np.argsort(coarse.ravel(), kind="stable")
        edges = np.searchsorted(coarse.ravel()[order], np.arange(len(self.coarse) + 1))
        readers, reader_slots = np.divmod(order, k)
        for c in np.flatnonzero(np.diff(edges)).tolist():
            lines, slots = readers[edges[c] : edges[c + 1]], reader_slots[edges[c] : edges[c + 1]]
            start, end = self.starts[c], self.starts[c + 1]
            gaps[lines, slots, : end - start] = -_fit(vectors[lines], self.fine[start:end], self.fine_half[start:end])
        across = np.arange(count)
        home = np.argmax(coarse == coarse_fits.argmax(axis=1)[:, None], axis=1)  # the nearest coarse cell's slot
        homed = gaps[across, home]
        own = self.starts[coarse[across, home]] + homed.argmin(axis=1)
        self.placed = vectors.copy(), own.copy(), -homed.min(axis=1)
        probes = min(PROBES, int(np.diff(self.starts)[coarse].sum(axis=1).min()))  # (few cells: all of them)
        nearest = np.argpartition(gaps.reshape(count, k * self.widest), probes - 1, axis=1)[:, :probes]
        slot, at = np.divmod(nearest, self.widest)
        return self.starts[np.take_along_axis(coarse, slot, axis=1)] + at, own

    def blocks(self, vectors: np.ndarray, scopes: np.ndarray) -> tuple[Blocks, Blocks]:
        """What these vectors (of these write scopes: the mirror's codes, -1 for a scope with no row) read, of the
        merged rows and of the recent ones: for each (cell, scope), the rows of that scope and the vectors that read
        them. A vector reads the PROBES cells whose centroids are nearest it, the cell it would be placed in (a row's
        cell is chosen within its coarse cell, so it may not be among those), and the strays. One sort of every
        (cell, scope, vector) read, each one number, and one search of each run's keys for all the blocks: no pass
        per block (a Python step each, and a batch reads thousands once the cells outnumber its values' probes)."""
        count = len(vectors)
        near = self.read_by(vectors)
        lines = np.repeat(np.arange(count), near.shape[1])
        known = scopes[lines] >= 0
        scoped = int(scopes.max()) + 1
        reads = np.unique((near.ravel()[known] * scoped + scopes[lines[known]]) * count + lines[known])
        blocks, readers = np.divmod(reads, count)
        first = np.flatnonzero(np.diff(blocks, prepend=-1))  # each block's first read
        cell, scope = np.divmod(blocks[first], scoped)
        wanted = (cell << SCOPE_BITS) + scope
        counts = np.diff(np.r_[first, len(reads)])

        def of(keys: np.ndarray, members: np.ndarray) -> Blocks:
            start, end = np.searchsorted(keys, wanted), np.searchsorted(keys, wanted + 1)
            held = start < end
            return Blocks(start[held], end[held], first[held], counts[held], readers, members)

        return of(self.keys, self.members), of(self.recent_keys, self.recent_members)

    def two_best(
        self, vectors: np.ndarray, scopes: np.ndarray, queries: np.ndarray, live: np.ndarray, codes, scales
    ) -> np.ndarray:
        """Each vector's two best rows by their int8 codes (`queries`: the vectors' codes) among the live rows of its
        write scope in the cells it reads (`blocks`): a (vectors, 2) array of the mirror's rows, -1 where there are
        fewer. The recent rows' codes are read from the mirror's (`codes`, `scales`)."""
        best = np.full((len(vectors), 2), -1, dtype=np.int64)
        scores = np.full(best.shape, -np.inf, dtype=np.float32)
        merged, recent = self.blocks(vectors, scopes)
        kernel = _compiled_pass()
        kernel(*merged, self.codes, self.scales, False, live, queries, best, scores)
        kernel(*recent, codes, scales, True, live, queries, best, scores)
        return best


@functools.cache
def _compiled_pass():
    """`_pass_over_pairs`, compiled (cached on disk). numba is imported here, on a large namespace's first gated
    write: importing it costs a process time and memory that most never need."""
    import numba

    return numba.njit(cache=True, nogil=True)(_pass_over_pairs)


def _pass_over_pairs(
    start, end, first, count, readers, members, codes, scales, by_row, live, queries, best, scores
) -> None:
    """Into `best` and `scores`: each reader's two best live rows of the blocks (a `Blocks`' arrays), by the dot
    product of its query's codes with the rows' (`codes` and `scales` at a row's place in the run, or at the row when
    `by_row`). One compiled pass over the pairs, nothing gathered: with numpy, a batch's pairs were gathered (their
    codes and queries' codes), scored and sorted, several times slower; a block of many pairs scores as fast as
    simsimd's cdist did (bench/gates.py; docs/benchmarks.md, "The index's choices, measured")."""
    dim = queries.shape[1]
    for block in range(len(start)):
        for read in range(first[block], first[block] + count[block]):
            line = readers[read]
            for place in range(start[block], end[block]):
                row = members[place]
                if not live[row]:
                    continue
                at = row if by_row else place
                total = 0
                for d in range(dim):
                    total += np.int32(codes[at, d]) * np.int32(queries[line, d])
                score = total * scales[at]
                if score > scores[line, 1]:
                    if score > scores[line, 0]:
                        scores[line, 1], best[line, 1] = scores[line, 0], best[line, 0]
                        scores[line, 0], best[line, 0] = score, row
                    else:
                        scores[line, 1], best[line, 1] = score, row


def _merged(first: tuple, recent: tuple, merged: int) -> list[np.ndarray]:
    """The first run's keys, members, codes and scales with the recent rows' (their codes and scales in the order
    they came, from row `merged`): each recent row goes after the rows of its key there, so both stay in order."""
    keys, members, codes, scales = recent
    count = len(keys)
    into = np.searchsorted(first[0], keys, side="right") + np.arange(count)
    rest = np.ones(len(first[0]) + count, dtype=bool)
    rest[into] = False
    order = members - merged  # each recent row's place in the order they came
    run = []
    for old, new in zip(first, (keys, members, np.concatenate(codes)[order], np.concatenate(scales)[order])):
        both = np.empty((len(rest), *old.shape[1:]), dtype=old.dtype)
        both[into], both[rest] = new, old
        run.append(both)
    return run


def sample_size(rows: int) -> int:
    """How many of these rows the centroids are fitted on."""
    return max(1, rows // ROWS_PER_CELL) * SAMPLE_PER_CELL


def _keys(cell: np.ndarray, scopes: np.ndarray) -> np.ndarray:
    """Rows' keys: each one's cell and write scope."""
    return (cell << SCOPE_BITS) + scopes.astype(np.int64)


def _top(scores: np.ndarray, count: int) -> np.ndarray:
    """Each row's `count` largest scores' columns, in no order."""
    width = scores.shape[1]
    return np.argpartition(scores, width - count, axis=1)[:, width - count :]


def _half_norms(centroids: np.ndarray) -> np.ndarray:
    return (centroids * centroids).sum(axis=1) / 2


def _fit(vectors: np.ndarray, centroids: np.ndarray, half_norms: np.ndarray) -> np.ndarray:
    """How well each vector fits each centroid (`half_norms`: `_half_norms(centroids)`), greater is nearer:
    v.c - |c|^2 / 2 orders centroids as the Euclidean distance does (|v| is the same for all)."""
    fits = vectors @ centroids.T
    fits -= half_norms
    return fits


def _nearest(
    vectors: np.ndarray, centroids: np.ndarray, half_norms: np.ndarray | None = None, step: int = 65_536
) -> tuple[np.ndarray, np.ndarray]:
    """Each vector's nearest centroid, and its fit to it; in steps, so a million rows need no (rows x centroids)
    matrix."""
    half_norms = _half_norms(centroids) if half_norms is None else half_norms
    nearest, fit = np.zeros(len(vectors), dtype=np.int64), np.zeros(len(vectors), dtype=np.float32)
    for at in range(0, len(vectors), step):
        fits = _fit(vectors[at : at + step], centroids, half_norms)
        nearest[at : at + step] = fits.argmax(axis=1)
        fit[at : at + step] = np.take_along_axis(fits, nearest[at : at + step, None], axis=1)[:, 0]
    return nearest, fit


def _kmeans(vectors: np.ndarray, count: int, rng) -> np.ndarray:
    """k-means: `count` centroids, started from distinct rows; a centroid left empty keeps its place."""
    count = min(count, len(vectors))
    centroids = vectors[rng.choice(len(vectors), count, replace=False)].copy()
    for _ in range(ROUNDS):
        owner = _nearest(vectors, centroids)[0]
        members = np.zeros((count, len(vectors)), dtype=np.float32)  # one-hot: the sums are one matrix product
        members[owner, np.arange(len(vectors))] = 1
        sizes = members.sum(axis=1)
        filled = sizes > 0
        centroids[filled] = (members[filled] @ vectors) / sizes[filled, None]
    return centroids
