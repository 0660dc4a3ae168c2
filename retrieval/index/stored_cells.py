"""Stored cells: the write gates' inverted file (retrieval/index/cells.py) kept in ClickHouse, for a namespace that no
vector mirror holds in this process: past even its compact mirror's bytes, with LOOM_VECTOR_MIRROR off, or while a
restart's load is not in. Before, a batch too large to scan (LOOM_WRITE_GATES_MAX_PAIRS) was stored unjudged there.

A version of a namespace's cells (schema 0024) is trained in the background once a batch finds none, or once the
namespace's mirror holds LOOM_WRITE_GATES_STORED_CELLS_FROM rows (more than a restart loads within the wait of
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

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np
from django.conf import settings

from retrieval import caching
from retrieval.index.cells import Cells, sample_size
from retrieval.index.held import SCOPE
from retrieval.index.reading import SYNC_LAG
from retrieval.index.scan import coded
from retrieval.store import clickhouse, cluster, pace
from retrieval.store.eligibility import Eligibility

log = logging.getLogger(__name__)

RECHECK_S = 5.0  # how long a process trusts its list of a namespace's versions
SETTLE_S = 2 * RECHECK_S  # from a version's ready on, every process lists it: the rows since, again; the old, dropped
ABANDONED_S = 600.0  # a training that has not moved this long (its process died) is abandoned: another may begin
PAGE = 20_000  # rows the backfill reads and indexes a statement
SAMPLE = 262_144  # the most rows the centroids are fitted on
CANDIDATES = 4  # each value's best rows by their codes, checked for life and rescored
GROWTH = 2  # trained again once the live rows are this many times those it was trained for
POLL_S = 0.25  # how often a batch waiting for a training (`awaited`) asks how far it is
_EVER = datetime(1970, 1, 1, tzinfo=UTC)

_LIVE = Eligibility(["active"])  # what a canonical may be: an active row, not itself a duplicate
# SQL made from the write scope's columns: each batch value's scope, and a cell row's being of it.
_BATCH_SCOPE = ", ".join(f"{{scope_{name}:Array(String)}}[i] AS b_{name}" for name in SCOPE)
_SAME_SCOPE = " AND ".join(f"vector_cells.{name} = b_{name}" for name in SCOPE)
_ROW_COLUMNS = ("memory_key", "version", *SCOPE)  # what a cell row keeps of its row (and its codes)


class Version(NamedTuple):
    trained_at: datetime
    states: frozenset[str]
    moved: datetime  # its last change
    rows: int  # the live rows it was trained for

    def alive(self, now: datetime) -> bool:
        return "ready" in self.states or now - self.moved < timedelta(seconds=ABANDONED_S)


_versions = caching.TtlCache(RECHECK_S)
# The namespaces with any version, read in one statement: a write to one without (most) reads no list of its own.
_trained = caching.TtlCache(RECHECK_S)
# Keyed by the engine too, as the mirrors are: tests run every op on each.
_centroids: dict[tuple, Cells] = {}  # (engine, org, namespace, model, trained_at): a version's centroids, read once
_training: set[tuple] = set()  # the (engine, org, namespace, model) this process trains
# Another process's training a batch here waited for in vain, without seeing it move for half a batch's wait
# (LOOM_WRITE_GATES_LOAD_WAIT_S) or more, by the time it last moved: later batches wait for it again once it moves (a
# claim whose process died looks alive for ABANDONED_S, and each batch of its namespace waited the whole wait for it).
_stalled: dict[tuple, datetime] = {}
_lock = threading.Lock()


def versions(org: str, namespace: str, model: str) -> list[Version]:
    """The namespace's versions, oldest first, as listed within RECHECK_S."""
    engine = clickhouse.target()
    if (org, namespace, model) not in _trained.get(engine, _with_versions):
        return []
    return _versions.get((engine, org, namespace, model), lambda: _listed(org, namespace, model))


def _with_versions() -> frozenset[tuple[str, str, str]]:
    rows = clickhouse.query_rows("SELECT DISTINCT org, namespace, embedding_model FROM vector_centroids")
    return frozenset(map(tuple, rows))


def _listed(org: str, namespace: str, model: str) -> list[Version]:
    rows = clickhouse.query_rows(
        """
        SELECT trained_at, groupArray(state), max(updated_at), max(rows) FROM vector_centroids FINAL
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
        GROUP BY trained_at ORDER BY trained_at
        """,
        {"org": org, "namespace": namespace, "model": model},
    )
    return [Version(at, frozenset(states), moved, rows) for at, states, moved, rows in rows]


