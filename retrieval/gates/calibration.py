"""Adaptive thresholds: derive every cosine gate from the live embedder's own distribution.

The probe embeds the three built-in corpora (`probe_corpora.py`) and reads
their cosines; `derive_thresholds` turns them into gates with the spec's
formulas. A calibration is published per embedder model
(`loom.embedder_calibration`: the cluster tier) or, from a namespace's own
labelled pairs, per namespace (`loom.namespace_calibration_result`).
`thresholds.resolve` picks the tier in force.
"""

import hashlib
import logging
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import numpy as np

from retrieval.gates import probe_corpora
from retrieval.providers import costs, customer
from retrieval.store import clickhouse

log = logging.getLogger(__name__)

GATES = ("min_similarity", "abstain", "query_rewrite", "hyde_fallback", "rerank_skip", "conflict", "duplicate")
DRIFT_WARNING = 0.05


@dataclass
class Calibration:
    embedding_model: str
    gates: dict[str, float]
    calibration_hash: str
    source: str
    created_at: datetime
    cosines: dict[str, list[float]] = field(default_factory=dict)  # paraphrase, question_fact, distractor


def derive_thresholds(paraphrase: list[float], question_fact: list[float], distractor: list[float]) -> dict:
    """Every gate the pairs support; a corpus left empty leaves its gates NaN (the next tier's serve)."""

    def p(values, q):
        return float(np.percentile(values, q)) if values else math.nan

    noise = p(distractor, 90) + 0.02
    rewrite = max(p(question_fact, 10), noise + 0.01)
    hyde = max(p(question_fact, 25), rewrite)
    gates = {
        "min_similarity": noise,
        "abstain": noise + 0.05,
        "query_rewrite": rewrite,
        "hyde_fallback": hyde,
        "rerank_skip": max(p(question_fact, 75), hyde),
        "conflict": p(paraphrase, 50),
        "duplicate": p(paraphrase, 75),
    }
    return {name: round(value, 4) for name, value in gates.items()}


def calibration_hash(model: str, gates: dict) -> str:
    """Equal on every replica serving the same gates of the same model."""
    text = model + "".join(f"|{name}={gates[name]:.4f}" for name in GATES)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cosines(embedder, pairs: list[tuple[str, str]]) -> list[float]:
    """Each pair's cosine (vectors are L2-normalised), embedded in one batch."""
    vectors = embedder.embed_many([text for pair in pairs for text in pair])
    return [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(pairs))]


def build(model: str, paraphrase, question_fact, distractor, source: str) -> Calibration:
    gates = derive_thresholds(paraphrase, question_fact, distractor)
    return Calibration(
        model,
        gates,
        calibration_hash(model, gates),
        source,
        datetime.now(UTC),
        {"paraphrase": paraphrase, "question_fact": question_fact, "distractor": distractor},
    )


def probe(embedder, source: str) -> Calibration:
    """Embed the built-in corpora (the deployment's own calls) and derive the gates."""
    with customer.system():
        return build(
            embedder.model_name,
            cosines(embedder, probe_corpora.PARAPHRASES),
            cosines(embedder, probe_corpora.QUESTION_FACT),
            cosines(embedder, probe_corpora.DISTRACTORS),
            source,
        )


def _row(calibration: Calibration) -> dict:
    return {
        "embedding_model": calibration.embedding_model,
        **calibration.gates,
        "calibration_hash": calibration.calibration_hash,
        **calibration.cosines,
        "source": calibration.source,
        "created_at": calibration.created_at,
    }


def _from_row(row: dict) -> Calibration:
    return Calibration(
        row["embedding_model"],
        {name: row[name] for name in GATES},
        row["calibration_hash"],
        row["source"],
        row["created_at"],
        {name: list(row[name]) for name in ("paraphrase", "question_fact", "distractor")},
    )


_COLUMNS = ", ".join(
    ("embedding_model", *GATES, "calibration_hash", "paraphrase", "question_fact", "distractor", "source", "created_at")
)


def publish(calibration: Calibration) -> None:
    clickhouse.insert("embedder_calibration", [_row(calibration)])


def stored(model: str) -> Calibration | None:
    """The model's cluster calibration: its newest row."""
    rows = clickhouse.query(
        f"SELECT {_COLUMNS} FROM embedder_calibration WHERE embedding_model = {{model:String}} "
        "ORDER BY created_at DESC LIMIT 1",
        {"model": model},
    )
    return _from_row(rows[0]) if rows else None


