"""The lexical legs' postings from the vector mirror, for a search it answers: what memory_terms and corpus_stats
say of the namespaces' live rows, read with no statement (and the entity leg's: what entity_mentions says).

Why: each lexical leg's statement cost a hybrid search far more than numpy over the mirror's postings, most of it
the engine's own overhead per statement (docs/benchmarks.md). The legs keep
their SQL for every search the mirror does not answer (filters, another status, a namespace not loaded) and score
both ways alike: the same statistics, the same rows (every live row, reflections and duplicates too, which the
rescore drops as before), the same order (score, then name).
"""

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from retrieval.index import Postings
from retrieval.search.legs import Context
from retrieval.search.legs.vector import mirrored
from retrieval.store.rows import RowId


def read(ctx: Context, terms: list[str], field: str) -> list[Postings] | None:
    """Each searched namespace's postings of these terms (`field` "value", or "any": value or key); None when the
    mirrors cannot answer this search."""
    mirrors = mirrored(ctx)
    if mirrors is None:
        return None
    held = [mirror.postings(terms, field) for mirror in mirrors]
    return None if any(postings is None for postings in held) else held


def document_frequency(held: list[Postings]) -> Counter:
    """How many live rows of all the namespaces hold each term."""
    found = Counter()
    for postings in held:
        for term, (rows, _, _) in postings.terms.items():
            found[term] += len(rows)
    return found


def best(held: list[Postings], weigh: Callable, pool: int) -> list[tuple[RowId, float]]:
    """Each row's score, the sum of `weigh(term, tf, value_length)` over the terms it holds; the `pool` best, ties
    by name, as the SQL legs' `ORDER BY score DESC, <name> LIMIT pool` keeps them."""
    owners, positions, scores = [], [], []
    for owner, postings in enumerate(held):
        if not postings.terms:
            continue
        summed = _summed(postings, weigh)
        present = np.flatnonzero(summed.held)
        owners.append(np.full(len(present), owner))
        positions.append(present)
        scores.append(summed.scores[present])
    if not scores:
        return []
    owners, positions, scores = np.concatenate(owners), np.concatenate(positions), np.concatenate(scores)
    kept = np.arange(len(scores))
    if len(scores) > pool:  # every row tied with the pool's last is kept, for the names to order
        kept = np.flatnonzero(scores >= np.partition(scores, len(scores) - pool)[len(scores) - pool])
    # Ties are many (rows holding the same words score alike: ~500 rows kept for a pool of 50 at 1,000 rows), so
    # they are ordered as plain tuples compared in C, no Python key per row: (-score, memory_key, RowId) orders as
    # name_order does (a RowId is namespace, memory_key, agent, session_id, version).
    ids = [held[owner].ids[at] for owner, at in zip(owners[kept].tolist(), positions[kept].tolist())]
    ranked = zip((-scores[kept]).tolist(), [rid.memory_key for rid in ids], ids)
    # A sort is C all through: twice as fast as the heap's Python loop until the ties are some times the pool.
    ordered = sorted(ranked)[:pool] if len(ids) <= 4 * pool else heapq.nsmallest(pool, ranked)
    return [(rid, -negated) for negated, _, rid in ordered]


def scored(held: list[Postings], weigh: Callable, ids: list[RowId]) -> list[tuple[RowId, float]]:
    """The score `best` gives each of these rows that holds some of the terms, whether or not it made the cut; in
    `best`'s order."""
    found = []
    for postings in held:
        if not postings.terms:
            continue
        summed = _summed(postings, weigh)
        for rid in ids:
            at = postings.position.get(rid)
            if at is not None and at < len(summed.held) and summed.held[at]:
                found.append((-float(summed.scores[at]), rid.memory_key, rid))
    return [(rid, -negated) for negated, _, rid in sorted(found)]


@dataclass
class _Summed:
    held: np.ndarray  # by position: how many of the terms the row holds
    scores: np.ndarray  # by position: the sum of their weights


def _summed(postings: Postings, weigh: Callable) -> _Summed:
    rows = np.concatenate([rows for rows, _, _ in postings.terms.values()])
    shares = np.concatenate([weigh(term, tf, length) for term, (_, tf, length) in postings.terms.items()])
    # Summed by position, in one pass over the namespace's positions (no sort of the postings).
    return _Summed(np.bincount(rows), np.bincount(rows, weights=shares))
