"""Training a namespace's stored cells: a claim in `vector_centroids`, centroids fitted on a sample of its live
rows, every live row indexed in `vector_cells` (the backfill), then ready; once every process lists it (SETTLE_S),
the rows stored since are indexed again and the older versions dropped. One training a namespace at a time, here
(`_lock` guards the set of those this process runs) and across processes (the earliest live claim goes on)."""

import logging
import threading
import time
from datetime import UTC, datetime

import numpy as np

from retrieval.index.cells import Cells, sample_size
from retrieval.index.reading import SYNC_LAG
from retrieval.index.stored_versions import (
    EVER,
    LIVE,
    RECHECK_S,
    ROW_COLUMNS,
    Version,
    cell_rows,
    centroids,
    listed,
    namespaces_listed,
    params,
    ready,
    versions,
    versions_listed,
)
from retrieval.store import clickhouse, cluster

log = logging.getLogger(__name__)

SETTLE_S = 2 * RECHECK_S  # from a version's ready on, every process lists it: the rows since, again; the old, dropped
PAGE = 20_000  # rows the backfill reads and indexes a statement
SAMPLE = 262_144  # the most rows the centroids are fitted on
_training: set[tuple] = set()  # the (engine, org, namespace, model) this process trains
_lock = threading.Lock()


def running(key: tuple) -> bool:
    """Whether this process trains the (engine, org, namespace, model) cells now."""
    with _lock:
        return key in _training


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
        f"SELECT count() FROM memory_embeddings WHERE {LIVE.where()}",
        params(org, namespace, model, statuses=LIVE.statuses),
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
    centroids[(clickhouse.target(), org, namespace, model, claim.trained_at)] = cells
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


def _index(claim: "_Claim", version: Version, since: datetime = EVER) -> None:
    """Index the namespace's live rows stored since `since` under this version, PAGE at a time."""
    after = ("", "", "", 0)
    while page := _page(claim, after, since):
        clickhouse.insert("vector_cells", cell_rows(claim.org, claim.namespace, claim.model, version, *page))
        last = page[0][-1]
        after = (last["memory_key"], last["agent"], last["session_id"], last["version"])
        claim.moved()


class _Claim:
    """A training's rows in vector_centroids: the claim first, then each state it reaches."""

    def __init__(self, org: str, namespace: str, model: str):
        self.org, self.namespace, self.model = org, namespace, model
        self.trained_at = datetime.now(UTC)
        self.record("training")

    def params(self, **more) -> dict:
        return params(self.org, self.namespace, self.model, **more)

    def record(self, state: str, rows: int = 0, **centroids) -> None:
        """This state reached, and the process's lists of versions dropped (its writes and batches act on it)."""
        self.moved(state, rows, **centroids)
        namespaces_listed.forget()
        versions_listed.forget()

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
            for v in listed(self.org, self.namespace, self.model)
            if v.alive(now) and "ready" not in v.states
        ]
        return not rivals or min(rivals) == self.trained_at


def _sample(claim: _Claim, rows: int, wanted: int) -> np.ndarray:
    """About `wanted` of the namespace's live value vectors, chosen by a hash of their identities."""
    found = clickhouse.query_decoded(
        f"""
        SELECT value_vector FROM memory_embeddings
        WHERE {LIVE.where()} AND cityHash64(memory_key, agent, session_id, version) % {{every:UInt64}} = 0
        """,
        claim.params(statuses=LIVE.statuses, every=max(1, rows // wanted)),
    )
    return np.asarray([row[0] for row in found], dtype=np.float32)


def _page(claim: _Claim, after: tuple, since: datetime) -> tuple[list[dict], np.ndarray] | None:
    """The next PAGE live rows stored since `since`, past `after` in the table's order (memory_key, agent,
    session_id, version), and their value vectors; None past the last."""
    found = clickhouse.query_decoded(
        f"""
        SELECT {", ".join(ROW_COLUMNS)}, value_vector
        FROM memory_embeddings
        WHERE {LIVE.where()} AND inserted_at >= {{since:DateTime64(6, 'UTC')}} AND memory_key >= {{key:String}}
          AND (memory_key, agent, session_id, version) > ({{key:String}}, {{agent:String}}, {{session:String}}, {{version:UInt64}})
        ORDER BY memory_key, agent, session_id, version
        LIMIT {PAGE}
        """,
        claim.params(
            statuses=LIVE.statuses, since=since, key=after[0], agent=after[1], session=after[2], version=after[3]
        ),
    )
    if not found:
        return None
    rows = [dict(zip(ROW_COLUMNS, row[:-1])) for row in found]
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
    for key in [key for key in centroids if key[:4] == mine and key[4] < claim.trained_at]:
        del centroids[key]
