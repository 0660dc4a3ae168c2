"""Shaping the served window from the ranked pool.

Hidden rows never reach the pool (the legs filter on status); here: at most
LOOM_MEMORY_SEARCH_PER_KEY_CAP rows per key (none for a count or a date difference), a turn and its extracted facts
once, the similarity floor with its floor_mode, chunk_max_share, at most DIGEST_MAX_HITS session digests, and the cut
at top_k.
"""

import math

from retrieval import knobs
from retrieval.search.plan import Plan
from retrieval.search.pool import Candidate


def shape(ranked: list[Candidate], plan: Plan, floor: float) -> list[Candidate]:
    """The window in serving order: confident rows, then (readmit, ids_only) those under the floor."""
    capped = _one_per_evidence(_per_key(ranked, plan.per_key_cap))
    # A row holding the identifier the query names is confident whatever its cosine (legs/exact.py).
    confident = [c for c in capped if c.similarity >= floor or "exact" in c.signals]
    weak = [c for c in capped if c.similarity < floor and "exact" not in c.signals]
    for c in weak:
        c.below_threshold = True
    ordered = confident + ([] if plan.floor_mode == "drop" else weak)
    return _cut(ordered, plan.top_k, plan.chunk_max_share)


def _per_key(ranked: list[Candidate], cap: int) -> list[Candidate]:
    if cap <= 0:
        return ranked
    seen: dict[tuple[str, str], int] = {}
    kept = []
    for c in ranked:
        key = (c.id.namespace, c.id.memory_key)
        if seen.get(key, 0) < cap:
            seen[key] = seen.get(key, 0) + 1
            kept.append(c)
    return kept


def _one_per_evidence(ranked: list[Candidate]) -> list[Candidate]:
    """One hit per conversation turn: a fact extracted from turns says what they said, so the best ranked of a turn
    and its facts stands for them all. A turn under a fact that names it is left out (the hit's `source_keys`
    name it, and memory.recall reads it); a fact whose turns are all stood for already is left out."""
    covered: set[tuple[str, str]] = set()  # the keys kept rows stand for: their own, or a fact's turns
    named: set[tuple[str, str]] = set()  # the turns kept facts stand for
    kept = []
    for c in ranked:
        key = (c.id.namespace, c.id.memory_key)
        turns = {(c.id.namespace, turn) for turn in c.sources}
        if (turns and turns <= covered) or (not turns and key in named):
            continue
        covered |= turns or {key}
        named |= turns
        kept.append(c)
    return kept


def _cut(ordered: list[Candidate], top_k: int, chunk_max_share: float) -> list[Candidate]:
    slots = {"chunk": math.ceil(chunk_max_share * top_k), "summary": knobs.DIGEST_MAX_HITS}
    window = []
    for c in ordered:
        if len(window) == top_k:
            break
        if c.source in slots:
            if slots[c.source] == 0:
                continue
            slots[c.source] -= 1
        window.append(c)
    return window
