"""The verdict a search passes on its own result: hits, or abstain with a code.

The gates read the best cosine of the pool (LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE=pool,
the default here), or rank 1 of the fused order (`rank1`, the spec's), or the best
cosine served (`window`). retrieval_confidence blends how far the top cosine
clears the abstain gate (toward the rerank-skip gate, where a hit is plainly on
topic) with how far it stands out of the JUDGED_POOL most similar rows: a flat
pool is noise, however high its top. Those rows are the same whatever `top_k`
asks for (every pool holds at least the vector leg's knobs.POOL_MIN
best), so under `pool` the verdict does not move with the window's size; rank 1
can (a wider pool brings other rows into fusion).

Names known, fact absent: a question whose content words no memory holds (at least
knobs.CONTENT_ABSENT_WORDS of them, mentions.Check.words_absent) while its nearest rows are
a weak pass abstains `content_absent`; a single such word only raises retrieval_risk.
"""

import statistics
from dataclasses import dataclass

from django.conf import settings

from retrieval import knobs
from retrieval.gates.thresholds import Gates
from retrieval.search.mentions import Check
from retrieval.search.pool import Candidate

RISKS = ("low", "medium", "high")


@dataclass
class Verdict:
    abstain: bool
    code: str | None
    reason: str | None
    confidence: float
    risk: str  # low | medium | high | abstain
    top_similarity: float | None


def judge(
    ranked: list[Candidate],
    window: list[Candidate],
    gates: Gates,
    missing_entities: list[str],
    names: Check | None = None,
    cosine: bool = True,
) -> Verdict:
    """`cosine=False`: the query has no vector (model calls off), so lexical hits stand, at high risk."""
    if missing_entities:
        return Verdict(True, "entity_absent", f"no memory mentions {', '.join(missing_entities)}", 0.0, "abstain", None)
    if not ranked or not window:
        return Verdict(True, "no_match", "nothing in scope matched the query", 0.0, "abstain", None)
    if "exact" in window[0].signals:  # a row holds the identifier the question names, as written
        return Verdict(False, None, None, 1.0, "low", window[0].similarity)
    if names is not None and names.absent:
        said = ", ".join(names.names)
        return Verdict(
            True, "entity_absent", f"the question is about {said}: no memory mentions it", 0.0, "abstain", None
        )
    if not cosine:
        return Verdict(False, None, None, 0.0, "high", None)
    judged = sorted((c.similarity for c in ranked), reverse=True)[: min(knobs.JUDGED_POOL, knobs.POOL_MIN)]
    scope = settings.LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE
    if scope == "window":
        top = max(c.similarity for c in window)
    elif scope == "rank1":
        top = ranked[0].similarity
    else:  # pool
        top = judged[0]
    confidence = _confidence(top, judged, gates)
    if top < gates.abstain:
        reason = f"the best hit's similarity {top:.3f} is under the abstain threshold {gates.abstain:.3f}"
        return Verdict(True, "below_threshold", reason, confidence, "abstain", top)
    absent = names.words_absent if names is not None else []
    if len(absent) >= knobs.CONTENT_ABSENT_WORDS and top < gates.query_rewrite:
        reason = (
            f"the question asks about {', '.join(absent)}: no memory holds them, and the best hit's similarity "
            f"{top:.3f} is under the weak-pass gate {gates.query_rewrite:.3f}"
        )
        return Verdict(True, "content_absent", reason, confidence, "abstain", top)
    if confidence < settings.LOOM_MEMORY_SEARCH_MIN_CONFIDENCE:
        reason = (
            f"the best hit ({top:.3f}) does not stand out of the pool: calibrated confidence {confidence:.3f} "
            f"is under {settings.LOOM_MEMORY_SEARCH_MIN_CONFIDENCE:.3f}"
        )
        return Verdict(True, "low_calibrated_confidence", reason, confidence, "abstain", top)
    grade = 0 if confidence >= knobs.RISK_LOW else 1 if confidence >= knobs.RISK_MEDIUM else 2
    risk = RISKS[min(grade + bool(absent), 2)]  # a word the question asks about that no memory holds: a grade worse
    return Verdict(False, None, None, confidence, risk, top)


def _confidence(top: float, judged: list[float], gates: Gates) -> float:
    span = max(gates.rerank_skip - gates.abstain, 1e-6)
    level = min(1.0, max(0.0, (top - gates.abstain) / span))
    median = statistics.median(judged)
    separation = min(1.0, max(0.0, (top - median) / knobs.SEPARATION_SPAN)) if len(judged) > 1 else 1.0
    return round(0.5 * level + 0.5 * separation, 4)
