"""How a mirror's arrays grow: by doubling, a large mirror's ahead of need in the background, so a write batch
appends without copying the namespace.

Lock story: `_reserve`, `_merge_cells` and `_install` run under the mirror's lock (`Vectors.lock`); `_grow_ahead`
copies the rows outside it (numpy copies without the GIL) and takes it only to copy the rows changed meanwhile and
swap the arrays in. `touched` (set while a growth is under way) names the rows a write changed in place.
"""

import threading

import numpy as np

# A mirror of BACKGROUND_MIN_ROWS rows or more makes its passes over every row in the background, outside its lock
# (below that, one under the lock is over in milliseconds): it grows its arrays once its rows fill GROW_AHEAD of them
# (more than the 4/5 a load fills: it makes room a quarter over its rows, so a loaded mirror does not double at
# once), and merges its gates' cells (`Cells.merge`).
BACKGROUND_MIN_ROWS = 65_536

GROW_AHEAD = 7 / 8

GROW_AHEAD_LAST_ROWS = 2_000  # at most this many rows' vectors copied under the lock at the end

_ROW_COLUMNS = ("scales", "visible", "live", "worded", "doc_len", "scope_codes", "dated")


class Growth:
    """The arrays of `Vectors` (retrieval/index/vectors.py), and how they grow."""

    def reserve(self, size: int, dim: int) -> None:
        """Room for `size` rows of `dim` dimensions, made now (a load knows how many rows are coming)."""
        with self.lock:
            self._reserve(size, dim)

    def _reserve(self, size: int, dim: int) -> None:
        """Room for `size` rows, made now if there is none: every array copied, under the lock."""
        capacity = len(self.codes)
        if size > capacity:
            self._install(self._grown(self._vectors(), max(size, 2 * capacity, 1024), dim, len(self.ids)))

    def _room_ahead(self) -> None:
        """Once the rows fill GROW_AHEAD of a large mirror's room, grow it in the background (`_grow_ahead`)."""
        capacity, dim = self.codes.shape
        if capacity >= BACKGROUND_MIN_ROWS and len(self.ids) > GROW_AHEAD * capacity and self.touched is None:
            self.touched = set()
            threading.Thread(
                target=self._grow_ahead, args=(2 * capacity, dim), name="loom-mirror-grow", daemon=True
            ).start()

    def _merge_cells(self) -> None:
        """Merge the gates' cells' recent rows into their first run when due: a large mirror's in the background
        (`Cells.merge` takes the lock only to read the rows and to put the new run in). Under the lock."""
        cells = self.cells
        if not cells.merge_due():
            return
        if cells.rows < BACKGROUND_MIN_ROWS:
            cells.merge()  # (the lock is held)
            return
        cells.merging = True

        def merge() -> None:
            try:
                cells.merge(self.lock)
            finally:
                cells.merging = False

        threading.Thread(target=merge, name="loom-cells-merge", daemon=True).start()

    def _grow_ahead(self, capacity: int, dim: int) -> None:
        """Grow the arrays before a write needs it, the rows copied outside the lock (searches and writes go on;
        numpy copies without the GIL) until those a write added meanwhile are few; they, the rows changed in place
        meanwhile and the rows' flags are copied under it. Grown in line, a million rows' arrays held the namespace's
        searches and writes for many seconds, most of it the kernel finding fresh pages, which the copies here fault
        in outside the lock (docs/benchmarks.md, "The index's choices, measured")."""
        try:
            with self.lock:
                vectors, rows = self._vectors(), len(self.ids)
            grown, flags, copied = self._grown(vectors, capacity, dim, 0), self._flags(capacity), 0
            while True:
                for name, part in grown.items():
                    if part is not None:
                        part[copied:rows] = vectors[name][copied:rows]
                for name, part in flags.items():
                    part[copied:rows] = getattr(self, name)[copied:rows]  # (copied again under the lock)
                copied = rows
                with self.lock:
                    if any(getattr(self, name) is not part for name, part in vectors.items()):
                        return  # a write outgrew them meanwhile, and grew them in line
                    rows = len(self.ids)
                    if rows - copied > GROW_AHEAD_LAST_ROWS:
                        continue
                    again = np.r_[np.fromiter(self.touched, dtype=np.int64), np.arange(copied, rows)]
                    for name, part in grown.items():
                        if part is not None:
                            part[again] = vectors[name][again]
                    self._install(grown, flags)
                    return
        finally:
            with self.lock:
                self.touched = None

    def _vectors(self) -> dict[str, np.ndarray | None]:
        """The large arrays, a row's vectors and their codes (`keys` None unless keyed; a compact mirror's codes only)."""
        return {name: getattr(self, name) for name in ("values", "keys", "codes", "bits", "residuals")}

    def _grown(self, vectors: dict, capacity: int, dim: int, rows: int) -> dict[str, np.ndarray | None]:
        """Arrays of `capacity` rows holding the first `rows` of these (rows past the mirror's are never read)."""
        grown = {
            "values": None if self.compact else np.empty((capacity, dim), dtype=np.float32),
            "keys": np.empty((capacity, dim), dtype=np.float32) if self.keyed else None,
            "codes": np.zeros((capacity, dim), dtype=np.int8),
            "bits": None if self.compact else np.zeros((capacity, (dim + 7) // 8), dtype=np.uint8),
            "residuals": np.zeros((capacity, dim), dtype=np.int8) if self.compact else None,
        }
        if rows:  # (the first add finds no arrays, and no dimension yet)
            for name, part in grown.items():
                if part is not None:
                    part[:rows] = vectors[name][:rows]
        return grown

    def _flags(self, capacity: int) -> dict[str, np.ndarray]:
        """Each row's flags and rank columns (small arrays), with room for `capacity` rows."""
        return {name: np.zeros(capacity, dtype=getattr(self, name).dtype) for name in _ROW_COLUMNS}

    def _install(self, grown: dict[str, np.ndarray | None], flags: dict[str, np.ndarray] | None = None) -> None:
        """The grown vector arrays in place, and the rows' flags and rank columns copied into arrays as large. Under
        the lock."""
        for name, part in grown.items():
            setattr(self, name, part)
        size = len(self.ids)
        for name, part in (flags or self._flags(len(grown["codes"]))).items():
            part[:size] = getattr(self, name)[:size]
            setattr(self, name, part)
