"""Fusion: each search_mode's relevance, the score the rank terms are added to.

Returns the scale rank terms are added at: 1 for modes whose relevance lives
in [0, 1]; for rrf, whose scores sum reciprocal ranks (about 0.03), a term of
t counts as t times a rank-1 hit of one order, so the terms stay bounded
against relevance in every mode.
"""

from retrieval import knobs
from retrieval.search.plan import Plan
from retrieval.search.pool import Candidate


def fuse(candidates: list[Candidate], plan: Plan) -> float:
    mode = plan.mode
    for c in candidates:
        s = c.signals
        c.components["similarity"] = c.similarity
        for fallback in ("rewrite_similarity", "hyde_similarity", "retry_similarity"):  # a fallback round found it:
            if fallback in s:  # its cosine counts toward similarity
                c.components[fallback] = s[fallback]
        if mode == "semantic":
            c.relevance = c.similarity
        elif mode == "hybrid":
            c.relevance = plan.alpha * s.get("lexical", 0) + (1 - plan.alpha) * c.similarity
            c.components["lexical"] = s.get("lexical", 0)
        elif mode == "lexical":
            c.relevance = s.get("lexical", 0)
            c.components["lexical"] = s.get("lexical", 0)
        elif mode == "graph":
            graph = knobs.GRAPH_ENTITY * s.get("entity", 0) + knobs.GRAPH_HOP * s.get("graph_hop", 0)
            graph += knobs.GRAPH_TRIPLE * s.get("graph_triple", 0)
            c.relevance = c.similarity + graph
            c.components.update(graph=graph, graph_hop=s.get("graph_hop", 0), graph_triple=s.get("graph_triple", 0))
        elif mode == "temporal":
            c.relevance = c.similarity + knobs.TEMPORAL_CLOSENESS * s.get("temporal", 0)
            c.components["temporal"] = s.get("temporal", 0)
        elif mode == "related":
            c.relevance = s.get("related", 0) + knobs.TIE * c.similarity
            c.components["related"] = s.get("related", 0)
    if mode == "bm25_hybrid":
        top = max((c.signals.get("bm25", 0) for c in candidates), default=0) or 1
        for c in candidates:
            bm25 = c.signals.get("bm25", 0) / top
            c.relevance = plan.alpha * bm25 + (1 - plan.alpha) * c.similarity
            c.components["bm25"] = bm25
    if mode == "lexical":
        top = max((c.signals.get("bm25", 0) for c in candidates), default=0) or 1
        for c in candidates:
            c.relevance += knobs.TIE * c.signals.get("bm25", 0) / top
    if mode == "rrf":
        _rrf(candidates, plan.lexical_weight)
        return 1 / (knobs.RRF_K + 1)
    return 1.0


def _rrf(candidates: list[Candidate], lexical_weight: float) -> None:
    """1/(k + rank) over the semantic and lexical orders; ties in one order break by the other, then by name."""
    semantic = sorted(candidates, key=lambda c: (-c.similarity, -c.signals.get("lexical", 0), c.id))
    lexical = sorted(
        (c for c in candidates if c.signals.get("lexical", 0) > 0 or c.signals.get("bm25", 0) > 0),
        key=lambda c: (-c.signals.get("lexical", 0), -c.signals.get("bm25", 0), -c.similarity, c.id),
    )
    for c in candidates:
        c.relevance = 0.0
    for rank, c in enumerate(semantic, 1):
        c.relevance += 1 / (knobs.RRF_K + rank)
        c.components["semantic_rank"] = rank
    for rank, c in enumerate(lexical, 1):
        c.relevance += lexical_weight / (knobs.RRF_K + rank)
        c.components["lexical_rank"] = rank
    for c in candidates:
        c.components.update(
            rrf_score=c.relevance,
            rrf_weight_semantic=1.0,
            rrf_weight_lexical=lexical_weight,
            lexical=c.signals.get("lexical", 0),
        )
