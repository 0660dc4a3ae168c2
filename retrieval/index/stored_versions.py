"""A namespace's stored cells as ClickHouse lists them (`vector_centroids`): its versions, the one ready, their
centroids (read once a process) and the `vector_cells` rows that place a row in them. What the write gates' read
(stored_cells.py) and the training (stored_training.py) share. No lock: the lists are TtlCaches, the centroids a
dict written whole."""

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np

from retrieval import caching
from retrieval.index.cells import Cells
from retrieval.index.held import SCOPE
from retrieval.index.scan import coded
from retrieval.store import clickhouse
from retrieval.store.eligibility import Eligibility

RECHECK_S = 5.0  # how long a process trusts its list of a namespace's versions
ABANDONED_S = 600.0  # a training that has not moved this long (its process died) is abandoned: another may begin
EVER = datetime(1970, 1, 1, tzinfo=UTC)
LIVE = Eligibility(["active"])  # what a canonical may be: an active row, not itself a duplicate
ROW_COLUMNS = ("memory_key", "version", *SCOPE)  # what a cell row keeps of its row (and its codes)


class Version(NamedTuple):
    trained_at: datetime
    states: frozenset[str]
    moved: datetime  # its last change
    rows: int  # the live rows it was trained for

    def alive(self, now: datetime) -> bool:
        return "ready" in self.states or now - self.moved < timedelta(seconds=ABANDONED_S)


versions_listed = caching.TtlCache(RECHECK_S)
# The namespaces with any version, read in one statement: a write to one without (most) reads no list of its own.
namespaces_listed = caching.TtlCache(RECHECK_S)
# Keyed by the engine too, as the mirrors are: tests run every op on each.
centroids: dict[tuple, Cells] = {}  # (engine, org, namespace, model, trained_at): a version's centroids, read once


def versions(org: str, namespace: str, model: str) -> list[Version]:
    """The namespace's versions, oldest first, as listed within RECHECK_S."""
    engine = clickhouse.target()
    if (org, namespace, model) not in namespaces_listed.get(engine, _with_versions):
        return []
    return versions_listed.get((engine, org, namespace, model), lambda: listed(org, namespace, model))


def _with_versions() -> frozenset[tuple[str, str, str]]:
    rows = clickhouse.query_rows(
        "SELECT DISTINCT org, namespace, embedding_model FROM vector_centroids",
        every_org=True,  # whoever's: listed once
    )
    return frozenset(map(tuple, rows))


def listed(org: str, namespace: str, model: str) -> list[Version]:
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


def indexed(org: str, namespace: str, model: str) -> list[Version]:
    """The versions a write indexes its rows under: the newest ready one and any live one filling after it."""
    now, newest = datetime.now(UTC), ready(org, namespace, model)
    since = newest.trained_at if newest else EVER
    return [
        version
        for version in versions(org, namespace, model)
        if version == newest or (version.trained_at > since and version.states == {"filling"} and version.alive(now))
    ]


def cell_rows(org: str, namespace: str, model: str, version: Version, rows: list[dict], vectors: np.ndarray):
    """The rows as this version's cells hold them; none once the version is gone (a newer one is ready: it came
    after this process listed them, and indexes these rows itself)."""
    if (cells := cells_of(org, namespace, model, version.trained_at)) is None:
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
            **{name: row[name] for name in ROW_COLUMNS},
            "codes": code,
            "scale": float(scale),
        }
        for row, cell, code, scale in zip(rows, placed, codes, scales)
    ]


def cells_of(org: str, namespace: str, model: str, trained_at: datetime) -> Cells | None:
    """A version's centroids, read once a process; None when they are gone (dropped as a newer version was ready)."""
    key = (clickhouse.target(), org, namespace, model, trained_at)
    if (cells := centroids.get(key)) is None:
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
        centroids[key] = cells
    return cells


def params(org: str, namespace: str, model: str, **more) -> dict:
    """The parameters of a statement over the namespace's rows of this model (`Eligibility.where`)."""
    return {"org": org, "namespaces": [namespace], "model": model, **more}