def ready(org: str, namespace: str, model: str) -> Version | None:
    """The newest version that is ready, if any."""
    done = [version for version in versions(org, namespace, model) if "ready" in version.states]
    return done[-1] if done else None


def _indexed(org: str, namespace: str, model: str) -> list[Version]:
    """The versions a write indexes its rows under: the newest ready one and any live one filling after it."""
    now, newest = datetime.now(UTC), ready(org, namespace, model)
    since = newest.trained_at if newest else _EVER
    return [
        version
        for version in versions(org, namespace, model)
        if version == newest or (version.trained_at > since and version.states == {"filling"} and version.alive(now))
    ]


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
        for version in _indexed(org, namespace, model):
            found += _cell_rows(org, namespace, model, version, mine, vectors)
    return found


def _cell_rows(org: str, namespace: str, model: str, version: Version, rows: list[dict], vectors: np.ndarray):
    """The rows as this version's cells hold them; none once the version is gone (a newer one is ready: it came
    after this process listed them, and indexes these rows itself)."""
    if (cells := _cells_of(org, namespace, model, version.trained_at)) is None:
        return []
    placed = cells.home(vectors).tolist()
    codes, scales = coded(vectors)
    return [
        {
            "org": org,
            "namespace": namespace,
            "embedding_model": model,
            "trained_at": version.trained_at,
            "cell": cell,
            **{name: row[name] for name in _ROW_COLUMNS},
            "codes": code,
            "scale": float(scale),
        }
        for row, cell, code, scale in zip(rows, placed, codes, scales)
    ]


def _cells_of(org: str, namespace: str, model: str, trained_at: datetime) -> Cells | None:
    """A version's centroids, read once a process; None when they are gone (dropped as a newer version was ready)."""
    key = (clickhouse.target(), org, namespace, model, trained_at)
    if (cells := _centroids.get(key)) is None:
        found = clickhouse.query_decoded(
            """
            SELECT dim, coarse, fine, starts, fit_floor FROM vector_centroids FINAL
            WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
              AND trained_at = {trained_at:DateTime64(6, 'UTC')} AND state = 'filling'
            """,
            {"org": org, "namespace": namespace, "model": model, "trained_at": trained_at},
        )
        if not found:
            return None
        dim, coarse, fine, starts, fit_floor = found[0]
        coarse, fine = np.asarray(coarse, np.float32).reshape(-1, dim), np.asarray(fine, np.float32).reshape(-1, dim)
        cells = Cells(coarse, np.split(fine, np.asarray(starts[1:-1], dtype=np.int64)), dim)
        cells.fit_floor = float(fit_floor)
        _centroids[key] = cells
    return cells


def nearest(
    org: str, namespace: str, model: str, vectors: np.ndarray, keys: list[str], scopes: list[tuple], live_rows: int
) -> list[tuple[str, float, None] | None] | None:
    """For each vector, the most similar live row of another key in its write scope, from the newest ready version
    of the namespace's stored cells: None when there is none yet (its training is begun, in the background). A
    version trained for under half of `live_rows` is trained again meanwhile."""
    version = ready(org, namespace, model)
    if version is None or live_rows >= GROWTH * version.rows:
        begin(org, namespace, model)
    if version is None or (cells := _cells_of(org, namespace, model, version.trained_at)) is None:
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
            WHERE {_LIVE.where()} AND memory_key IN {{keys:Array(String)}}
            """,
            _params(org, namespace, model, statuses=_LIVE.statuses, keys=sorted({row[1] for row in candidates})),
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
    its pace so far says it will be ready after the deadline (a million rows train for ~45 s here, 5,000 in well
    under a second), or when a batch here waited for it in vain and it has not moved since (`_stalled`)."""
    key, first, seen = (clickhouse.target(), org, namespace, model), None, time.monotonic()
    while True:
        listed = _listed(org, namespace, model)
        if any("ready" in version.states for version in listed):
            _trained.forget()  # (this process's lists, which `nearest` reads, may be older than the version)
            _versions.forget()
            return True
        now, left = datetime.now(UTC), deadline - time.monotonic()
        alive = [version for version in listed if version.alive(now)]
        with _lock:  # (a training this process began a moment ago may not have claimed yet)
            here = key in _training
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
    indexed = clickhouse.query_value(
        """
        SELECT count() FROM vector_cells
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
          AND trained_at = {trained_at:DateTime64(6, 'UTC')}
        """,
        {"org": org, "namespace": namespace, "model": model, "trained_at": version.trained_at},
    )
    return pace.seconds_left((now - version.trained_at).total_seconds(), indexed, version.rows)


