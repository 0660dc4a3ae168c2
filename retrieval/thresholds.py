"""The one place search gates come from.

Tiers, most specific first: a namespace's own calibration, the cluster
calibration of the live embedder, the scalar settings. Until a calibration
exists (always, with a fake embedder) the scalar tier is in force.
"""

from dataclasses import asdict, dataclass

from django.conf import settings


@dataclass(frozen=True)
class Gates:
    tier: str  # namespace | cluster | scalar
    min_similarity: float  # the similarity floor (noise floor)
    abstain: float
    query_rewrite: float
    hyde_fallback: float
    rerank_skip: float
    calibration_hash: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def resolve(org: str, namespace: str, embedding_model: str) -> Gates:
    return Gates(
        tier="scalar",
        min_similarity=settings.LOOM_MEMORY_SEARCH_MIN_SIMILARITY,
        abstain=settings.LOOM_MEMORY_SEARCH_ABSTAIN_THRESHOLD,
        query_rewrite=settings.LOOM_MEMORY_SEARCH_QUERY_REWRITE_THRESHOLD,
        hyde_fallback=settings.LOOM_MEMORY_SEARCH_HYDE_FALLBACK_THRESHOLD,
        rerank_skip=settings.LOOM_LLM_RERANK_SKIP_ABOVE,
    )