def recalibrate(embedder) -> tuple[Calibration, Calibration | None, float]:
    """Probe now and publish as the cluster calibration: (new, previous, largest gate drift)."""
    previous = stored(embedder.model_name)
    fresh = probe(embedder, "recalibrate")
    publish(fresh)
    drift = max((abs(fresh.gates[n] - previous.gates[n]) for n in GATES), default=0.0) if previous else 0.0
    if drift >= DRIFT_WARNING:
        log.warning("recalibration of %s moved a gate by %.3f (>= %.2f)", embedder.model_name, drift, DRIFT_WARNING)
    return fresh, previous, drift


def keep_pairs(org: str, namespace: str, similar, distractors, paraphrases=()) -> None:
    """The pairs of a namespace's calibration.run, for the recalibration worker to probe again."""
    row = {"similar": similar, "distractors": distractors, "paraphrases": paraphrases}
    row = {name: [list(pair) for pair in pairs] for name, pairs in row.items()}
    clickhouse.insert(
        "namespace_calibration_pairs", [{"org": org, "namespace": namespace, **row, "created_at": datetime.now(UTC)}]
    )


# The spec's least corpus a namespace's calibration is probed again from.
REPROBE_MIN_SIMILAR, REPROBE_MIN_DISTRACTORS = 5, 3
ACTOR = "process:recalibration"


def reprobe_namespaces(embedder) -> tuple[int, int]:
    """Probe every namespace's kept pairs again with the live embedder and publish each namespace's gates:
    (namespaces probed, namespaces held because their org's model calls are off or refused)."""
    rows = clickhouse.query(
        """
        SELECT org, namespace, similar, distractors, paraphrases FROM namespace_calibration_pairs FINAL
        WHERE length(similar) >= {similar:UInt32} AND length(distractors) >= {distractors:UInt32}
        ORDER BY org, namespace
        """,
        {"similar": REPROBE_MIN_SIMILAR, "distractors": REPROBE_MIN_DISTRACTORS},
        every_org=True,  # the weekly recalibration probes every org's namespaces
    )
    probed = held = 0
    for row in rows:
        org, namespace = row.pop("org"), row.pop("namespace")
        try:
            with costs.accounted(org, namespace, "recalibrate", ACTOR):
                calibrate_namespace(org, namespace, embedder, **row, source="recalibrate")
            probed += 1
        except customer.HOLDS as exc:  # the org's calls are off or refused: its gates stay as they are
            log.warning("recalibration holds %s/%s: %s", org, namespace, exc)
            held += 1
    return probed, held


def calibrate_namespace(
    org: str, namespace: str, embedder, similar, distractors, paraphrases=(), source: str = "calibration.run"
) -> Calibration:
    """A namespace's calibration from its own labelled pairs, deriving only the gates they support.

    `similar` pairs (a question and the fact that answers it) set the trigger gates, `distractors` the floor and
    abstain gates; only `paraphrases` (two wordings of one fact) set the write gates. A question and its answer
    are no paraphrase: their cosines would put the duplicate gate where two distinct facts of one template clear
    it (the Enterprise, Growth and Starter SLA lines stored as copies of one another). Gates the pairs do not
    support stay with the cluster calibration (`thresholds`).
    """
    with customer.for_org(org, namespace, feature="calibration.run"):
        similar_cos, distractor_cos = cosines(embedder, similar), cosines(embedder, distractors)
        paraphrase_cos = cosines(embedder, list(paraphrases)) if paraphrases else []
    calibration = build(embedder.model_name, paraphrase_cos, similar_cos, distractor_cos, source)
    clickhouse.insert("namespace_calibration_result", [{"org": org, "namespace": namespace, **_row(calibration)}])
    return calibration


def namespace_stored(org: str, namespace: str, model: str) -> Calibration | None:
    rows = clickhouse.query(
        f"""
        SELECT {_COLUMNS} FROM namespace_calibration_result
        WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND embedding_model = {{model:String}}
        ORDER BY created_at DESC LIMIT 1
        """,
        {"org": org, "namespace": namespace, "model": model},
    )
    return _from_row(rows[0]) if rows else None


def as_dict(calibration: Calibration) -> dict:
    return asdict(calibration)
