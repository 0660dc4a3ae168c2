"""An in-process copy of each namespace's live vectors, for the vector leg of an unfiltered search.

It also holds what a hit shows of each live row (value and dates; the rest is
on the vector row), whether the namespace has any chunk, and the rows' lexical
postings, so a search the mirror answers needs no statement for its window, an
empty chunk leg, or its lexical and BM25 legs (retrieval/search/legs/postings.py).

This process's write path tells the mirror what it stored and what it retired
(`added`, `retired`), after the statements succeed; a batch's rows are held
hidden while its statements run (`staged`) and shown then. With the embedded engine
that is every write (one process owns its data directory). On a ClickHouse
server other processes write too, so a search first reads what reached the
engine since its last read (`sync`: the vector rows by their engine-stamped
`inserted_at`), and an acknowledged write anywhere is in every process's next
search. A namespace's first search starts loading it in the background and
is itself answered by ClickHouse, as is every search until the load is done
(its vectors serve from then; its lexical legs once its words are counted, after);
notices that arrive during the load are kept and applied on top of it, in
order (adding is idempotent, retiring one-way), so no write falls between the
load and the notices. A search whose filters narrow the set, or that replays
`as_of`, reads ClickHouse instead: the mirror is an index of the table, never a
second source of truth. All mirrors together stay within
LOOM_VECTOR_MIRROR_MAX_BYTES: past it, the least recently searched are dropped
(ClickHouse answers them until a search loads them again), and a namespace alone
past it keeps a compact mirror, for its write gates alone (each row's value
vector as two int8 codes, half the bytes: `Vectors.compact`), or none past that
too. A mirror holds the key vectors only once a search of its namespace scored on
the key axis, and where they fit the budget: they are as large as the value
vectors, and a namespace whose keys name no attributes never reads them.

Why: the embedded engine's exact scan costs ~80 ms at 100k rows of 384-d here,
numpy over the same rows ~6 ms; and any statement reading a few rows costs it
5-15 ms (bench/search.py). Values are immutable per version and status only
moves forward, so a live row's copy is never stale once its notice is applied.
"""

import logging
import math
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import chain
from sys import intern

import numpy as np
import simsimd
from django.conf import settings

from retrieval import cores, metrics
from retrieval.language import text
from retrieval.store import change_marker, clickhouse, native, pace, reads
from retrieval.store.cells import Cells
from retrieval.store.rows import META, THESE_VERSIONS, RowId, name_order, row_id, versions
from retrieval.store.shared_read import SharedRead

log = logging.getLogger(__name__)

_lock = threading.Lock()
_mirrors: dict[tuple[str, str, str, str], "Vectors | None"] = {}  # None: too large to mirror
_keyed: set[tuple[str, str, str, str]] = set()  # the namespaces whose mirrors hold key vectors (`get`)
_pending: dict[tuple[str, str, str, str], list[tuple[str, list]]] = {}  # loading: the notices since it began
_counting: set[tuple[str, str, str, str]] = set()  # loaded, serving vectors, still counting its words (`count_words`)
_used: dict[tuple[str, str, str, str], float] = {}  # when each mirror last served a search (eviction order)
_outgrown: set[tuple[str, str, str, str]] = set()  # full mirrors grown past the byte budget: loaded compact again
# Notified as a load reads a range, installs its mirror, fails, or has counted its words (`awaited`, `warm`).
_load_ended = threading.Condition(_lock)
_progress: dict[tuple[str, str, str, str], tuple[float, int, int]] = {}  # loading: (began, rows read, rows to read)


