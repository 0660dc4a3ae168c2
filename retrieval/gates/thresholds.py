"""The one place search (and write) gates come from.

Tiers, most specific first: a namespace's own calibration (cached 60 s), the
cluster calibration of the live embedder (re-read every minute), the scalar
settings. Fake embedders, and
LOOM_ADAPTIVE_THRESHOLDS=false, always get the scalars. When the live model
has no calibration yet, the server probes it as it starts (the boot probe,
`probe_at_boot`), else the first search starts the probe in the background and
is served the scalars meanwhile; a failed probe or read never fails a search.
"""

import logging
import math
import threading
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

from django.conf import settings

from retrieval.caching import TtlCache, forget_all
from retrieval.gates import calibration, noise
from retrieval.providers.embedders import get_embedder, provider_for
from retrieval.store import clickhouse

log = logging.getLogger(__name__)

NAMESPACE_CACHE_SECONDS = 60
REFRESH_SECONDS = 60  # how often a process re-reads its model's cluster calibration


@dataclass(frozen=True)
class Gates:
    tier: str  # namespace | cluster | scalar
    min_similarity: float  # the similarity floor (noise floor)
    abstain: float
    query_rewrite: float
    hyde_fallback: float
    rerank_skip: float
    conflict: float
    duplicate: float
    calibration_hash: str | None = None
    calibrated_at: datetime | None = None
    abstain_source: str = ""  # the tier the abstain gate comes from, or namespace_noise (retrieval/gates/noise.py)
    noise_level: float | None = None  # the namespace's noise level, when measured

    def as_dict(self) -> dict:
        return asdict(self)


def scalar() -> Gates:
    return Gates(
        tier="scalar",
        abstain_source="scalar",
        min_similarity=settings.LOOM_MEMORY_SEARCH_MIN_SIMILARITY,
        abstain=settings.LOOM_MEMORY_SEARCH_ABSTAIN_THRESHOLD,
        query_rewrite=settings.LOOM_MEMORY_SEARCH_QUERY_REWRITE_THRESHOLD,
        hyde_fallback=settings.LOOM_MEMORY_SEARCH_HYDE_FALLBACK_THRESHOLD,
        rerank_skip=settings.LOOM_LLM_RERANK_SKIP_ABOVE,
        conflict=settings.LOOM_CONFLICT_THRESHOLD,
        duplicate=settings.LOOM_DUPLICATE_THRESHOLD,
    )


def adaptive(model: str) -> bool:
    return settings.LOOM_ADAPTIVE_THRESHOLDS and provider_for(model) != "fake"


def resolve(org: str, namespace: str, embedding_model: str) -> Gates:
    return in_force(org, namespace, embedding_model)[0]


def for_search(org: str, namespace: str, embedder) -> Gates:
    """The gates a search of this namespace judges by: the tiers, with the abstain gate raised to the namespace's
    noise level where that is higher (real embedders; retrieval/gates/noise.py)."""
    gates = resolve(org, namespace, embedder.model_name)
    return _with_noise(gates, noise.in_force(org, namespace, embedder) if gates.tier != "scalar" else None)


def _with_noise(gates: Gates, found: noise.Noise | None) -> Gates:
    if found is None:
        return gates
    if found.abstain > gates.abstain:
        return replace(gates, abstain=found.abstain, abstain_source="namespace_noise", noise_level=found.level)
    return replace(gates, noise_level=found.level)


def in_force(org: str, namespace: str, embedding_model: str) -> tuple[Gates, calibration.Calibration | None]:
    """The gates a search of this namespace uses, and the calibration they come from (None: scalar)."""
    if not adaptive(embedding_model):
        return scalar(), None
    try:
        own = _namespace_copies.get(
            (clickhouse.target(), org, namespace, embedding_model),
            lambda: calibration.namespace_stored(org, namespace, embedding_model),
        )
        cluster = _cluster(embedding_model)
    except clickhouse.ClickHouseUnavailable:  # the scalar gates serve (the outage is logged as it begins and ends)
        return scalar(), None
    below = _gates("cluster", cluster) if cluster is not None else scalar()
    if own is not None:  # a gate the namespace's pairs did not support comes from the tier below
        return _gates("namespace", own, below), own
    return below, cluster


