"""A namespace's noise level: the abstain gate measured on the namespace's own rows.

The embedder's calibration derives the abstain gate from single distractor pairs, but a search takes the best of
many rows, so an off-topic question's best cosine over a real namespace sits above that gate and the default search
never abstained (docs/benchmarks.md). Here the spec's formula (noise floor = distractor p90 + 0.02, abstain = floor
+ 0.05) reads the distribution a search really sees: each built-in off-topic question's best cosine against the
namespace's live rows (`probe_corpora.OFF_TOPIC`). The gate in force is the higher of the two; it only raises
abstain, never the similarity floor, so it decides the verdict without reordering the window.

Measured on a namespace's first search (at once while it is small, in the background past NOISE_SYNC_ROWS), stored
in `loom.namespace_noise` for every replica, measured again once the namespace grew or shrank by a quarter. Real
embedders only: fakes keep the scalar gates.
"""

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from retrieval import knobs
from retrieval.caching import TtlCache
from retrieval.gates import probe_corpora
from retrieval.providers import customer
from retrieval.store import clickhouse, reads

log = logging.getLogger(__name__)

REFRESH_GROWTH = 0.25  # measure again when the live row count moved by this share
NOISE_SYNC_ROWS = 5_000  # measured inside the first search up to this size; in the background past it
CACHE_SECONDS = 60


@dataclass(frozen=True)
class Noise:
    level: float  # the NOISE_PERCENTILE-th best cosine of the off-topic probes against the namespace's rows
    abstain: float  # level + NOISE_MARGIN
    rows: int
    probes: int
    measured_at: datetime

    def as_dict(self) -> dict:
        return {
            "level": self.level,
            "abstain": self.abstain,
            "rows": self.rows,
            "probes": self.probes,
            "measured_at": self.measured_at,
            "age_seconds": (datetime.now(UTC) - self.measured_at).total_seconds(),
        }


def measure(org: str, namespace: str, embedder) -> Noise | None:
    """Score the probes against the namespace's live rows and store the result; None for an empty namespace."""
    tops, rows = _best_in_clickhouse(org, namespace, embedder.model_name, _probe_vectors(embedder))
    if not rows:
        return None
    level = float(np.percentile(tops, knobs.NOISE_PERCENTILE))
    found = Noise(round(level, 4), round(level + knobs.NOISE_MARGIN, 4), rows, len(tops), datetime.now(UTC))
    clickhouse.insert(
        "namespace_noise",
        [
            {
                "org": org,
                "namespace": namespace,
                "embedding_model": embedder.model_name,
                "rows": rows,
                "tops": np.asarray(tops, dtype=np.float32),
                "level": found.level,
                "abstain": found.abstain,
                "measured_at": found.measured_at,
            }
        ],
    )
    return _copies.put((clickhouse.target(), org, namespace, embedder.model_name), found)


def in_force(org: str, namespace: str, embedder) -> Noise | None:
    """The namespace's noise level for a search: stored, measured now (a small namespace seen for the first time),
    or None while a measurement runs in the background. Never fails a search."""
    key = (clickhouse.target(), org, namespace, embedder.model_name)
    try:
        return _copies.get(key, lambda: _read(org, namespace, embedder))
    except Exception as exc:  # the last copy, or the tier below, serves; the next search tries again
        log.warning("noise level of %s/%s unavailable: %s", org, namespace, exc)
        return _copies.last(key)


def _read(org: str, namespace: str, embedder) -> Noise | None:
    found, rows = _stored(org, namespace, embedder.model_name), reads.live_rows(org, namespace)
    if found is None and rows and rows <= NOISE_SYNC_ROWS:
        return measure(org, namespace, embedder)
    if rows and (found is None or abs(rows - found.rows) > REFRESH_GROWTH * found.rows):
        _measure_in_background(org, namespace, embedder)
    return found


_copies = TtlCache(CACHE_SECONDS)
_running: set[tuple] = set()
_lock = threading.Lock()


_probes: dict[str, np.ndarray] = {}  # by model: the probes' vectors, embedded once per process


def _probe_vectors(embedder) -> np.ndarray:
    if embedder.model_name not in _probes:
        with customer.system():  # the deployment's own call: the probes hold no org's data
            _probes[embedder.model_name] = np.asarray(embedder.embed_many(probe_corpora.OFF_TOPIC), dtype=np.float32)
    return _probes[embedder.model_name]


def _measure_in_background(org: str, namespace: str, embedder) -> None:
    key = (clickhouse.target(), org, namespace, embedder.model_name)
    with _lock:
        if key in _running:
            return
        _running.add(key)

    def run():
        try:
            clickhouse.use_target_in_thread(key[0])
            measure(org, namespace, embedder)
        except Exception as exc:  # measured again on a later search
            log.warning("noise level of %s/%s not measured: %s", org, namespace, exc)
        finally:
            clickhouse.release_thread()
            with _lock:
                _running.discard(key)

    threading.Thread(target=run, name="loom-noise", daemon=True).start()


def _stored(org: str, namespace: str, model: str) -> Noise | None:
    rows = clickhouse.query(
        """
        SELECT level, abstain, rows, length(tops) AS probes, measured_at FROM namespace_noise
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
        ORDER BY measured_at DESC LIMIT 1
        """,
        {"org": org, "namespace": namespace, "model": model},
    )
    return Noise(**rows[0]) if rows else None


def _best_in_clickhouse(org: str, namespace: str, model: str, probes: np.ndarray) -> tuple[list[float], int]:
    """Each probe's best cosine against the namespace's live, searchable value vectors, and how many there are."""
    rows = clickhouse.query_rows(
        """
        SELECT max(dotProduct(value_vector,
                              arraySlice({probes:Array(Float32)}, (probe - 1) * {dim:UInt32} + 1, {dim:UInt32}))),
               count()
        FROM memory_embeddings FINAL
        ARRAY JOIN range(1, {n:UInt32} + 1) AS probe
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
          AND status = 'active' AND embedding_dim > 0 AND duplicate_of = '' AND memory_type != 'reflection'
        GROUP BY probe
        ORDER BY probe
        """,
        {
            "org": org,
            "namespace": namespace,
            "model": model,
            "probes": probes.ravel(),
            "dim": probes.shape[1],
            "n": len(probes),
        },
    )
    return [row[0] for row in rows], (rows[0][1] if rows else 0)
