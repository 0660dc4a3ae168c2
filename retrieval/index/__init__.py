"""The in-process index: each namespace's live vectors, words and what a hit shows of its rows, mirrored from
ClickHouse so a search of it reads numpy instead of scanning the engine (docs/benchmarks.md, "Scale").

This module is the door: the legs, the write gates and the write path import these names and nothing below them
(an import-linter contract keeps it so). The index is never a second source of truth: a search it cannot answer
exactly (filters, `as_of`, a namespace not loaded, a row whose words are not held) reads ClickHouse, and
`LOOM_VECTOR_MIRROR=false` turns it off.

- `registry`: which namespaces are held (loaded on a first search, in the background), brought up to date before an
  op reads them (`sync`: what other processes wrote, on a ClickHouse server), warmed at a start, dropped least
  recently searched first to stay within LOOM_VECTOR_MIRROR_MAX_BYTES (a namespace alone past it keeps a compact
  mirror, for its write gates alone).
- `vectors`: one namespace's arrays (`Vectors`), with its reads (`nearest`), words (`postings`) and growth (`growth`),
  over the kernels of `scan`; `held`: how a row is kept; `reading`: what a load and a delta read from ClickHouse.
- `notices`: what the write path tells it, after its statements succeed (a batch's rows held hidden meanwhile).
- `cells`: the write gates' partition of a large namespace; `stored_cells` the same kept in ClickHouse, for a
  namespace no mirror holds here (its versions listed in `stored_versions`, trained in `stored_training`).

Values are immutable per version and status only moves forward, so a live row's copy is never stale once its notice
is applied.

What `get` and `peek` hand out is read through `Reader` alone: the few reads the legs and the write gates make.
"""

from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from retrieval.index.held import SCOPE, scope_of
from retrieval.index.notices import added, retired, staged
from retrieval.index.postings import Postings
from retrieval.index.registry import (
    awaited,
    enabled,
    get,
    held_bytes,
    loaded,
    loading,
    mentioned,
    peek,
    rows,
    sync,
    warm,
    without_chunks,
)
from retrieval.index.stored_cells import awaited as stored_cells_awaited
from retrieval.index.stored_cells import keep as keep_stored_cells
from retrieval.index.stored_cells import nearest as stored_nearest
from retrieval.index.stored_cells import rows_for as stored_cell_rows
from retrieval.index.vectors import Vectors
from retrieval.store.rows import RowId


@runtime_checkable
class Reader(Protocol):
    """One namespace's index, as the legs and the write gates read it (retrieval/index/nearest.py, postings.py)."""

    keyed: bool  # it holds key vectors: a key-axis search may read it

    @property
    def size(self) -> int: ...
    def first_read(self, key_axis: bool) -> str: ...
    def top(self, vector: np.ndarray, key_axis: bool, pool: int) -> list[tuple[RowId, float, float, dict]]: ...
    def dated_within(self, start: datetime, end: datetime, pool: int) -> list[tuple[RowId, float, dict]]: ...
    def postings(self, terms: list[str], field: str) -> Postings | None: ...
    def holding_all(self, terms: list[str]) -> list[tuple[RowId, dict]] | None: ...
    def values_holding(self, terms: list[str], most: int) -> dict[str, list[tuple[RowId, str]]] | None: ...
    def nearest(
        self, vectors: np.ndarray, keys: list[str], scopes: list[tuple]
    ) -> list[tuple[str, float, str | None] | None]: ...


__all__ = [
    "SCOPE",
    "Postings",
    "Reader",
    "Vectors",
    "added",
    "awaited",
    "enabled",
    "get",
    "held_bytes",
    "keep_stored_cells",
    "loaded",
    "loading",
    "mentioned",
    "peek",
    "retired",
    "rows",
    "scope_of",
    "staged",
    "stored_cell_rows",
    "stored_cells_awaited",
    "stored_nearest",
    "sync",
    "warm",
    "without_chunks",
]
