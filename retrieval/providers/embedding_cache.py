"""Query embeddings, cached: the process's LRU, then a call already in flight, then loom.embedding_cache.

The key hashes the org, the model and the whitespace-normalised text, so one
org is never served another's vector (nor learns, from a fast answer, that
another org embedded the same text). The switch is checked before any of
this (`customer.require()`), so an org switched off gets no cached vector
either. A cache that fails falls through to the provider.
"""

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from datetime import UTC, datetime

import numpy as np
from django.conf import settings

from retrieval import metrics
from retrieval.store import clickhouse

log = logging.getLogger(__name__)
# Longer queries skip the shared table: a long text rarely repeats, and its row would cost every read of the table.
SHARED_MAX_CHARS = 2000


def key(org: str, model: str, text: str) -> str:
    return hashlib.sha256(f"{org}\0{model}\0{normalised(text)}".encode()).hexdigest()


def normalised(text: str) -> str:
    return " ".join(text.split())


class QueryCache:
    def __init__(self):
        self.lock = threading.Lock()
        self.entries: OrderedDict[str, tuple[float, np.ndarray]] = OrderedDict()
        self.in_flight: dict[str, Future] = {}

    def vector(self, org: str, embedder, text: str) -> np.ndarray:
        digest = key(org, embedder.model_name, text)
        with self.lock:
            hit = self._fresh(digest)
            if hit is not None:
                metrics.cache_lookups.labels("embedding", "hit").inc()
                return hit
            waiting = self.in_flight.get(digest)
            if waiting is None:
                mine = self.in_flight[digest] = Future()
        if waiting is not None:  # the same org asked for the same text a moment ago: share its answer
            return waiting.result()
        try:
            vector = _shared_get(digest, embedder.dim)
            metrics.cache_lookups.labels("embedding", "miss" if vector is None else "hit").inc()
            if vector is None:
                vector = embedder.embed(normalised(text))
                _shared_put(digest, embedder.model_name, vector, len(text))
            with self.lock:
                self.entries[digest] = (time.monotonic(), vector)
                self.entries.move_to_end(digest)
                while len(self.entries) > settings.LOOM_EMBEDDING_CACHE_SIZE:
                    self.entries.popitem(last=False)
            mine.set_result(vector)
            return vector
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        finally:
            with self.lock:
                self.in_flight.pop(digest, None)

    def _fresh(self, digest: str) -> np.ndarray | None:
        found = self.entries.get(digest)
        if found is None:
            return None
        if time.monotonic() - found[0] > settings.LOOM_EMBEDDING_CACHE_TTL_S:
            del self.entries[digest]
            return None
        self.entries.move_to_end(digest)
        return found[1]

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


def _shared() -> bool:
    """The shared table serves other processes: with the embedded engine there are none (one owns the data)."""
    return clickhouse.backend() != "embedded"


def _shared_get(digest: str, dim: int) -> np.ndarray | None:
    if not _shared():
        return None
    try:
        rows = clickhouse.query_rows(
            "SELECT vector FROM embedding_cache WHERE key = {key:String} AND length(vector) = {dim:UInt32} LIMIT 1",
            {"key": digest, "dim": dim},
        )
    except Exception as exc:  # a cache that fails is a miss
        log.warning("embedding cache read failed: %s", exc)
        return None
    return np.asarray(rows[0][0], dtype=np.float32) if rows else None


def _shared_put(digest: str, model: str, vector: np.ndarray, chars: int) -> None:
    """Written later, in a batch: the vector is in hand, and a search need not wait for a cache's write (one row an
    insert cost a server more than the search's own reads). A write that fails only misses next time."""
    if not _shared() or chars > SHARED_MAX_CHARS:
        return
    clickhouse.insert_later(
        "embedding_cache", [{"key": digest, "model": model, "vector": vector, "created_at": datetime.now(UTC)}]
    )


queries = QueryCache()
