"""Stored cells: the write gates' inverted file (retrieval/index/cells.py) kept in ClickHouse, for a namespace that no
vector mirror holds in this process: past even its compact mirror's bytes, with LOOM_VECTOR_MIRROR off, or while a
restart's load is not in. Before, a batch too large to scan (LOOM_WRITE_GATES_MAX_PAIRS) was stored unjudged there.

A version of a namespace's cells (schema 0024) is trained in the background once a batch finds none, or once the
namespace's mirror holds knobs.STORED_CELLS_FROM rows (more than a restart loads within the wait of
LOOM_WRITE_GATES_LOAD_WAIT_S): centroids fitted on a sample of its live rows (`Cells.fitted`), then every live row
indexed in `vector_cells` with its cell, write scope and int8 codes (the backfill), then ready. Meanwhile, and after,
each write indexes the rows it stores under the versions it knows (`rows_for`), so a ready version holds every live
row: another process lists a namespace's versions every RECHECK_S, so SETTLE_S after the version is ready every writer
indexes its rows, and the rows stored since its centroids came are indexed again then (a batch meanwhile may miss
another process's newest rows, for seconds, rather than the whole namespace for as long).

A batch (`nearest`) reads, for each value, the cells `Cells.read_by` names (its nearest PROBES, its own, the strays):
one statement joins the batch's (value, cell) reads to those cells' rows of the value's write scope, scores the int8
codes in the engine and keeps each value's CANDIDATES best; a second reads those candidates' vectors where they are
still live, and the best is rescored at full precision. So a batch costs what its values read, whatever the
namespace's size: ~PROBES x cells.ROWS_PER_CELL rows a value.

The cells are trained again, as a new version, once the live rows have doubled since (a cell read would hold twice
its rows); the old version's rows are dropped SETTLE_S after the new one is ready, once no process reads them.
"""

import threading
import time
from datetime import UTC, datetime

import numpy as np
from django.conf import settings

from retrieval.index import stored_training
from retrieval.index.held import SCOPE
from retrieval.index.stored_versions import (
    LIVE,
    Version,
    cell_rows,
    cells_of,
    centroids,
    indexed,
    listed,
    namespaces_listed,
    params,
    ready,
    versions_listed,
)
from retrieval.store import clickhouse, pace

CANDIDATES = 4  # each value's best rows by their codes, checked for life and rescored
GROWTH = 2  # trained again once the live rows are this many times those it was trained for
POLL_S = 0.25  # how often a batch waiting for a training (`awaited`) asks how far it is
# SQL made from the write scope's columns: each batch value's scope, and a cell row's being of it.
_BATCH_SCOPE = ", ".join(f"{{scope_{name}:Array(String)}}[i] AS b_{name}" for name in SCOPE)
_SAME_SCOPE = " AND ".join(f"vector_cells.{name} = b_{name}" for name in SCOPE)
# Another process's training a batch here waited for in vain, without seeing it move for half a batch's wait
# (LOOM_WRITE_GATES_LOAD_WAIT_S) or more, by the time it last moved: later batches wait for it again once it moves (a
# claim whose process died looks alive for ABANDONED_S, and each batch of its namespace waited the whole wait for it).
_stalled: dict[tuple, datetime] = {}
_lock = threading.Lock()  # (the stalled trainings)


def rows_for(org: str, namespace: str, embeddings: list[dict]) -> list[dict]:
    """`vector_cells` rows for these memory_embeddings rows, under each version their namespace's writes index (none,
    until a batch first needs the stored cells). Rows that can never be a canonical (a stub, a duplicate, a
    reflection) are left out."""
    wanted = [
        row
        for row in embeddings
        if row["embedding_dim"] and not row["duplicate_of"] and row["memory_type"] != "reflection"
    ]
    found: list[dict] = []
    for model in {row["embedding_model"] for row in wanted}:
        mine = [row for row in wanted if row["embedding_model"] == model]
        vectors = np.asarray([row["value_vector"] for row in mine], dtype=np.float32)
        for version in indexed(org, namespace, model):
            found += cell_rows(org, namespace, model, version, mine, vectors)
    return found