class Vectors:
    """One namespace's live rows of one model: ids, value and key matrices, rank columns.

    Arrays grow by doubling (a large mirror's in the background, before its rows fill them), so a write batch
    appends without copying the namespace.
    """

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
        # A compact mirror's second code of each value vector, what its first leaves over (`_residuals`): with it the
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
        # The write gates' partition of the rows, for a large mirror (retrieval/store/cells.py); kept up to date by
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
                    staged.held.append((at, row, shown.get(_identity(row))))
            if not fresh:
                return staged
            start, end = staged.start, staged.end = len(self.ids), len(self.ids) + len(fresh)
            values = np.asarray([row["value_vector"] for _, row in fresh], dtype=np.float32)
            self._reserve(end, values.shape[1])
            if not self.compact:
                self.values[start:end] = values
                self.bits[start:end] = _signs(values)
            if self.keyed:
                self.keys[start:end] = np.asarray([row["key_vector"] for _, row in fresh], dtype=np.float32)
            self.codes[start:end], self.scales[start:end] = coded(values)
            if self.compact:
                self.residuals[start:end] = _residuals(values, self.codes[start:end], self.scales[start:end])
            staged.visible = [row["memory_type"] != "reflection" and not row["duplicate_of"] for _, row in fresh]
            if not self.compact:
                self.dated[start:end] = _dates([row["dated_at"] for _, row in fresh])
            codes = self.scope_ids
            self.scope_codes[start:end] = [codes.setdefault(scope_of(row), len(codes)) for _, row in fresh]
            if self.cells is not None:
                self.cells.extend(values, *(part[start:end] for part in (self.codes, self.scales, self.scope_codes)))
                self._merge_cells()
            for at, (rid, row) in enumerate(fresh, start):
                rid = _held(rid)
                self.position[rid] = at
                self.ids.append(rid)
                self.revisions.append(row["revision"])
                self.meta.append(None if self.compact else _meta(row))
                self.shown.append(None if self.compact else shown.get(_identity(row)))
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
                    self.residuals[at : at + 1] = _residuals(value, self.codes[at : at + 1], self.scales[at : at + 1])
                    continue
                self.dated[at] = _ms(row["dated_at"])
                self.meta[at] = _meta(row)
                if shown:
                    self.shown[at] = shown
                    self.unshown.discard(self.ids[at])
                self.values[at], self.bits[at] = value[0], _signs(value[0])
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

    def count_words(self, rows: int) -> None:
        """Count in the words of the first `rows` rows (those a load added without them), WORDS_STEP rows at a time
        under the lock: a search or a write waits for a step, not for all. Until the last step the lexical legs and
        the entity check read ClickHouse (`_worded`), as for any row whose words are not held."""
        for start in range(0, rows, WORDS_STEP):
            with self.lock:
                for at in np.flatnonzero(self.live[start : min(start + WORDS_STEP, rows)]).tolist():
                    self._count(start + at, +1)
            # A pause lets a waiting search or write take the lock: Python's lock is not fair, and taken again at once
            # it kept them waiting for the whole count (3.9 s after a 100k-row load).
            time.sleep(WORDS_PAUSE_S)

    def _words(self, at: int) -> tuple[Counter, set[str]] | None:
        """A row's value terms and its other words (its key's beside its value's, its entities and the names its
        triples declare); None when its value is not held (a row without one is read from ClickHouse when asked
        for, so a name it alone holds is found there)."""
        shown = self.shown[at]
        if shown is None:
            return None
        value = text.value_terms(shown[0])
        others = text.key_terms(self.ids[at].memory_key).keys() - value.keys()
        if (entities := self.meta[at]["entities"]) or shown[3]:
            others |= {"\0" + entity.lower() for entity in entities} | {"\0" + name for name in shown[3]}
        return value, others

    def _count(self, at: int, sign: int) -> None:
        """Add (or take back) a row's words and entities, when its value is held."""
        if self.worded[at] == (sign > 0) or (held := self._words(at)) is None:
            return
        value, others = held
        if sign > 0:  # indexed once: a row is counted in while live, out once retired, and never live again
            self._index(at, value, others)
            # (counting an iterable is Counter's C loop; a mapping, a Python one)
            self.words.update(value.keys())
            self.words.update(others)
        else:
            self.words.subtract(value.keys())
            self.words.subtract(others)
        self.worded[at] = sign > 0

    def _index(self, at: int, value: Counter, others: set[str]) -> None:
        """Append a row to the lexical postings, as the write path's term_input rows make memory_terms."""
        self.doc_len[at] = sum(value.values())
        postings = self.value_postings  # (no setdefault: it would build its default arrays for every term)
        shifted = at << TF_BITS
        for term, tf in value.items():
            if (posted := postings.get(term)) is None:
                posted = postings[term] = array("q")
            posted.append(shifted | (tf if tf < MAX_TF else MAX_TF))
        for term in others:
            if (posted := self.other_postings.get(term)) is None:
                posted = self.other_postings[term] = array("i")
            posted.append(at)
        self.posted += 8 * len(value) + 4 * len(others)

    def _holding(self, term: str) -> np.ndarray:
        """The rows whose value, key or entities hold a word, in no order. Under the lock."""
        value, other = self.value_postings.get(term, ()), self.other_postings.get(term, ())
        return np.concatenate([np.array(value, dtype=np.int64) >> TF_BITS, np.array(other, dtype=np.int64)])

    def mentions(self, words: list[str]) -> tuple[list[bool], bool]:
        """Whether some live row holds each of these words (stemmed terms, or "\0" + a lowercased entity), and
        whether the answer is the namespace's: every live row's words held here (else a word missing here may be in a
        row whose value or vector this mirror lacks)."""
        with self.lock:
            return [self.words[word] > 0 for word in words], not self.unvectored and self._worded() is not None

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
        searches and writes for 17-26 s here, most of it the kernel finding fresh pages, which the copies here fault
        in outside the lock."""
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

    def postings(self, terms: list[str], field: str) -> "Postings | None":
        """What the lexical legs read of memory_terms for these terms: each term's live rows holding it (in the value;
        with `field="any"`, in value or key), how often (value only) and each such row's value length; with the live
        rows' count and total value length (corpus_stats). None while some live row's words are not held here: its
        postings are read from ClickHouse then."""
        with self.lock:
            if (worded := self._worded()) is None:
                return None
            found = {}
            for term in terms:
                if field == "value":
                    if (posted := self.value_postings.get(term)) is None:
                        continue
                    packed = np.array(posted, dtype=np.int64)
                    rows, tfs = packed >> TF_BITS, packed & MAX_TF
                else:
                    rows = self._holding(term)
                    tfs = np.ones(len(rows), dtype=rows.dtype)
                held = worded[rows]
                if held.any():
                    found[term] = (rows[held], tfs[held], self.doc_len[rows[held]])
            length = int(self.doc_len[: len(worded)].sum(where=worded))
            return Postings(self.ids, int(np.count_nonzero(worded)), length, found)

    def holding_all(self, terms: list[str]) -> list[tuple[RowId, dict]] | None:
        """The visible rows whose value or key holds every one of these terms (at least one), with their rank columns.
        None while some live row's words are not held here."""
        with self.lock:
            if self._worded() is None:
                return None
            rows = None
            for term in terms:  # a row holds a term once, in its value's postings or the others
                posted = self._holding(term)
                rows = posted if rows is None else np.intersect1d(rows, posted, assume_unique=True)
            rows = np.sort(rows[self.visible[rows]])  # in the order they were held
            return [(self.ids[at], self.meta[at]) for at in rows.tolist()]

    def values_holding(self, terms: list[str], most: int) -> dict[str, list[tuple[RowId, str]]] | None:
        """For each stemmed term, the live rows whose value holds it, with their values: at most `most` of them,
        evenly spaced over its rows. None while some live row's words are not held here."""
        with self.lock:
            if (worded := self._worded()) is None:
                return None
            found = {}
            for term in terms:
                posted = self.value_postings.get(term)
                rows = np.array(posted if posted else [], dtype=np.int64) >> TF_BITS
                rows = rows[worded[rows]]
                step = max(1, -(-len(rows) // most))  # ceil: 1 while the rows fit
                found[term] = [(self.ids[at], self.shown[at][0]) for at in rows[::step].tolist()]
            return found

    def _worded(self) -> np.ndarray | None:
        """Which rows' words are held (every live row's, or None: ClickHouse answers the words then). Under the
        lock."""
        size = len(self.ids)
        worded = self.worded[:size]
        return worded if np.array_equal(worded, self.live[:size]) else None

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
            rows = self._codes_first(vector, max(take, settings.LOOM_MEMORY_SEARCH_CODES_CANDIDATES), read == "bits")
            value, key = self.values[rows] @ vector, np.zeros(len(rows), dtype=np.float32)
        else:  # simsimd on one thread: at 45k rows 2.9 ms, where BLAS took 3.7 on two threads and 6.9 on one
            rows = np.arange(size)
            value = _cdist(vector[None, :], self.values[:size], metric="dot")[0]
            key = _cdist(vector[None, :], self.keys[:size], metric="dot")[0] if key_axis else np.zeros_like(value)
        best = np.where(visible[rows], np.maximum(value, key), -np.inf)
        chosen = _largest(best, take)
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
        int8 codes, from LOOM_MEMORY_SEARCH_CODES_MIN_ROWS rows, when searched without the key axis, whose key
        vectors have no codes) or `bits` (the codes of the rows the sign bits keep, from
        LOOM_MEMORY_SEARCH_BITS_MIN_ROWS rows, while `_check_bits` finds that they keep the nearest)."""
        size = len(self.ids)
        codes_from, bits_from = settings.LOOM_MEMORY_SEARCH_CODES_MIN_ROWS, settings.LOOM_MEMORY_SEARCH_BITS_MIN_ROWS
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
        # In place, in float32: at 1M rows the scan is ~32 ms and each full-size temporary a few more.
        approx = _cdist(query, codes, metric="dot", threads=0)[0]
        approx *= self.scales[rows]
        approx[~self.visible[rows]] = -np.inf
        chosen = _largest(approx, candidates)
        return rows[chosen] if bits else chosen

    @staticmethod
    def _bits_keep(size: int, candidates: int) -> int:
        return min(size, max(candidates, int(size * settings.LOOM_MEMORY_SEARCH_BITS_KEEP)))

    def _bits_first(self, vector: np.ndarray, keep: int, size: int) -> np.ndarray:
        """The positions (ascending) of the `keep` visible rows of the first `size` whose sign bits differ least
        from the query's: a pass over 1/32 of the float32 scan's bytes (~9 ms at 1M rows of 384-d here, where the
        int8 pass over every row is ~32)."""
        distance = _cdist(_signs(vector), self.bits[:size], metric="hamming", dtype="bin8", threads=0)[0]
        nearness = np.negative(distance, out=distance)
        nearness[~self.visible[:size]] = -np.inf
        return np.sort(_largest(nearness, keep))  # in memory order: the codes are gathered with fewer cache misses

    def _check_bits(self) -> None:
        """Whether the sign bits keep the rows nearest this mirror's own recent queries: of each one's 10 nearest
        rows (exact, float32), the share the bits pass keeps; bits serve from BITS_CHECK_FLOOR. They keep the
        neighbours of a question that something in memory answers (real embeddings: 1.000 at 45k rows keeping 2%),
        less so of one near no row, whose "nearest" are barely above noise (0.72 for bench/scale.py's noisiest
        synthetic queries), so each mirror asks of the queries it is sent. In the background, outside the search
        lock (~2 s at 1M rows); searches read every row's codes until it answers, and it asks again once the rows
        have doubled or BITS_RECHECK_SEARCHES searches came since."""
        with self.checking:
            size, searched = len(self.ids), self.searched
            checked = self.bits_checked
            if checked is not None and size < 2 * checked[0] and searched < checked[1] + BITS_RECHECK_SEARCHES:
                return  # checked while this one waited
            queries, visible = self.recent.copy(), self.visible[:size].copy()
            nearest = _nearest_rows(queries, self.values[:size], visible, min(10, int(visible.sum())))
            keep = self._bits_keep(size, settings.LOOM_MEMORY_SEARCH_CODES_CANDIDATES)
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
            inside = np.flatnonzero(self.visible[:size] & (dated >= _ms(start)) & (dated <= _ms(end)))
            off = np.abs((dated[inside] - _ms(middle)).astype(np.int64)) / 1000
            take = min(len(inside), pool + 32)  # a margin, so rows tied at the cut are all considered
            near = np.argpartition(off, take - 1)[:take] if 0 < take < len(inside) else range(len(inside))
            ordered = sorted(near, key=lambda j: (off[j], name_order(self.ids[inside[j]])))[:pool]
            return [(self.ids[inside[j]], float(off[j]), self.meta[inside[j]]) for j in ordered]

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

    def nearest(
        self, vectors: np.ndarray, keys: list[str], scopes: list[tuple]
    ) -> list[tuple[str, float, str | None] | None]:
        """For each vector, the most similar live row of another key in the same scope: (its key, the cosine, its
        value when held here).
        Exact below LOOM_WRITE_GATES_EXACT_ROWS rows; from there, among the rows of the cells nearest each vector by
        their int8 codes (retrieval/store/cells.py), the best rescored at full precision: a batch's cost then grows
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
                    _candidates(members, in_scope, vectors[members] @ matrix.T, lines, rows)
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
        order = _two_best(lines, exact)
        for line, row, similarity in zip(*(part[order].tolist() for part in (lines, rows, exact))):
            if found[line] is None and (key := self.ids[row].memory_key) != keys[line]:
                found[line] = (key, similarity, self.shown[row] and self.shown[row][0])
        return found

    def _exact(self, rows: np.ndarray) -> np.ndarray:
        """These rows' value vectors (a compact mirror's as its two codes give them)."""
        return Decoded(self.codes, self.residuals, self.scales)[rows] if self.compact else self.values[rows]

    def _gate_cells(self) -> Cells | None:
        """The cells of a mirror of LOOM_WRITE_GATES_EXACT_ROWS rows or more (a compact one's at any size: it holds
        no vectors to compare exactly): trained when first asked for (a loaded mirror's, as it loads), and again in
        the background when due; the current cells serve meanwhile."""
        if not self.ids or (len(self.ids) < settings.LOOM_WRITE_GATES_EXACT_ROWS and not self.compact):
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


class Decoded:
    """A compact mirror's value vectors as its two codes give them (`_residuals`: within ~1e-5 of each component), a
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


@dataclass
class Postings:
    """`Vectors.postings`: positions index `ids` (append-only, so they may be read after the lock is released)."""

    ids: list[RowId]
    rows: int  # live rows
    length: int  # their values' total length in terms
    terms: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # term: (positions, tf, value length)


# Rows a loaded mirror counts the words of under one hold of its lock (`count_words`): ~40 ms here.
WORDS_STEP = 2_000
WORDS_PAUSE_S = 0.001  # between steps: 0.5 s over a million rows' count, ~40 s
# A mirror of BACKGROUND_MIN_ROWS rows or more makes its passes over every row in the background, outside its lock
# (below that, one under the lock is over in milliseconds): it grows its arrays once its rows fill GROW_AHEAD of them
# (more than the 4/5 a load fills: it makes room a quarter over its rows, so a loaded mirror does not double at
# once), and merges its gates' cells (`Cells.merge`).
BACKGROUND_MIN_ROWS = 65_536
GROW_AHEAD = 7 / 8
GROW_AHEAD_LAST_ROWS = 2_000  # at most this many rows' vectors copied under the lock at the end
_ROW_COLUMNS = ("scales", "visible", "live", "worded", "doc_len", "scope_codes", "dated")

# A value posting is one number: the row's position, shifted, and the term's frequency in it, capped as memory_terms
# caps it (UInt16): one append a term where two arrays took two, and a write appends ~40 a row.
TF_BITS = 16
MAX_TF = (1 << TF_BITS) - 1

# A scan of this many query-row pairs (~1 ms of 384-d float32 on one thread here) leaves the CPU the process's Python
# threads keep for its length (retrieval/cores.py); a shorter one costs less than the system calls and the move.
SCAN_ANYWHERE_MIN_PAIRS = 16_384

BITS_CHECK_QUERIES = 64
BITS_CHECK_FLOOR = 0.99
BITS_RECHECK_SEARCHES = 4096  # the queries a mirror is sent may change


def _nearest_rows(queries: np.ndarray, values: np.ndarray, visible: np.ndarray, count: int) -> np.ndarray:
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


def _largest(scores: np.ndarray, count: int) -> np.ndarray:
    """The positions of the `count` largest scores, in no order, never one of -inf (a row not eligible): all the
    others when they are fewer. Those at or above a cut a sample of the scores suggests (a pass that only compares),
    partitioned; every eligible one when the cut kept too few. At 1M scores ~0.5 ms where partitioning them all costs
    ~4. The -inf are left out before any partition: numpy partitions many equal numbers slowly (100k scores, 95% of
    them -inf, as in a namespace whose rows are mostly duplicates or retired: 13.4 ms against 0.8)."""
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


def _candidates(lines: np.ndarray, rows: np.ndarray, sims: np.ndarray, out_lines: list, out_rows: list) -> None:
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


def _two_best(lines: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The places of each line's two best scores (finite), best first, lines ascending: a key has one live row in a
    scope, so a line's best row of another key is one of its two best. One sort of one number a pair, the line and
    then the score (a sort on the two as keys took twice as long)."""
    span = 2 * float(np.abs(scores).max(initial=0)) + 1  # so no line's numbers reach the next line's
    order = np.argsort(lines * span - scores.astype(np.float64))
    first = np.r_[True, lines[order][1:] != lines[order][:-1]]
    return order[first | np.r_[False, first[:-1]]]


def _cdist(queries: np.ndarray, rows: np.ndarray, **kwargs) -> np.ndarray:
    """simsimd's pairwise distances (or dot products), as a float32 (queries x rows) array. Never with `out=`:
    simsimd 6.5 then returns None without taking a reference to it, so every call took one of None's, and a
    long-running process died ("deallocating None") after some hundred thousand searches. A long scan runs on any
    CPU, beside the Python threads' (retrieval/cores.py)."""
    with cores.anywhere(len(queries) * len(rows) >= SCAN_ANYWHERE_MIN_PAIRS):
        return np.asarray(simsimd.cdist(queries, rows, out_dtype="float32", **kwargs))


def _signs(vectors: np.ndarray) -> np.ndarray:
    """Each row's signs, a bit a dimension, packed."""
    return np.packbits(vectors > 0, axis=-1)


# A residual code's steps across one step of the first code: each component within half a step of the first code's
# 1/RESIDUAL_STEPS, ~1e-5 for 384-d embeddings.
RESIDUAL_STEPS = 254


def _residuals(vectors: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
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


# A hit's columns that the vector row already carries.
SHOWN_META = ("memory_type", "tags", "entities", "source_class")


def _meta(row: dict) -> dict:
    """A row's rank columns as the mirror keeps them: lists (tags, entities) as tuples. The garbage collector stops
    tracking a dict of immutable values; with lists, every row left three objects for each full collection to walk,
    every thread held meanwhile (0.23 s at 200k rows, 0.12 s now). Strings interned, as in `_held`."""
    return {name: _interned(row[name]) for name in META}


def _interned(value):
    if isinstance(value, str):
        return intern(value)
    if isinstance(value, list):
        return tuple(intern(item) if isinstance(item, str) else item for item in value)
    return value


def _held(rid: RowId) -> RowId:
    """A row's id as the mirror keeps it: its namespace, agent and session interned. A decoded or parsed row
    brings its own copy of each, which the mirror would otherwise keep for every row (with the rank columns' strings,
    ~450 bytes a row)."""
    return RowId(intern(rid.namespace), rid.memory_key, intern(rid.agent), intern(rid.session_id), rid.version)


def _ms(moment) -> np.datetime64:
    """A timezone-aware datetime as numpy's UTC milliseconds (ClickHouse keeps dated_at to the millisecond)."""
    return np.datetime64(moment.replace(tzinfo=None) - moment.utcoffset(), "ms")


def _dates(moments: list) -> list[np.datetime64]:
    """`_ms` of each, every distinct moment converted once: a write's rows share theirs (3.6 ms a batch of 500 one at
    a time)."""
    converted = {moment: _ms(moment) for moment in set(moments)}
    return [converted[moment] for moment in moments]


def _identity(row: dict) -> tuple:
    return row["memory_key"], row["agent"], row["session_id"], row["version"]


def shown_of(memory_rows: list[dict], read: bool = False) -> dict[tuple, tuple]:
    """What a hit shows of each memory row (value, valid_at, created_at), dates as ClickHouse keeps them (a write
    notice carries microseconds; rows `read` from ClickHouse have them so), and the names its triples declare (entity
    mentions too, as the write path stores them), by identity. A vector row without one is hydrated from ClickHouse."""
    stored = (lambda moment: moment) if read else native.as_stored
    return {
        _identity(m): (
            m["value"],
            stored(m["valid_at"]),
            stored(m["created_at"]),
            tuple({part.lower() for subject, _, obj in m["triples"] for part in (subject, obj)}),
        )
        for m in memory_rows
    }


# The write gates compare a row with rows of its write scope only: a duplicate's canonical must be visible wherever
# the duplicate is (the same writer, user, session and run), and be the same kind of memory.
SCOPE = ("agent", "user_id", "session_id", "run_id", "memory_type")


def scope_of(row: dict) -> tuple:
    return tuple(row[name] for name in SCOPE)


def enabled() -> bool:
    return settings.LOOM_VECTOR_MIRROR


# An insert is visible within this long of the `inserted_at` the engine stamped on it (the stamp is taken as the
# engine writes the block, just before it commits): each delta read reaches back this far, so an insert that became
# visible late is still read (adding is idempotent, retiring one-way). Longer costs every search after a burst of
# writes a re-read of that burst.
SYNC_LAG = timedelta(seconds=2)
# How often a mirror asks again for the memory rows of rows that came without them (`Vectors.await_shown`): a
# write's come within moments; a failed write's never do (loom_repair retires its rows).
SHOWN_RETRY_S = 1.0


def sync(org: str, namespaces: list[str], model: str, stamps: dict | None = None) -> None:
    """Bring these namespaces' loaded mirrors up to what the engine holds (on a ClickHouse server, where other
    processes write; the embedded engine's writes all pass through this process). Once per op, before it reads
    the mirrors, unless the namespace's stamp (`stamps`, as `change_marker.read` gave them; read here when not given)
    says no write came since the last read (retrieval/store/change_marker.py). A mirror the engine refuses to bring
    up to date is dropped: ClickHouse answers until it loads again. An engine that does not answer fails the op
    (ClickHouseUnavailable), and the mirror stays, to be read on from where it was once the engine answers."""
    if not enabled() or clickhouse.backend() == "embedded":
        return
    target, began = clickhouse.target(), time.monotonic()
    loaded = {n: mirror for n in namespaces if (mirror := _mirrors.get((target, org, n, model))) is not None}
    if stamps is None and loaded:
        stamps = change_marker.read(org, list(loaded))
    for namespace, mirror in loaded.items():
        key, stamp = (target, org, namespace, model), stamps.get(namespace)
        try:
            if change_marker.unchanged(mirror.asked, stamp, "vectors"):
                _ask_shown(mirror, org, namespace)
                continue

            # The searches queued behind one delta read take its outcome instead of each reading again (with writes
            # coming, every search of every thread found the namespace changed, and the reads queued on the engine).
            def read_delta(mirror=mirror, namespace=namespace, stamp=stamp) -> None:
                _read_delta(mirror, org, namespace, model)
                mirror.asked = stamp

            mirror.delta.since(began, read_delta)
        except clickhouse.ClickHouseError as exc:
            log.warning("vector mirror of %s/%s dropped: its delta read failed: %s", org, namespace, exc)
            with _lock:
                _mirrors.pop(key, None)
            continue
        with _lock:
            if _mirrors.get(key) is mirror:
                _keep(key, mirror)


def _read_delta(mirror: Vectors, org: str, namespace: str, model: str) -> None:
    """The vector rows that reached the engine since the mirror's last read: new versions added (with what a hit
    shows of them), retirements applied. First which rows came (identity, revision, status; no vectors), then the
    vectors of those the mirror does not hold: a row stays in the read-back window (SYNC_LAG) for a while, and this
    process's own writes reach the mirror directly, so most of what a delta sees is held already (re-reading a
    500-row batch's vectors cost every search ~60 ms here)."""
    came = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, revision, status, embedding_dim,
               now64(6, 'UTC') AS read_at
        FROM memory_embeddings
        WHERE {_WHERE} AND inserted_at > {{since:DateTime64(6, 'UTC')}}
        ORDER BY inserted_at
        """,
        {"org": org, "namespace": namespace, "model": model, "since": mirror.since},
    )
    if not came:
        return
    live = [row for row in came if row["status"] == "active" and row["embedding_dim"] > 0]
    if stubs := [row_id(row) for row in came if row["status"] == "active" and not row["embedding_dim"]]:
        mirror.add([], unvectored=stubs)  # another process stored them
    wanted = sorted({_identity(row) for row in live if not mirror.holds(row_id(row), row["revision"])})
    if wanted:
        columns = _columns(mirror.keyed, mirror.compact)
        rows = clickhouse.query_decoded(
            f"""
            SELECT {", ".join(columns)} FROM memory_embeddings
            WHERE {_WHERE} AND status = 'active' AND embedding_dim > 0 AND {THESE_VERSIONS}
            ORDER BY memory_key, agent, session_id, version, revision DESC
            LIMIT 1 BY memory_key, agent, session_id, version
            """,
            {"org": org, "namespace": namespace, "model": model, **versions(wanted)},
        )
        added = [dict(zip(columns, row)) for row in rows]
        fresh = [_identity(row) for row in added if row_id(row) not in mirror.position]
        shown = shown_of(_live_memory_columns(org, namespace, fresh), read=True) if fresh and not mirror.compact else {}
        # Chunks come only with a new version: whether the namespace has any is known once its new rows are asked.
        chunked = bool(fresh) and not mirror.chunked and _any_chunk(org, namespace, model, fresh)
        mirror.add(added, chunked, shown)
    _ask_shown(mirror, org, namespace)
    mirror.retire([row_id(row) for row in came if row["status"] != "active"])
    mirror.since = max(mirror.since, came[-1]["read_at"] - SYNC_LAG)


def _ask_shown(mirror: Vectors, org: str, namespace: str) -> None:
    """The memory rows of the rows the mirror awaits them for (`Vectors.await_shown`), at most every SHOWN_RETRY_S."""
    if not mirror.unshown or time.monotonic() - mirror.shown_asked < SHOWN_RETRY_S:
        return
    mirror.shown_asked = time.monotonic()
    wanted = [rid[1:] for rid in list(mirror.unshown)]
    mirror.take_shown(shown_of(_live_memory_columns(org, namespace, wanted), read=True))


def get(org: str, namespace: str, model: str, keys: bool = False, compact: bool = False) -> Vectors | None:
    """The namespace's mirror when it is loaded; else None, and (the first time) its load begins. With `keys` (a
    search scored on the key axis too), a mirror that holds no key vectors begins loading again with them (unless
    they would not fit the byte budget), and is returned meanwhile for what reads none (the write gates, the
    lexical and temporal legs): check `keyed` before scoring keys. The namespace's mirror holds them from then on.
    A compact mirror only with `compact` (the write gates')."""
    key = (clickhouse.target(), org, namespace, model)
    with _lock:
        if keys:
            _keyed.add(key)
        if key not in _mirrors:
            _begin_load(key)
            return None
        mirror = _mirrors[key]
        if mirror is not None and keys and not mirror.keyed and mirror.keys_fit:
            _begin_load(key)
        _used[key] = time.monotonic()
        return mirror if mirror is None or compact or not mirror.compact else None


def awaited(org: str, namespace: str, model: str, timeout: float) -> Vectors | None:
    """The namespace's mirror for the write gates (a compact one too), as `get` gives it, but waiting up to `timeout`
    seconds for a load under way (or begun by this call) to install it: the first write after a start finds its
    namespace loading, and a load of 100k rows takes seconds. None when it is not in by then, or too large; at once
    when the load's pace so far says it will not be in by then (every write during a million rows' minute-long load
    waited the whole timeout before, and was unjudged after all)."""
    key = (clickhouse.target(), org, namespace, model)
    if get(org, namespace, model, compact=True) is None:
        deadline = time.monotonic() + timeout
        with _lock:
            _load_ended.wait_for(lambda: key in _mirrors or key not in _pending or _ends_after(key, deadline), timeout)
    return get(org, namespace, model, compact=True)


def _ends_after(key: tuple[str, str, str, str], deadline: float) -> bool:
    """Whether the namespace's load, at its pace so far, reads its last row after `deadline`. Under _lock."""
    if (progress := _progress.get(key)) is None:
        return False
    began, read, total = progress
    now = time.monotonic()
    return now + pace.seconds_left(now - began, read, total) > deadline


def _begin_load(key: tuple[str, str, str, str]) -> None:
    """Under _lock: load the namespace in the background, unless a load is under way."""
    if key not in _pending:
        _pending[key] = []
        threading.Thread(target=_load_in_background, args=(key,), name="loom-mirror-load", daemon=True).start()


def warm(model: str, keyed: Callable[[str, str, str], bool]) -> list[tuple[str, str]]:
    """A serving process's start: load, one at a time and smallest first, the mirrors of the namespaces written most
    recently (up to LOOM_VECTOR_MIRROR_WARM of them, as many as fit LOOM_VECTOR_MIRROR_MAX_BYTES together). A restart
    left every namespace to load on its first search or large write, which scanned ClickHouse or waited for it
    (`awaited`) meanwhile; a namespace idle at the start is in before it is asked. `keyed(org, namespace, model)`:
    whether its searches score the key axis (its first search would load it again with key vectors). The (org,
    namespace) pairs held at the end, in the order loaded."""
    held: list[tuple[str, str]] = []
    if not enabled() or not settings.LOOM_VECTOR_MIRROR_WARM:
        return held
    try:
        recent = clickhouse.query(
            """
            SELECT org, namespace, count() AS rows, max(embedding_dim) AS dim FROM memory_embeddings
            WHERE embedding_model = {model:String} AND status = 'active' AND embedding_dim > 0
            GROUP BY org, namespace
            ORDER BY max(inserted_at) DESC, org, namespace
            LIMIT {most:UInt32}
            """,
            {"model": model, "most": settings.LOOM_VECTOR_MIRROR_WARM},
        )
        # The most recently written that fit (the rest load when asked for, as before), each weighed by every version
        # it stores: at least what its load keeps.
        room, chosen = settings.LOOM_VECTOR_MIRROR_MAX_BYTES, []
        for row in recent:
            keys = keyed(row["org"], row["namespace"], model)
            if (weight := row["rows"] * Vectors.row_bytes(row["dim"], keys)) <= room:
                room -= weight
                chosen.append((row["rows"], row["org"], row["namespace"], keys))
        # Smallest first, one at a time (words counted too): the most namespaces in soonest, while the process serves.
        # A namespace asked for meanwhile begins its own load (`get`), as on a cold start.
        for _, org, namespace, keys in sorted(chosen):
            get(org, namespace, model, keys)  # begins its load, as its first search would
            key = (clickhouse.target(), org, namespace, model)
            with _lock:
                _load_ended.wait_for(lambda key=key: key not in _pending and key not in _counting)
                if _mirrors.get(key) is not None:
                    held.append((org, namespace))
    except (clickhouse.ClickHouseError, clickhouse.ClickHouseUnavailable) as exc:  # (each loads when asked for)
        log.warning("vector mirrors warmed for %d namespaces, then stopped: %s", len(held), exc)
    return held


def peek(org: str, namespace: str, model: str, compact: bool = False) -> Vectors | None:
    """The namespace's mirror when it is loaded; no load begins (a search's side reads leave that to its vector leg,
    which knows whether the key vectors are wanted). A compact mirror only with `compact` (a write's notices)."""
    with _lock:
        mirror = _mirrors.get((clickhouse.target(), org, namespace, model))
    return mirror if mirror is None or compact or not mirror.compact else None


def mentioned(org: str, namespaces: list[str], model: str, words: list[str]) -> tuple[list[bool], bool] | None:
    """Whether some live row of these namespaces holds each word (stemmed terms, or "\0" + a lowercased entity), by
    their loaded mirrors, and whether that is the namespaces' whole answer (each mirror holds every live row's
    words); None while the mirror is off or a namespace's is not loaded."""
    if not enabled():
        return None
    mirrors = [peek(org, namespace, model) for namespace in namespaces]
    if any(mirror is None for mirror in mirrors):
        return None
    answers = [mirror.mentions(words) for mirror in mirrors]
    return [any(flags) for flags in zip(*(flags for flags, _ in answers))], all(whole for _, whole in answers)


def _load_in_background(key: tuple[str, str, str, str]) -> None:
    target, org, namespace, model = key
    try:
        clickhouse.use_target_in_thread(target)
        mirror = _load(org, namespace, model, key in _keyed, key in _outgrown)
        while mirror is not None and key in _keyed and not mirror.keyed and mirror.keys_fit:  # asked for meanwhile
            mirror = _load(org, namespace, model, True)
        if mirror is not None:
            mirror._gate_cells()  # a large namespace's first write batch then finds them trained
        loaded_rows = 0 if mirror is None else len(mirror.ids)  # held without their words (the notices bring theirs)
    except Exception as exc:  # the scan keeps answering; the next search tries again
        log.warning("vector mirror load of %s/%s failed: %s", org, namespace, exc)
        with _lock:
            _pending.pop(key, None)
            _progress.pop(key, None)
            _load_ended.notify_all()
        return
    finally:
        clickhouse.release_thread()
    with _lock:
        _load_ended.notify_all()  # (its waiters read on once this block, which installs the mirror, lets the lock go)
        _progress.pop(key, None)
        for kind, items in _pending.pop(key):
            if mirror is None:
                continue
            if kind == "add":
                mirror.add(*items)
            else:
                mirror.retire(items)
        _used[key] = time.monotonic()
        if not _keep(key, mirror) or mirror.compact:  # (a compact mirror holds no words)
            return
        _counting.add(key)
    # Its vectors serve searches and the write gates from now; its words (the lexical legs' postings, the entity
    # check's counts: ~40% of a load) are counted meanwhile.
    try:
        mirror.count_words(loaded_rows)
    finally:
        with _lock:
            _counting.discard(key)
            _load_ended.notify_all()


def _keep(key: tuple, mirror: Vectors | None) -> bool:
    """Hold this mirror of the namespace (None: too large to mirror), within the byte budget (`_within_budget`);
    whether it is held. A full mirror grown alone past the budget is loaded again compact (`_load`) and serves
    meanwhile, past the budget for as long as that load takes (it is in memory already; dropped, its namespace's
    writes went unjudged and its searches scanned meanwhile). A compact one grown past it is marked too large:
    ClickHouse serves the namespace from then on, and its writes are judged while a batch's pairs stay within
    LOOM_WRITE_GATES_MAX_PAIRS. Under _lock."""
    if mirror is not None and mirror.nbytes > settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
        if not mirror.compact:
            if key not in _outgrown:
                log.info("vector mirror of %s/%s past LOOM_VECTOR_MIRROR_MAX_BYTES: loading it compact", *key[1:3])
            _outgrown.add(key)
            _begin_load(key)
            _mirrors[key] = mirror
            return True
        mirror = None
    _mirrors[key] = mirror
    _within_budget(key)
    return mirror is not None


def _within_budget(keep: tuple) -> None:
    """Drop the least recently searched mirrors (never `keep`, the one just loaded or grown) until all fit the
    budget. A dropped mirror is forgotten, not marked: its namespace's next search loads it again. Under _lock."""
    held = {key: mirror.nbytes for key, mirror in _mirrors.items() if mirror is not None}
    total = sum(held.values())
    for key in sorted(held, key=lambda k: _used.get(k, 0.0)):
        if total <= settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
            return
        if key != keep:
            del _mirrors[key]
            _used.pop(key, None)
            total -= held[key]
            log.info("vector mirror of %s/%s dropped to stay within LOOM_VECTOR_MIRROR_MAX_BYTES", key[1], key[2])


def held_bytes() -> int:
    """What the loaded mirrors weigh together (`Vectors.nbytes`)."""
    return sum(mirror.nbytes for mirror in list(_mirrors.values()) if mirror)


metrics.mirror_bytes.set_function(held_bytes)


def loading() -> int:
    """How many namespaces are loading now, in the background (their vectors, or their words)."""
    with _lock:
        return len(_pending) + len(_counting)


metrics.mirror_loading.set_function(loading)


def loaded(org: str, namespace: str, model: str) -> bool:
    """Whether the namespace's mirror is in, words too, with no load of it under way (under the lock: a load installs
    its mirror and drops others for the budget in one step)."""
    key = (clickhouse.target(), org, namespace, model)
    with _lock:
        return key in _mirrors and key not in _pending and key not in _counting


def rows(org: str, model: str, ids: list[RowId]) -> dict[RowId, dict]:
    """Memory rows the loaded mirrors hold for these ids (live versions only); the rest must be read."""
    if not enabled():
        return {}
    target, found = clickhouse.target(), {}
    for namespace in {rid.namespace for rid in ids}:
        mirror = _mirrors.get((target, org, namespace, model))
        if mirror is not None and not mirror.compact:
            found.update(mirror.rows([rid for rid in ids if rid.namespace == namespace]))
    return found


def without_chunks(org: str, namespaces: list[str], model: str) -> bool:
    """True when every namespace's mirror is loaded and none of them has a chunk: the chunk leg has nothing to read."""
    if not enabled():
        return False
    target = clickhouse.target()
    mirrors = [_mirrors.get((target, org, namespace, model)) for namespace in namespaces]
    return all(mirror is not None and not mirror.compact and not mirror.chunked for mirror in mirrors)


_COLUMNS = (
    "namespace",
    "memory_key",
    "agent",
    "session_id",
    "version",
    "revision",
    "value_vector",
    "key_vector",
    "duplicate_of",
    "user_id",
    "run_id",
    *META,
)
_WHERE = "org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}"


def _columns(keyed: bool, compact: bool = False) -> tuple[str, ...]:
    """What a mirror reads of a vector row: the key vector only when it holds them (half the bytes otherwise); a
    compact mirror no rank columns but the type (a reflection is never a canonical)."""
    skipped = {"key_vector"} if not keyed else set()
    if compact:
        skipped |= set(META) - {"memory_type"}
    return tuple(name for name in _COLUMNS if name not in skipped)


def _any_chunk(org: str, namespace: str, model: str, identities: list[tuple]) -> bool:
    return bool(
        clickhouse.query_value(
            f"""
            SELECT count() > 0 FROM memory_chunks WHERE {_WHERE} AND {THESE_VERSIONS}
            """,
            {"org": org, "namespace": namespace, "model": model, **versions(identities)},
        )
    )


# A load reads a large namespace in ranges of memory_key of about this many rows, so its peak is the mirror plus two
# ranges' rows as read, the one being added and the next, read meanwhile (a million rows read at once held ~3x the
# mirror's bytes here: the wire copy, the rows decoded, the arrays built from them).
LOAD_STEP = 100_000
FIRST_LOAD_STEP = 10_000


def _load(org: str, namespace: str, model: str, keyed: bool, compact: bool = False) -> Vectors | None:
    """The namespace's mirror, read in ranges of keys: with key vectors if `keyed` and they fit
    LOOM_VECTOR_MIRROR_MAX_BYTES, else without; compact (for the write gates alone) if even that would be over it, or
    `compact` (its full mirror outgrew the budget); None when that would be over it too (ClickHouse serves it
    then)."""
    params = {"org": org, "namespace": namespace, "model": model}
    # Read first: rows reaching the engine while the load reads are then in the first delta.
    since = None if clickhouse.backend() == "embedded" else clickhouse.query_value("SELECT now64(6, 'UTC')")
    count, dim = clickhouse.query_rows(
        f"""
        SELECT count(), max(embedding_dim) FROM memory_embeddings
        WHERE {_WHERE} AND status = 'active' AND embedding_dim > 0
        """,
        params,
    )[0]
    keys_fit = count * Vectors.row_bytes(dim, True) <= settings.LOOM_VECTOR_MIRROR_MAX_BYTES
    keyed = keyed and keys_fit  # (without them: key-axis searches read ClickHouse, the rest this mirror)
    if compact or count * Vectors.row_bytes(dim, keyed) > settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
        if count * Vectors.row_bytes(dim, False, compact=True) > settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
            return None
        compact, keyed, keys_fit = True, False, False
    chunked = clickhouse.query_value(f"SELECT count() > 0 FROM memory_chunks WHERE {_WHERE}", params)
    columns = _columns(keyed, compact)
    mirror = Vectors(keyed, compact)
    mirror.keys_fit = keys_fit
    key, began = (clickhouse.target(), org, namespace, model), time.monotonic()

    def read(low: str, high: str | None) -> tuple[list, list[dict]]:
        """A range's vector rows, then (a full mirror's) the values and dates of its live rows."""
        within = {**params, "low": low, "high": high}
        rows = clickhouse.query_decoded(
            f"""
            SELECT {", ".join(columns)}
            FROM memory_embeddings
            WHERE {_WHERE} AND {_KEY_RANGE} AND status = 'active' AND embedding_dim > 0
              AND (memory_key, agent, session_id, version) NOT IN (
                  SELECT memory_key, agent, session_id, version FROM memory_embeddings
                  WHERE {_WHERE} AND {_KEY_RANGE} AND status != 'active')
            ORDER BY memory_key, agent, session_id, version, revision DESC
            LIMIT 1 BY memory_key, agent, session_id, version
            """,
            within,
        )
        return rows, [] if compact else _live_memory_columns(org, namespace, keys=(low, high))

    ranges = _key_ranges(params, count)
    ahead = clickhouse.beside(read, *ranges[0])
    for at in range(len(ranges)):
        rows, live = ahead.result()
        if at + 1 < len(ranges):  # the engine reads the next range while this one's rows are added (~15% of a load)
            ahead = clickhouse.beside(read, *ranges[at + 1])
        # Sized for the namespace once, not doubled range by range (a doubling holds both copies), and a quarter over
        # for the writes to come: sized to the row, the first write after a load doubled every array under the lock
        # (26 s at 1.9M rows here, the namespace's searches waiting). Rows never written take no memory.
        if rows:
            mirror.reserve(count + count // 4, dim)
        rows = [dict(zip(columns, row)) for row in rows]
        if compact:  # (no words, shown values or stubs to note)
            mirror.add(rows, bool(chunked), words=False)
        else:
            # (A write under way may store a row's vector after the first read and its value before the second: its
            # own notice adds the vector, and takes the row out of `unvectored`, once the load is in.)
            # (A high-sensitivity row has no model: never embedded nor indexed, it names nothing to either check.)
            # (Those the range's vector rows hold are left out as they are shown: `Vectors.show`.)
            unvectored = [RowId(namespace, *_identity(row)) for row in live if row["embedding_model"]]
            mirror.add(rows, bool(chunked), shown_of(live, read=True), unvectored, words=False)
        _progressed(key, began, len(mirror.ids), count)
    mirror.since = since - SYNC_LAG if since is not None else None
    return mirror


def _progressed(key: tuple[str, str, str, str], began: float, read: int, total: int) -> None:
    """A load's progress, for the writes waiting for it (`awaited`)."""
    with _lock:
        _progress[key] = (began, read, total)
        _load_ended.notify_all()


_KEY_RANGE = "memory_key >= {low:String} AND ({high:Nullable(String)} IS NULL OR memory_key < {high:Nullable(String)})"


def _key_ranges(params: dict, count: int) -> list[tuple[str, str | None]]:
    """[low, high) ranges of memory_key holding about LOAD_STEP of the namespace's live vector rows each (a key's
    rows all in one), the first FIRST_LOAD_STEP (its pace tells a waiting write soon whether to wait: `awaited`); a
    single range below LOAD_STEP."""
    if count <= LOAD_STEP:
        return [("", None)]
    keys = clickhouse.query_rows(
        f"""
        SELECT memory_key FROM memory_embeddings
        WHERE {_WHERE} AND status = 'active' AND embedding_dim > 0
        ORDER BY memory_key
        """,
        params,
    )
    bounds = sorted({key for (key,) in [*keys[FIRST_LOAD_STEP : FIRST_LOAD_STEP + 1], *keys[LOAD_STEP::LOAD_STEP]]})
    return list(zip(["", *bounds], [*bounds, None]))


# What a hit shows of a row, and what the mirror's word counts need: the names its triples declare, whether it was
# embedded at all (`embedding_model` is empty for a high-sensitivity row).
SHOWN_COLUMNS = (
    *("memory_key", "agent", "session_id", "version"),
    *("value", "valid_at", "created_at", "triples", "embedding_model"),
)


def _live_memory_columns(
    org: str, namespace: str, only: list[tuple] | None = None, keys: tuple[str, str | None] = ("", None)
) -> list[dict]:
    """Value and dates of the namespace's live rows (`only` these identities; those whose key is in the range
    `keys`), by the same liveness rule as the vectors."""
    where = f"org = {{org:String}} AND namespace = {{namespace:String}} AND {_KEY_RANGE}"
    params = {"org": org, "namespace": namespace, "low": keys[0], "high": keys[1]}
    if only is not None:
        where += f" AND {THESE_VERSIONS}"
        params |= versions(only)
    rows = clickhouse.query_decoded(
        f"""
        SELECT {", ".join(SHOWN_COLUMNS)} FROM memories
        WHERE {where} AND status = 'active'
          AND (memory_key, agent, session_id, version) NOT IN (
              SELECT memory_key, agent, session_id, version FROM memories WHERE {where} AND status != 'active')
        LIMIT 1 BY memory_key, agent, session_id, version
        """,
        params,
    )
    return [dict(zip(SHOWN_COLUMNS, row)) for row in rows]


def _stamp(org: str, namespace: str) -> tuple[int, int] | None:
    """Stamp this process's memory write for the host (change_marker.wrote); it stores no side-table row, so the
    side-table answers kept here stand."""
    swapped = change_marker.wrote(org, namespace)
    reads.kept(org, namespace, swapped)
    return swapped


def added(org: str, namespace: str, rows: list[dict], chunks: list[dict], memory_rows: list[dict]) -> None:
    """The write path stored these embedding rows (active versions, stubs among them), these chunks, and these memory
    rows."""
    staged(org, namespace, rows, memory_rows)(chunks)


def staged(org: str, namespace: str, rows: list[dict], memory_rows: list[dict]) -> Callable[[list[dict]], None]:
    """`added` in two steps, for a write whose statements are under way: the rows are held in the namespace's loaded
    mirrors now, hidden from every read (their Python runs while the engine stores them); the function returned
    shows them, with the write's chunks, once the write has stored them. A write that fails never calls it."""
    models = {row["embedding_model"] for row in rows}
    vectored = {  # each model's rows that have their vectors (the rest are stubs)
        model: [row for row in rows if row["embedding_model"] == model and row["embedding_dim"]] for model in models
    }
    mirrors = {model: peek(org, namespace, model, compact=True) for model in models} if enabled() else {}
    shown = shown_of(memory_rows) if any(mirror is not None for mirror in mirrors.values()) else None
    held = {  # model: (its mirror now, the rows it holds hidden)
        model: (mirror, mirror.stage(vectored[model], shown)) for model, mirror in mirrors.items() if mirror is not None
    }

    def show(chunks: list[dict]) -> None:
        nonlocal shown
        if not rows:
            return
        swapped = _stamp(org, namespace)
        if not enabled():
            return
        with _lock:
            for model in models:
                key = (clickhouse.target(), org, namespace, model)
                if key not in _pending and _mirrors.get(key) is None:
                    continue
                stubs = [row_id(row) for row in rows if row["embedding_model"] == model and not row["embedding_dim"]]
                mine = vectored[model]
                chunked = any(chunk["embedding_model"] == model for chunk in chunks)
                shown = shown if shown is not None else shown_of(memory_rows)
                if key in _pending:  # (a mirror without key vectors serves while one with them loads: both take it)
                    _pending[key].append(("add", (mine, chunked, shown, stubs)))
                if (mirror := _mirrors.get(key)) is not None:
                    if model in held and held[model][0] is mirror:
                        mirror.show(held[model][1], chunked, stubs)
                    else:  # loaded (or loaded again) meanwhile
                        mirror.add(mine, chunked, shown, stubs)
                    mirror.asked = change_marker.advanced(mirror.asked, swapped)  # it holds this write now
                    _keep(key, mirror)

    return show


def retired(org: str, namespace: str, rows: list[dict]) -> None:
    """The write path superseded or deleted these row versions."""
    if not rows:
        return
    swapped = _stamp(org, namespace)
    if not enabled():
        return
    ids = [RowId(namespace, row["memory_key"], row["agent"], row["session_id"], row["version"]) for row in rows]
    with _lock:
        for key, notices in _pending.items():
            if key[:3] == (clickhouse.target(), org, namespace):
                notices.append(("retire", ids))
        for key, mirror in _mirrors.items():
            if key[:3] == (clickhouse.target(), org, namespace) and mirror is not None:
                mirror.retire(ids)
                mirror.asked = change_marker.advanced(mirror.asked, swapped)