def keep(org: str, namespace: str, model: str) -> None:
    """Train the namespace's cells in the background unless a version is ready (LOOM_WRITE_GATES_STORED_CELLS_FROM:
    a large namespace's mirror is held here, but a restart's batches will find none for a while)."""
    if ready(org, namespace, model) is None:
        begin(org, namespace, model)


def begin(org: str, namespace: str, model: str) -> None:
    """Train the namespace's cells in the background, unless this process does already, or another's training is
    alive and not ready."""
    key = (clickhouse.target(), org, namespace, model)
    now = datetime.now(UTC)
    if any(v.alive(now) and "ready" not in v.states for v in versions(org, namespace, model)):
        return
    with _lock:
        if key in _training:
            return
        _training.add(key)
    threading.Thread(target=_train_in_background, args=key, name="loom-stored-cells", daemon=True).start()


def training() -> int:
    """How many trainings this process runs now."""
    with _lock:
        return len(_training)


def _train_in_background(target: str, org: str, namespace: str, model: str) -> None:
    try:
        clickhouse.use_target_in_thread(target)
        train(org, namespace, model)
    except Exception:  # said; the next batch that needs the cells begins again
        log.exception("training the stored cells of %s/%s failed", org, namespace)
    finally:
        clickhouse.release_thread()
        with _lock:
            _training.discard((target, org, namespace, model))


def train(org: str, namespace: str, model: str) -> Version | None:
    """A new version of the namespace's stored cells, trained, filled and ready; None when it gave way to another
    process's training (the earlier claim goes on) or the namespace has no live row."""
    rows = clickhouse.query_value(
        f"SELECT count() FROM memory_embeddings WHERE {_LIVE.where()}",
        _params(org, namespace, model, statuses=_LIVE.statuses),
    )
    if not rows:  # (before any claim: a batch waiting for one would wait for nothing)
        return None
    claim = _Claim(org, namespace, model)
    if not claim.first():
        return None
    # Twice the rows the centroids are fitted on: the stray floor is set over rows half of which they never saw.
    cells = Cells.fitted(_sample(claim, rows, 2 * min(SAMPLE, sample_size(rows))), rows)
    claim.record(
        "filling",
        rows=rows,
        dim=cells.fine.shape[1],
        coarse=cells.coarse.ravel(),
        fine=cells.fine.ravel(),
        starts=cells.starts.astype(np.uint32),
        fit_floor=cells.fit_floor,
    )
    _centroids[(clickhouse.target(), org, namespace, model, claim.trained_at)] = cells
    filled = datetime.now(UTC)
    version = Version(claim.trained_at, frozenset({"filling"}), claim.trained_at, rows)
    _index(claim, version)
    if not claim.first():
        return None
    claim.record("ready")
    # Another process stores rows unindexed until it lists the new version (within RECHECK_S), and a batch that
    # listed the versions before it was ready reads the older one meanwhile: once that is past, what came since the
    # centroids is indexed again (the table folds the copies), and then the older versions are dropped.
    time.sleep(SETTLE_S)
    _index(claim, version, since=filled - SYNC_LAG)
    _retire_before(claim)
    return ready(org, namespace, model)


def _index(claim: "_Claim", version: Version, since: datetime = _EVER) -> None:
    """Index the namespace's live rows stored since `since` under this version, PAGE at a time."""
    after = ("", "", "", 0)
    while page := _page(claim, after, since):
        clickhouse.insert("vector_cells", _cell_rows(claim.org, claim.namespace, claim.model, version, *page))
        last = page[0][-1]
        after = (last["memory_key"], last["agent"], last["session_id"], last["version"])
        claim.moved()


def _params(org: str, namespace: str, model: str, **more) -> dict:
    """The parameters of a statement over the namespace's rows of this model (`Eligibility.where`)."""
    return {"org": org, "namespaces": [namespace], "model": model, **more}


