"""One namespace's live rows of one model, as the index holds them: ids, vector arrays and their codes, rank columns,
what a hit shows, and the words (`Vectors`).

Lock story: `lock` guards every array and list; a write's rows are held hidden (`stage`, under it, while the
write's statements run in the engine) and shown at once (`show`, under it). The reads (retrieval/index/nearest.py,
postings.py) hold it while they scan; the growth (growth.py) copies outside it.
"""

import math
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain

import numpy as np

from retrieval.index.cells import Cells
from retrieval.index.growth import Growth
from retrieval.index.held import SHOWN_META, dates, held_id, identity, meta_of, ms, scope_of
from retrieval.index.nearest import Nearest
from retrieval.index.postings import Lexical
from retrieval.index.scan import coded, residuals, signs
from retrieval.store import change_marker
from retrieval.store.rows import RowId, row_id
from retrieval.store.shared_read import SharedRead


class Vectors(Growth, Lexical, Nearest):
    """One namespace's live rows of one model: ids, value and key matrices, rank columns. Here: what it holds, and
    how rows come and go; its vector reads are `Nearest`'s (nearest.py), its words `Lexical`'s (postings.py), and how
    its arrays grow `Growth`'s (growth.py)."""

    def __init__(self, keyed: bool, compact: bool = False):
        self.lock = threading.Lock()  # a search reads while a write's notice may grow the arrays
        # A compact mirror holds the value vectors as two int8 codes alone, for the write gates of a namespace whose
        # full mirror would not fit LOOM_VECTOR_MIRROR_MAX_BYTES: no float32 vectors, sign bits, words, rank columns
        # or shown values (half the bytes, and a fraction of the Python objects); every search of the namespace
        # reads ClickHouse (`get`).
        self.compact = compact
        # Whether the key vectors are held: only for a namespace some search scored on the key axis (`get`); the
        # rest never read them, and they are as large as the value vectors.
        self.keyed = keyed
        self.keys_fit = True  # False: a load found that they would put the namespace over the byte budget
        self.ids: list[RowId] = []
        self.position: dict[RowId, int] = {}
        self.revisions: list[int] = []  # of each row's vectors: a newer one (its key re-embedded) replaces them
        self.meta: list[dict] = []
        self.shown: list[tuple | None] = []  # (value, valid_at, created_at): what a hit shows besides meta
        self.values = self.keys = None  # (capacity, dim) float32, made on the first add (keys: when keyed)
        # The value vectors as int8 codes, each row scaled by its largest component (`scales`): a large mirror scans
        # these first and rescores the best rows at full precision (`_codes_first`).
        self.codes = np.zeros((0, 0), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        # A compact mirror's second code of each value vector, what its first leaves over (`residuals`): with it the
        # write gates rescore their candidates at full precision, with no float32 vectors held.
        self.residuals = np.zeros((0, 0), dtype=np.int8) if compact else None
        # ...and as their signs, a bit a dimension: a very large mirror reads the codes of the rows whose bits differ
        # least from the query's (`_bits_first`), once `_check_bits` found that they keep the nearest rows of the
        # mirror's own recent queries.
        self.bits = np.zeros((0, 0), dtype=np.uint8)
        self.recent: np.ndarray | None = None  # the last BITS_CHECK_QUERIES queries of a search past the codes' rows
        self.searched = 0  # how many such searches there were
        self.bits_checked: tuple[int, int, bool] | None = None  # (rows, searches) then, whether the bits kept them
        self.checking = threading.Lock()
        self.visible = np.zeros(0, dtype=bool)  # live, not a reflection, not a duplicate
        self.dated = np.zeros(0, dtype="datetime64[ms]")  # each row's dated_at, for a dated question's rows
        # Each row's write scope (agent, user, session, run), coded: the write gates compare within one.
        self.scope_ids: dict[tuple, int] = {}
        self.scope_codes = np.zeros(0, dtype=np.int32)
        # Whether any row of the namespace was ever chunked: the chunk leg skips its statement until one is.
        self.chunked = False
        # Live rows of the namespace known to have no vector here: stubs (written while their org's model calls were
        # off) and rows only another model embedded. A row leaves when its vector comes or it is retired. While
        # there are none, a word no row here holds is in no live row, and the entity check need not ask ClickHouse
        # (retrieval/search/mentions.py).
        self.unvectored: set[RowId] = set()
        # Rows another process wrote that a load or a delta read found before their memory row (a write stores
        # `memories` last): nothing to show, no words counted, so the lexical legs read ClickHouse while any is
        # left. Their memory rows are asked for again (`sync`, at most every SHOWN_RETRY_S), and the time it was
        # last asked.
        self.unshown: set[RowId] = set()
        self.shown_asked = -math.inf
        # The engine time from which the next `sync` reads; None on the embedded engine, which needs none.
        self.since: datetime | None = None
        self.delta: SharedRead = SharedRead()  # one delta read at a time; searches read the arrays meanwhile
        self.asked: change_marker.Stamp | None = None  # the namespace's stamp as of the last delta read
        # How many live rows hold each stemmed word (value or key) and each entity ("\0" + lowercased): the names a
        # question is about are looked up here before ClickHouse is asked (retrieval/search/mentions.py).
        self.words: Counter = Counter()
        # The lexical legs' index of the same rows (retrieval/search/legs/lexical.py, bm25.py): for each stemmed
        # value word, the rows holding it and how often; for each word of a key and each entity, the rows holding it
        # beside those (the entity leg's too: a word a row's value holds is posted there only, half the appends a
        # write makes); each row's value length. A row is appended once, when its words are first held; `worded`
        # says which rows count now (live, words held), `live` which rows are live at all: a mirror answers the
        # lexical legs while the two agree.
        self.value_postings: dict[str, array] = {}
        self.other_postings: dict[str, array] = {}
        self.doc_len = np.zeros(0, dtype=np.int32)
        self.posted = 0  # the postings' bytes
        self.worded = np.zeros(0, dtype=bool)
        self.live = np.zeros(0, dtype=bool)
        # The write gates' partition of the rows, for a large mirror (retrieval/index/cells.py); kept up to date by
        # `add`, retrained by `_gate_cells`.
        self.cells: Cells | None = None
        self.training = threading.Lock()
        self.touched: set[int] | None = None  # while the arrays grow ahead (`_grow_ahead`): rows changed in place

    def add(
        self,
        rows: list[dict],
        chunked: bool = False,
        shown: dict | None = None,
        unvectored: Iterable[RowId] = (),
        words: bool = True,
    ) -> None:
        """Rows of memory_embeddings; `shown` maps (key, agent, session, version) to what a hit shows of each;
        `unvectored`: live rows the same write or read found without a vector. Without `words` (a load), the new rows'
        words are left for `count_words`. A row `shown` lacks is asked for again (`await_shown`)."""
        staged = self.stage(rows, shown or {}, words)
        self.show(staged, chunked, unvectored)
        if not self.compact:  # (a compact mirror shows nothing)
            self.await_shown(staged.ids)

    def stage(self, rows: list[dict], shown: dict, words: bool = True) -> "Staged":
        """Hold rows not shown yet: appended with their codes, cells and postings, but live for no read (as a retired
        row is) until `show`. The Python of a write's rows runs here while its statements run in the engine; a write
        that fails never shows them."""
        with self.lock:
            staged = Staged(ids=[], start=len(self.ids), end=len(self.ids), held=[], worded=[], terms=[])
            fresh = []
            for row in rows:
                at = self.position.get(rid := row_id(row))
                staged.ids.append(rid)
                if at is None:
                    fresh.append((rid, row))
                else:  # the same version again (its key re-embedded): its new vectors replace the old at `show`
                    staged.held.append((at, row, shown.get(identity(row))))
            if not fresh:
                return staged
            start, end = staged.start, staged.end = len(self.ids), len(self.ids) + len(fresh)
            values = np.asarray([row["value_vector"] for _, row in fresh], dtype=np.float32)
            self._reserve(end, values.shape[1])
            if not self.compact:
                self.values[start:end] = values
                self.bits[start:end] = signs(values)
            if self.keyed:
                self.keys[start:end] = np.asarray([row["key_vector"] for _, row in fresh], dtype=np.float32)
            self.codes[start:end], self.scales[start:end] = coded(values)
            if self.compact:
                self.residuals[start:end] = residuals(values, self.codes[start:end], self.scales[start:end])
            staged.visible = [row["memory_type"] != "reflection" and not row["duplicate_of"] for _, row in fresh]
            if not self.compact:
                self.dated[start:end] = dates([row["dated_at"] for _, row in fresh])
            codes = self.scope_ids
            self.scope_codes[start:end] = [codes.setdefault(scope_of(row), len(codes)) for _, row in fresh]
            if self.cells is not None:
                self.cells.extend(values, *(part[start:end] for part in (self.codes, self.scales, self.scope_codes)))
                self._merge_cells()
            for at, (rid, row) in enumerate(fresh, start):
                rid = held_id(rid)
                self.position[rid] = at
                self.ids.append(rid)
                self.revisions.append(row["revision"])
                self.meta.append(None if self.compact else meta_of(row))
                self.shown.append(None if self.compact else shown.get(identity(row)))
                if words and (held := self._words(at)) is not None:
                    self._index(at, *held)  # posted now, counted by no read until `worded` says so
                    staged.worded.append(at)
                    staged.terms += held[0].keys(), held[1]
            self._room_ahead()
            return staged

    def show(self, staged: "Staged", chunked: bool = False, unvectored: Iterable[RowId] = ()) -> None:
        """Make staged rows live for every read at once."""
        with self.lock:  # (a row held here has its vector: a delta may see its stub again after the vector came)
            self.unvectored.update(rid for rid in unvectored if rid not in self.position)
            self.unvectored.difference_update(staged.ids)
            for at, row, shown in staged.held:
                if self.touched is not None:  # (a growth under way copies it again)
                    self.touched.add(at)
                self.revisions[at] = row["revision"]
                value = np.asarray([row["value_vector"]], dtype=np.float32)
                self.codes[at : at + 1], self.scales[at : at + 1] = coded(value)
                if self.compact:
                    self.residuals[at : at + 1] = residuals(value, self.codes[at : at + 1], self.scales[at : at + 1])
                    continue
                self.dated[at] = ms(row["dated_at"])
                self.meta[at] = meta_of(row)
                if shown:
                    self.shown[at] = shown
                    self.unshown.discard(self.ids[at])
                self.values[at], self.bits[at] = value[0], signs(value[0])
                if self.keyed:
                    self.keys[at] = row["key_vector"]
                if self.live[at]:  # a load may have read the vectors before their value was in: counted now
                    self._count(at, +1)
            self.visible[staged.start : staged.end] = staged.visible
            self.live[staged.start : staged.end] = True
            self.worded[staged.worded] = True
            self.words.update(chain.from_iterable(staged.terms))  # (counting an iterable is Counter's C loop)
            self.chunked = self.chunked or chunked

    def await_shown(self, ids: list[RowId]) -> None:
        """Of these rows, those held without their memory row (a load or a delta read found another process's write
        under way: it stores `memories` last) are asked for again (`take_shown`)."""
        with self.lock:
            position, shown = self.position, self.shown
            if fresh := [
                rid
                for rid in ids
                if (at := position.get(rid)) is not None and shown[at] is None and rid not in self.unshown
            ]:
                self.unshown.update(fresh)
                self.shown_asked = time.monotonic()  # (just asked: the first retry comes SHOWN_RETRY_S later)

    def take_shown(self, shown: dict) -> None:
        """What a hit shows of rows `await_shown` named (by identity), their words counted in; a row retired
        meanwhile needs none."""
        with self.lock:
            for rid in list(self.unshown):
                at = self.position[rid]
                if self.live[at] and (got := shown.get(rid[1:])):  # (a RowId is its namespace, then its identity)
                    self.shown[at] = got
                    self._count(at, +1)
                if self.worded[at] or not self.live[at]:
                    self.unshown.discard(rid)

    @property
    def size(self) -> int:
        """Rows held, retired ones included."""
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """What the rows weigh (vectors, codes, bits, the gates' cells) with the postings: what a mirror weighs
        against LOOM_VECTOR_MIRROR_MAX_BYTES. The rows held, not the arrays' capacity: pages past the last row are
        never written, so never resident (a capacity that doubled at 1M rows would have counted 2M)."""
        if not len(self.codes):
            return 0
        row = sum(part[0].nbytes for part in self._vectors().values() if part is not None)
        return len(self.ids) * row + self.posted + (self.cells.nbytes if self.cells else 0)

    @staticmethod
    def row_bytes(dim: int, keyed: bool, compact: bool = False) -> int:
        """About what a row weighs in `nbytes`, before its postings: a load's estimate of a namespace."""
        if compact:
            return dim * 3 + 20  # codes, residuals, the cells' codes and ids
        return dim * (4 + 4 * keyed + 1 + 1) + (dim + 7) // 8 + 20  # values, keys, codes, the cells' codes and ids

    def holds(self, rid: RowId, revision: int) -> bool:
        """Whether this row's vectors of this revision (or a newer one) are here."""
        at = self.position.get(rid)
        return at is not None and self.revisions[at] >= revision

    def retire(self, ids: list[RowId]) -> None:
        with self.lock:
            self.unvectored.difference_update(ids)
            for rid in ids:
                if (at := self.position.get(rid)) is not None:
                    self.visible[at] = self.live[at] = False
                    self._count(at, -1)

    def rows(self, ids: list[RowId]) -> dict[RowId, dict]:
        """The memory rows of these ids that are live here, shaped as the window's hydrate reads them."""
        found = {}
        with self.lock:
            for rid in ids:
                at = self.position.get(rid)
                if at is None or not self.visible[at] or self.shown[at] is None:
                    continue
                value, valid_at, created_at, _ = self.shown[at]
                meta = self.meta[at]
                found[rid] = {
                    **rid._asdict(),
                    "status": "active",
                    "superseded_by": 0,
                    "value": value,
                    "valid_at": valid_at,
                    "created_at": created_at,
                    **{name: meta[name] for name in SHOWN_META},
                }
        return found


@dataclass
class Staged:
    """Rows `Vectors.stage` holds until `Vectors.show`: those new to the mirror at start..end-1."""

    ids: list[RowId]  # all of them
    start: int
    end: int
    held: list[tuple[int, dict, tuple | None]]  # rows the mirror held before: (position, row, what a hit shows)
    worded: list[int]  # the new rows posted, and their words to count
    terms: list[Iterable[str]]
    visible: list[bool] = field(default_factory=list)
