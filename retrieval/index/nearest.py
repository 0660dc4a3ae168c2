"""A mirror's vector reads: a search's nearest rows (exact, by int8 codes, or by sign bits then codes, as its size
says) and the write gates' nearest row of each new vector (exact, or among the cells nearest it).

Lock story: `top`, `scored` and `nearest` hold the mirror's lock (`Vectors.lock`) for their scan; the sign bits'
check (`_check_bits`, under `checking`) and the cells' training (`_train_cells`, under `training`) run in the
background outside it, and take it only to install what they found.
"""

import logging
import threading

import numpy as np

from retrieval import knobs
from retrieval.index.cells import Cells
from retrieval.index.held import ms
from retrieval.index.scan import Decoded, cdist, coded, largest, nearest_rows, signs, top_two, two_best
from retrieval.store.rows import RowId, name_order

log = logging.getLogger(__name__)

BITS_CHECK_QUERIES = 64
BITS_CHECK_FLOOR = 0.99
BITS_RECHECK_SEARCHES = 4096  # the queries a mirror is sent may change


class Nearest:
    """The vector reads of `Vectors` (retrieval/index/vectors.py)."""

    def top(self, vector: np.ndarray, key_axis: bool, pool: int) -> list[tuple[RowId, float, float, dict]]:
        """The pool's best rows by greatest(value, key) similarity; ties by name, as the SQL leg orders them."""
        with self.lock:
            return self._top(vector, key_axis, pool)

    def _top(self, vector: np.ndarray, key_axis: bool, pool: int) -> list[tuple[RowId, float, float, dict]]:
        size = len(self.ids)
        if size == 0:
            return []
        visible = self.visible[:size]
        count = int(np.count_nonzero(visible))
        take = min(count, pool + 32)  # a margin, so rows tied at the cut are all considered
        if take == 0:
            return []
        read = self.first_read(key_axis)
        if read != "mirror":
            self._remember(vector)
            rows = self._codes_first(vector, max(take, knobs.CODES_CANDIDATES), read == "bits")
            value, key = self.values[rows] @ vector, np.zeros(len(rows), dtype=np.float32)
        else:  # simsimd on one thread: quicker than BLAS on two (docs/benchmarks.md, "The index's choices, measured")
            rows = np.arange(size)
            value = cdist(vector[None, :], self.values[:size], metric="dot")[0]
            key = cdist(vector[None, :], self.keys[:size], metric="dot")[0] if key_axis else np.zeros_like(value)
        best = np.where(visible[rows], np.maximum(value, key), -np.inf)
        chosen = largest(best, take)
        at = rows[chosen].tolist()
        ids = [self.ids[i] for i in at]
        # Ordered as plain tuples compared in C, no Python key per row: (-score, memory_key, RowId) orders as
        # (-score, name_order) does (a RowId is namespace, memory_key, agent, session_id, version).
        ordered = sorted(zip((-best[chosen]).tolist(), [rid.memory_key for rid in ids], ids, range(len(at))))
        value, key = value[chosen].tolist(), key[chosen].tolist()
        return [(rid, value[i], key[i], self.meta[at[i]]) for _, _, rid, i in ordered[:pool]]

    def scored(self, ids: list[RowId], vector: np.ndarray, key_axis: bool) -> list[tuple[RowId, float, float, dict]]:
        """What `top` says of each of these rows that is live here (visible); the others are left out."""
        with self.lock:
            held = [(rid, at) for rid in ids if (at := self.position.get(rid)) is not None and self.visible[at]]
            if not held:
                return []
            positions = np.asarray([at for _, at in held])
            value = self.values[positions] @ vector
            key = self.keys[positions] @ vector if key_axis else np.zeros_like(value)
            return [(rid, float(v), float(k), self.meta[at]) for (rid, at), v, k in zip(held, value, key)]

    def first_read(self, key_axis: bool) -> str:
        """What a search of this mirror reads first: `mirror` (every row's float32 vectors), `codes` (every row's
        int8 codes, from knobs.CODES_MIN_ROWS rows, when searched without the key axis, whose key
        vectors have no codes) or `bits` (the codes of the rows the sign bits keep, from
        knobs.BITS_MIN_ROWS rows, while `_check_bits` finds that they keep the nearest)."""
        size = len(self.ids)
        codes_from, bits_from = knobs.CODES_MIN_ROWS, knobs.BITS_MIN_ROWS
        if key_axis or not codes_from or size < codes_from:
            return "mirror"
        if not bits_from or size < bits_from:
            return "codes"
        checked = self.bits_checked
        due = self.searched >= BITS_CHECK_QUERIES and (
            checked is None or size >= 2 * checked[0] or self.searched >= checked[1] + BITS_RECHECK_SEARCHES
        )
        if due and not self.checking.locked():
            threading.Thread(target=self._check_bits, name="loom-bits-check", daemon=True).start()
        return "bits" if checked is not None and checked[2] else "codes"

    def _remember(self, vector: np.ndarray) -> None:
        """Keep this query among the recent ones `_check_bits` asks. Under the search lock."""
        if self.recent is None:
            self.recent = np.zeros((BITS_CHECK_QUERIES, len(vector)), dtype=np.float32)
        self.recent[self.searched % BITS_CHECK_QUERIES] = vector
        self.searched += 1

    def _codes_first(self, vector: np.ndarray, candidates: int, bits: bool) -> np.ndarray:
        """The positions of the `candidates` visible rows whose int8 codes score best against the query's: one pass
        over a quarter of the bytes of the float32 scan (simsimd's int8 dot product), which the caller rescores at
        full precision. int8 codes of unit vectors keep the order of all but near-tied rows, and the candidates are
        many times the pool (`bench/scale.py` measures the recall). With `bits`, only the codes of the rows the
        sign bits keep (`_bits_first`)."""
        size = len(self.ids)
        if candidates >= size:
            return np.arange(size)
        rows = self._bits_first(vector, self._bits_keep(size, candidates), size) if bits else slice(0, size)
        query = coded(vector[None, :])[0]  # its scale orders no row differently
        codes = self.codes[rows]
        # In place, in float32: at 1M rows each full-size temporary costs milliseconds of its own.
        approx = cdist(query, codes, metric="dot", threads=0)[0]
        approx *= self.scales[rows]
        approx[~self.visible[rows]] = -np.inf
        chosen = largest(approx, candidates)
        return rows[chosen] if bits else chosen

    @staticmethod
    def _bits_keep(size: int, candidates: int) -> int:
        return min(size, max(candidates, int(size * knobs.BITS_KEEP)))

    def _bits_first(self, vector: np.ndarray, keep: int, size: int) -> np.ndarray:
        """The positions (ascending) of the `keep` visible rows of the first `size` whose sign bits differ least
        from the query's: a pass over 1/32 of the float32 scan's bytes (docs/benchmarks.md, "Scale")."""
        distance = cdist(signs(vector), self.bits[:size], metric="hamming", dtype="bin8", threads=0)[0]
        nearness = np.negative(distance, out=distance)
        nearness[~self.visible[:size]] = -np.inf
        return np.sort(largest(nearness, keep))  # in memory order: the codes are gathered with fewer cache misses

    def _check_bits(self) -> None:
        """Whether the sign bits keep the rows nearest this mirror's own recent queries: of each one's 10 nearest
        rows (exact, float32), the share the bits pass keeps; bits serve from BITS_CHECK_FLOOR. They keep the
        neighbours of a question that something in memory answers, less so of one near no row, whose "nearest" are
        barely above noise (bench/scale.py), so each mirror asks of the queries it is sent. In the background,
        outside the search lock (seconds at 1M rows); searches read every row's codes until it answers, and it asks
        again once the rows have doubled or BITS_RECHECK_SEARCHES searches came since."""
        with self.checking:
            size, searched = len(self.ids), self.searched
            checked = self.bits_checked
            if checked is not None and size < 2 * checked[0] and searched < checked[1] + BITS_RECHECK_SEARCHES:
                return  # checked while this one waited
            queries, visible = self.recent.copy(), self.visible[:size].copy()
            nearest = nearest_rows(queries, self.values[:size], visible, min(10, int(visible.sum())))
            keep = self._bits_keep(size, knobs.CODES_CANDIDATES)
            kept = [np.isin(near, self._bits_first(query, keep, size)).mean() for query, near in zip(queries, nearest)]
            share = float(np.mean(kept))
            self.bits_checked = (size, searched, share >= BITS_CHECK_FLOOR)
            log.info(
                "sign bits keep %.3f of the nearest rows of %d recent queries over %d rows", share, len(kept), size
            )

    def dated_within(self, start, end, pool: int) -> list[tuple[RowId, float, dict]]:
        """The live rows dated in [start, end], closest to its middle first (ties by name, as the SQL leg
        orders them), each with how far it is off the middle in seconds."""
        middle = start + (end - start) / 2
        with self.lock:
            size = len(self.ids)
            dated = self.dated[:size]
            inside = np.flatnonzero(self.visible[:size] & (dated >= ms(start)) & (dated <= ms(end)))
            off = np.abs((dated[inside] - ms(middle)).astype(np.int64)) / 1000
            take = min(len(inside), pool + 32)  # a margin, so rows tied at the cut are all considered
            near = np.argpartition(off, take - 1)[:take] if 0 < take < len(inside) else range(len(inside))
            ordered = sorted(near, key=lambda j: (off[j], name_order(self.ids[inside[j]])))[:pool]
            return [(self.ids[inside[j]], float(off[j]), self.meta[inside[j]]) for j in ordered]

    def nearest(
        self, vectors: np.ndarray, keys: list[str], scopes: list[tuple]
    ) -> list[tuple[str, float, str | None] | None]:
        """For each vector, the most similar live row of another key in the same scope: (its key, the cosine, its
        value when held here).
        Exact below knobs.GATES_EXACT_ROWS rows; from there, among the rows of the cells nearest each vector by
        their int8 codes (retrieval/index/cells.py), the best rescored at full precision: a batch's cost then grows
        with the cells it reads, not with the rows, however many scopes it spans. A compact mirror always reads its
        cells, and rescores with the vectors its two codes give (`_exact`)."""
        cells = self._gate_cells()
        lines: list[np.ndarray] = []  # candidates: a batch row (its line), and a mirror row
        rows: list[np.ndarray] = []
        with self.lock:
            size = len(self.ids)
            live = self.visible[:size]
            codes = np.asarray([self.scope_ids.get(scope, -1) for scope in scopes])  # -1: a scope with no row here
            if cells is None:
                for code in set(codes.tolist()) - {-1}:
                    members = np.flatnonzero(codes == code)
                    in_scope = np.flatnonzero(live & (self.scope_codes[:size] == code))
                    matrix = self.values[:size] if len(in_scope) == size else self.values[in_scope]  # all: no copy
                    top_two(members, in_scope, vectors[members] @ matrix.T, lines, rows)
            else:
                best = cells.two_best(vectors, codes, coded(vectors)[0], live, self.codes, self.scales)
                if (found := best >= 0).any():
                    lines.append(np.nonzero(found)[0])
                    rows.append(best[found])
            if not lines:
                return [None] * len(keys)
            lines, rows = np.concatenate(lines), np.concatenate(rows)
            return self._best(vectors, keys, lines, rows)

    def _best(
        self, vectors: np.ndarray, keys: list[str], lines: np.ndarray, rows: np.ndarray
    ) -> list[tuple[str, float, str | None] | None]:
        """Each batch row's best candidate of another key, rescored at full precision. Under the lock."""
        found: list[tuple[str, float, str | None] | None] = [None] * len(keys)
        exact = np.einsum("md,md->m", self._exact(rows), vectors[lines])
        order = two_best(lines, exact)
        for line, row, similarity in zip(*(part[order].tolist() for part in (lines, rows, exact))):
            if found[line] is None and (key := self.ids[row].memory_key) != keys[line]:
                found[line] = (key, similarity, self.shown[row] and self.shown[row][0])
        return found

    def _exact(self, rows: np.ndarray) -> np.ndarray:
        """These rows' value vectors (a compact mirror's as its two codes give them)."""
        return Decoded(self.codes, self.residuals, self.scales)[rows] if self.compact else self.values[rows]

    def _gate_cells(self) -> Cells | None:
        """The cells of a mirror of knobs.GATES_EXACT_ROWS rows or more (a compact one's at any size: it holds
        no vectors to compare exactly): trained when first asked for (a loaded mirror's, as it loads), and again in
        the background when due; the current cells serve meanwhile."""
        if not self.ids or (len(self.ids) < knobs.GATES_EXACT_ROWS and not self.compact):
            return None
        if self.cells is None:
            self._train_cells()
        elif self.cells.due() and not self.training.locked():
            threading.Thread(target=self._train_cells, name="loom-cells-train", daemon=True).start()
        return self.cells

    def _train_cells(self) -> None:
        """Outside the search lock (rows below the count never move); one training at a time."""
        with self.training:
            if self.cells is not None and not self.cells.due():
                return  # trained while this one waited
            size = len(self.ids)
            trained = Cells.trained(*self._cell_parts(0, size))
            with self.lock:  # the rows a write added meanwhile join their cells
                trained.extend(*self._cell_parts(size, len(self.ids)))
                self.cells = trained

    def _cell_parts(self, start: int, end: int) -> tuple:
        """Rows start..end-1 as the cells take them: vectors (a compact mirror's as its codes give them), codes,
        scales and write scopes. Read from the arrays as they are now: a write may have reallocated them (`_reserve`)
        since an earlier read."""
        codes, scales = self.codes[start:end], self.scales[start:end]
        vectors = Decoded(codes, self.residuals[start:end], scales) if self.compact else self.values[start:end]
        return vectors, codes, scales, self.scope_codes[start:end]
