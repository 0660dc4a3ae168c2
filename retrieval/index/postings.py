"""The lexical side of a mirror: each live row's words counted (the entity check's) and posted (the lexical and BM25
legs', as memory_terms holds them), and what those legs read of them.

Lock story: every method runs under the mirror's lock (`Vectors.lock`), the private ones called with it held;
`count_words` takes it a step of WORDS_STEP rows at a time, so a load's count never holds a search for long. A
`Postings` answer is read after the lock is released: its positions index `ids`, which only grows.
"""

import time
from array import array
from collections import Counter
from dataclasses import dataclass

import numpy as np

from retrieval.language import text
from retrieval.store.rows import RowId

# Rows a loaded mirror counts the words of under one hold of its lock (`count_words`): a search waits at most that.
WORDS_STEP = 2_000

WORDS_PAUSE_S = 0.001  # between steps: a small share of a million rows' count

# A value posting is one number: the row's position, shifted, and the term's frequency in it, capped as memory_terms
# caps it (UInt16): one append a term where two arrays took two, and a write appends dozens a row.
TF_BITS = 16

MAX_TF = (1 << TF_BITS) - 1


@dataclass
class Postings:
    """`Vectors.postings`: positions index `ids` (append-only, so they may be read after the lock is released)."""

    ids: list[RowId]
    position: dict[RowId, int]  # each id's position (the mirror's own map: read, never written, here)
    rows: int  # live rows
    length: int  # their values' total length in terms
    terms: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # term: (positions, tf, value length)


class Lexical:
    """The words of `Vectors` (retrieval/index/vectors.py): counted, posted, read."""

    def count_words(self, rows: int) -> None:
        """Count in the words of the first `rows` rows (those a load added without them), WORDS_STEP rows at a time
        under the lock: a search or a write waits for a step, not for all. Until the last step the lexical legs and
        the entity check read ClickHouse (`_worded`), as for any row whose words are not held."""
        for start in range(0, rows, WORDS_STEP):
            with self.lock:
                for at in np.flatnonzero(self.live[start : min(start + WORDS_STEP, rows)]).tolist():
                    self._count(start + at, +1)
            # A pause lets a waiting search or write take the lock: Python's lock is not fair, and taken again at once
            # it kept them waiting for the whole count (seconds after a 100k-row load).
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
            return Postings(self.ids, self.position, int(np.count_nonzero(worded)), length, found)

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