def report(org: str, namespace: str) -> dict:
    """calibration.get: the tier in force for the namespace, every gate, and the probe behind them."""
    embedder = get_embedder()
    model = embedder.model_name
    gates, found = in_force(org, namespace, model)
    measured = noise.in_force(org, namespace, embedder) if gates.tier != "scalar" else None
    return {
        "abstain_in_force": _with_noise(gates, measured).abstain,
        "noise": measured.as_dict() if measured else None,
        "namespace": namespace,
        "embedding_model": model,
        "adaptive": adaptive(model),
        "tier": gates.tier,
        "gates": {name: getattr(gates, name) for name in calibration.GATES},
        # A namespace calibration's gates its pairs did not support, served from the tier below.
        "inherited": [name for name in calibration.GATES if found and math.isnan(found.gates[name])],
        "calibration_hash": gates.calibration_hash,
        "calibrated_at": gates.calibrated_at,
        "age_seconds": (datetime.now(UTC) - gates.calibrated_at).total_seconds() if gates.calibrated_at else None,
        "source": found.source if found else None,
        "distributions": found.cosines if found else {},
    }


def health() -> dict:
    """/v1/health's adaptive_thresholds: whether gates are derived, the cluster tier, its hash."""
    model = get_embedder().model_name
    if not adaptive(model):
        return {"enabled": False, "tier": "scalar", "calibration_hash": None}
    found = _cluster(model)
    return {
        "enabled": True,
        "tier": "cluster" if found else "scalar",
        "calibration_hash": found.calibration_hash if found else None,
    }


def _gates(tier: str, found: calibration.Calibration, below: Gates | None = None) -> Gates:
    gates = {name: found.gates[name] for name in calibration.GATES}
    if below is not None:
        gates = {name: getattr(below, name) if math.isnan(value) else value for name, value in gates.items()}
    return Gates(
        tier=tier,
        **gates,
        calibration_hash=found.calibration_hash,
        calibrated_at=found.created_at,
        abstain_source=tier if below is None or not math.isnan(found.gates["abstain"]) else below.tier,
    )


BOOT_PROBE_WAIT_S = 10.0  # how long a starting server waits for its embedder's first calibration
_namespace_copies = TtlCache(NAMESPACE_CACHE_SECONDS)
_cluster_copies = TtlCache(REFRESH_SECONDS)
_probed_at: dict[tuple[str, str], float] = {}
_lock = threading.Lock()


def _cluster(model: str) -> calibration.Calibration | None:
    target = clickhouse.target()
    found = _cluster_copies.get((target, model), lambda: calibration.stored(model))
    if found is None and model == get_embedder().model_name:
        _start_probe(target, model)
    return found


def _start_probe(target: str, model: str) -> threading.Thread | None:
    """The boot probe, started in the background unless one started less than a refresh ago (a failed probe tries
    again a refresh later)."""
    with _lock:
        last = _probed_at.get((target, model))
        if last is not None and time.monotonic() - last < REFRESH_SECONDS:
            return None
        _probed_at[(target, model)] = time.monotonic()
    probe = threading.Thread(target=_boot_probe, args=(target,), name="loom-calibration", daemon=True)
    probe.start()
    return probe


def probe_at_boot(wait_s: float = BOOT_PROBE_WAIT_S) -> None:
    """The boot probe, run as a server process starts: with a real embedder and no calibration stored, its first
    search judges by the model's own gates, not the scalars (the local model loads and probes in under two
    seconds). A probe that takes longer than `wait_s` (a provider slow to answer) goes on in the background, and
    searches get the scalars until it publishes, as they would without it."""
    try:
        model = get_embedder().model_name
    except Exception as exc:  # the server still starts: health names the embedder's problem, searches say it
        log.warning("boot probe skipped: the embedder did not load: %s", exc)
        return
    if adaptive(model) and (probe := _start_probe(clickhouse.target(), model)) is not None:
        probe.join(wait_s)


def _boot_probe(target: str) -> None:
    """The first replica to find no calibration for its model probes and publishes it."""
    embedder = get_embedder()
    try:
        clickhouse.use_target_in_thread(target)
        if calibration.stored(embedder.model_name) is None:
            calibration.publish(calibration.probe(embedder, "boot"))
        forget_all()
    except Exception as exc:  # a failed probe serves the scalars; the next refresh tries again
        log.warning("calibration probe of %s failed: %s", embedder.model_name, exc)
    finally:
        clickhouse.release_thread()