def nearest(
    org: str, namespace: str, model: str, vectors: np.ndarray, keys: list[str], scopes: list[tuple], live_rows: int
) -> list[tuple[str, float, None] | None] | None:
    """For each vector, the most similar live row of another key in its write scope, from the newest ready version
    of the namespace's stored cells: None when there is none yet (its training is begun, in the background). A
    version trained for under half of `live_rows` is trained again meanwhile."""
    version = ready(org, namespace, model)
    if version is None or live_rows >= GROWTH * version.rows:
        stored_training.begin(org, namespace, model)
    if version is None or (cells := cells_of(org, namespace, model, version.trained_at)) is None:
        return None
    read = cells.read_by(vectors)
    lines = np.repeat(np.arange(1, len(vectors) + 1), read.shape[1])
    candidates = clickhouse.query_rows(
        f"""
        SELECT i, memory_key, agent, session_id, version FROM (
            SELECT i, memory_key, agent, session_id, version, dotProduct(codes, q) * scale AS sim
            FROM vector_cells
            INNER JOIN (
                SELECT i, cell, arraySlice({{vectors:Array(Float32)}}, (i - 1) * {{dim:UInt32}} + 1, {{dim:UInt32}}) AS q,
                       {{keys:Array(String)}}[i] AS b_key, {_BATCH_SCOPE}
                FROM (SELECT arrayJoin(arrayZip({{lines:Array(UInt32)}}, {{cells:Array(UInt32)}})) AS read,
                             read.1 AS i, read.2 AS cell)
            ) AS batch ON vector_cells.cell = batch.cell AND {_SAME_SCOPE}
            WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND embedding_model = {{model:String}}
              AND trained_at = {{trained_at:DateTime64(6, 'UTC')}} AND vector_cells.cell IN {{wanted:Array(UInt32)}}
              AND memory_key != b_key
        )
        ORDER BY i, sim DESC
        LIMIT {CANDIDATES} BY i
        """,
        {
            "org": org,
            "namespace": namespace,
            "model": model,
            "trained_at": version.trained_at,
            "dim": vectors.shape[1],
            "vectors": vectors.ravel(),
            "keys": keys,
            "lines": lines.tolist(),
            "cells": read.ravel().tolist(),
            "wanted": np.unique(read).tolist(),
            **{f"scope_{name}": [s[at] for s in scopes] for at, name in enumerate(SCOPE)},
        },
    )
    return _rescored(org, namespace, model, vectors, candidates)


def _rescored(org: str, namespace: str, model: str, vectors: np.ndarray, candidates: list[tuple]):
    """Each value's best live candidate, by its exact cosine."""
    found: list[tuple[str, float, None] | None] = [None] * len(vectors)
    if not candidates:
        return found
    live = {
        (key, agent, session, version): vector
        for key, agent, session, version, vector in clickhouse.query_decoded(
            f"""
            SELECT memory_key, agent, session_id, version, value_vector FROM memory_embeddings
            WHERE {LIVE.where()} AND memory_key IN {{keys:Array(String)}}
            """,
            params(org, namespace, model, statuses=LIVE.statuses, keys=sorted({row[1] for row in candidates})),
        )
    }
    best: dict[int, tuple[float, int, str]] = {}
    for i, *identity in candidates:
        if (vector := live.get(tuple(identity))) is not None:
            # Of equals, the earliest version: the row the mirror would name.
            ranked = (float(np.dot(vectors[i - 1], vector)), -identity[3], identity[0])
            best[i - 1] = max(best.get(i - 1, ranked), ranked)
    for line, (similarity, _, key) in best.items():
        found[line] = (key, similarity, None)
    return found


def awaited(org: str, namespace: str, model: str, deadline: float) -> bool:
    """Whether a version of the namespace's cells is ready, waiting until `deadline` (`time.monotonic()`) for a
    training under way, here or in another process: the batch that found none (and began it), and those after it,
    are judged once it is, where they were stored unjudged before. False at once when no training is alive, or when
    its pace so far says it will be ready after the deadline (a million rows train for most of a minute, a few
    thousand in well under a second), or when a batch here waited for it in vain and it has not moved since
    (`_stalled`)."""
    key, first, seen = (clickhouse.target(), org, namespace, model), None, time.monotonic()
    while True:
        found = listed(org, namespace, model)
        if any("ready" in version.states for version in found):
            namespaces_listed.forget()  # (this process's lists, which `nearest` reads, may be older than the version)
            versions_listed.forget()
            return True
        now, left = datetime.now(UTC), deadline - time.monotonic()
        alive = [version for version in found if version.alive(now)]
        here = stored_training.running(key)  # (one this process began a moment ago may not have claimed yet)
        with _lock:
            moved = alive[0].moved if alive and not here else None  # (another process's)
            # Watched without moving for half a batch's wait or more (a loading mirror's may have taken the rest).
            unmoved = moved == first and time.monotonic() - seen >= settings.LOOM_WRITE_GATES_LOAD_WAIT_S / 2
            if left <= 0 and moved is not None and unmoved:
                _stalled[key] = moved
            if left <= 0 or not (alive or here) or (moved is not None and _stalled.get(key) == moved):
                return False
        if alive and _ready_in(org, namespace, model, alive[0], now) > left:
            return False
        if first is None and moved is not None:
            first, seen = moved, time.monotonic()
        time.sleep(min(POLL_S, left))


def _ready_in(org: str, namespace: str, model: str, version: Version, now: datetime) -> float:
    """Seconds until this training is ready, at its pace so far (the rows indexed since it began, of those it was
    trained for); 0 until it has indexed a row."""
    if "filling" not in version.states:
        return 0.0
    done = clickhouse.query_value(
        """
        SELECT count() FROM vector_cells
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
          AND trained_at = {trained_at:DateTime64(6, 'UTC')}
        """,
        {"org": org, "namespace": namespace, "model": model, "trained_at": version.trained_at},
    )
    return pace.seconds_left((now - version.trained_at).total_seconds(), done, version.rows)


def keep(org: str, namespace: str, model: str) -> None:
    """Train the namespace's cells in the background unless a version is ready (knobs.STORED_CELLS_FROM:
    a large namespace's mirror is held here, but a restart's batches will find none for a while)."""
    if ready(org, namespace, model) is None:
        stored_training.begin(org, namespace, model)


def forget() -> None:
    """Drop the centroids this process holds (the version lists are a TtlCache: caching.forget_all), and the
    trainings it found stalled."""
    centroids.clear()
    _stalled.clear()