class _Claim:
    """A training's rows in vector_centroids: the claim first, then each state it reaches."""

    def __init__(self, org: str, namespace: str, model: str):
        self.org, self.namespace, self.model = org, namespace, model
        self.trained_at = datetime.now(UTC)
        self.record("training")

    def params(self, **more) -> dict:
        return _params(self.org, self.namespace, self.model, **more)

    def record(self, state: str, rows: int = 0, **centroids) -> None:
        """This state reached, and the process's lists of versions dropped (its writes and batches act on it)."""
        self.moved(state, rows, **centroids)
        _trained.forget()
        _versions.forget()

    def moved(self, state: str = "training", rows: int = 0, **centroids) -> None:
        """Still moving (not abandoned): nothing a write or a batch acts on changed."""
        empty = {"dim": 0, "coarse": [], "fine": [], "starts": [], "fit_floor": 0.0}
        row = {
            "org": self.org,
            "namespace": self.namespace,
            "embedding_model": self.model,
            "trained_at": self.trained_at,
            "state": state,
            "updated_at": datetime.now(UTC),
            **(centroids or empty),
            "rows": rows,
        }
        clickhouse.insert("vector_centroids", [row])

    def first(self) -> bool:
        """Whether this is the earliest live training that is not ready: of two begun at once, the earlier goes on.
        Asked of the engine, not of this process's list (another's claim may be seconds old)."""
        now = datetime.now(UTC)
        rivals = [
            v.trained_at
            for v in _listed(self.org, self.namespace, self.model)
            if v.alive(now) and "ready" not in v.states
        ]
        return not rivals or min(rivals) == self.trained_at


def _sample(claim: _Claim, rows: int, wanted: int) -> np.ndarray:
    """About `wanted` of the namespace's live value vectors, chosen by a hash of their identities."""
    found = clickhouse.query_decoded(
        f"""
        SELECT value_vector FROM memory_embeddings
        WHERE {_LIVE.where()} AND cityHash64(memory_key, agent, session_id, version) % {{every:UInt64}} = 0
        """,
        claim.params(statuses=_LIVE.statuses, every=max(1, rows // wanted)),
    )
    return np.asarray([row[0] for row in found], dtype=np.float32)


def _page(claim: _Claim, after: tuple, since: datetime) -> tuple[list[dict], np.ndarray] | None:
    """The next PAGE live rows stored since `since`, past `after` in the table's order (memory_key, agent,
    session_id, version), and their value vectors; None past the last."""
    found = clickhouse.query_decoded(
        f"""
        SELECT {", ".join(_ROW_COLUMNS)}, value_vector
        FROM memory_embeddings
        WHERE {_LIVE.where()} AND inserted_at >= {{since:DateTime64(6, 'UTC')}} AND memory_key >= {{key:String}}
          AND (memory_key, agent, session_id, version) > ({{key:String}}, {{agent:String}}, {{session:String}}, {{version:UInt64}})
        ORDER BY memory_key, agent, session_id, version
        LIMIT {PAGE}
        """,
        claim.params(
            statuses=_LIVE.statuses, since=since, key=after[0], agent=after[1], session=after[2], version=after[3]
        ),
    )
    if not found:
        return None
    rows = [dict(zip(_ROW_COLUMNS, row[:-1])) for row in found]
    return rows, np.asarray([row[-1] for row in found], dtype=np.float32)


def _retire_before(claim: _Claim) -> None:
    """Drop the versions before this one, now that it is ready: their centroids and their rows."""
    for table in ("vector_cells", "vector_centroids"):
        cluster.run(
            f"ALTER TABLE {table} DELETE WHERE org = {{org:String}} AND namespace = {{namespace:String}} "
            "AND embedding_model = {model:String} AND trained_at < {trained_at:DateTime64(6, 'UTC')} "
            "SETTINGS mutations_sync = 1",
            {"org": claim.org, "namespace": claim.namespace, "model": claim.model, "trained_at": claim.trained_at},
        )
    mine = (clickhouse.target(), claim.org, claim.namespace, claim.model)
    for key in [key for key in _centroids if key[:4] == mine and key[4] < claim.trained_at]:
        del _centroids[key]


def forget() -> None:
    """Drop the centroids this process holds (the version lists are a TtlCache: caching.forget_all), and the
    trainings it found stalled."""
    _centroids.clear()
    _stalled.clear()
