"""The verdict a search passes on its own result: hits, or abstain with a code.

The gates read the fused order: rank 1 of the ranked pool (or, with
LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE=window, the best cosine served).
retrieval_confidence blends how far the top cosine clears the abstain gate
(toward the rerank-skip gate, where a hit is plainly on topic) with how far it
stands out of the pool: a flat pool is noise, however high its top.
"""

import statistics
from dataclasses import dataclass

from django.conf import settings

from retrieval.pool import Candidate
from retrieval.thresholds import Gates

# The lead over the pool's median cosine that counts as fully separated.
SEPARATION_SPAN = 0.15


@dataclass
class Verdict:
    abstain: bool
    code: str | None
    reason: str | None
    confidence: float
    risk: str  # low | medium | high | abstain
    top_similarity: float | None


def judge(ranked: list[Candidate], window: list[Candidate], gates: Gates, missing_entities: list[str],
          cosine: bool = True) -> Verdict:  # fmt: skip
    """`cosine=False`: the query has no vector (model calls off), so lexical hits stand, at high risk."""
    if missing_entities:
        names = ", ".join(missing_entities)
        return Verdict(True, "entity_absent", f"no memory mentions {names}", 0.0, "abstain", None)
    if not ranked or not window:
        return Verdict(True, "no_match", "nothing in scope matched the query", 0.0, "abstain", None)
    if not cosine:
        return Verdict(False, None, None, 0.0, "high", None)
    if settings.LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE == "window":
        top = max(c.similarity for c in window)
    else:
        top = ranked[0].similarity
    confidence = _confidence(top, ranked, gates)
    if top < gates.abstain:
        reason = f"the best hit's similarity {top:.3f} is under the abstain threshold {gates.abstain:.3f}"
        return Verdict(True, "below_threshold", reason, confidence, "abstain", top)
    if confidence < settings.LOOM_MEMORY_SEARCH_MIN_CONFIDENCE:
        reason = (
            f"the best hit ({top:.3f}) does not stand out of the pool: calibrated confidence {confidence:.3f} "
            f"is under {settings.LOOM_MEMORY_SEARCH_MIN_CONFIDENCE:.3f}"
        )
        return Verdict(True, "low_calibrated_confidence", reason, confidence, "abstain", top)
    risk = "low" if confidence >= 0.66 else "medium" if confidence >= 0.33 else "high"
    return Verdict(False, None, None, confidence, risk, top)


def _confidence(top: float, ranked: list[Candidate], gates: Gates) -> float:
    span = max(gates.rerank_skip - gates.abstain, 1e-6)
    level = min(1.0, max(0.0, (top - gates.abstain) / span))
    median = statistics.median(c.similarity for c in ranked)
    separation = min(1.0, max(0.0, (top - median) / SEPARATION_SPAN)) if len(ranked) > 1 else 1.0
    return round(0.5 * level + 0.5 * separation, 4)
