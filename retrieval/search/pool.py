"""The candidate pool a search fuses: row identities and what each leg said about them."""

from dataclasses import dataclass, field

from retrieval.store.rows import RowId

# The signals that are cosines to the query: value, key and chunk vectors, the fallback's rewritten queries, HyDE
# answer and judged retry when they ran, a session digest's own vector.
COSINES = frozenset(
    (
        "value_similarity",
        "key_similarity",
        "chunk_similarity",
        "hyde_similarity",
        "rewrite_similarity",
        "retry_similarity",
        "summary_similarity",
    )
)


def _similarity(signals: dict[str, float]) -> float:
    best = 0.0
    for name, value in signals.items():  # (a row's few signals, not every cosine name: a search adds ~200)
        if name in COSINES and value > best:
            best = value
    return min(1.0, best)


@dataclass(slots=True)
class Candidate:
    id: RowId
    signals: dict[str, float] = field(default_factory=dict)  # each leg's raw output, written through Pool.add
    chunk: dict | None = None  # the best passage, when the chunk leg found one
    meta: dict | None = None  # the row's filter and rank columns, from its vector row
    row: dict | None = None  # the memory row, hydrated for the served window only
    components: dict[str, float] = field(default_factory=dict)
    relevance: float = 0.0  # the fused score, before rank terms
    score: float = 0.0  # what the window is sorted by
    below_threshold: bool = False
    sources: tuple[str, ...] = ()  # an extracted fact's turns (its source_keys): one piece of evidence with them
    contradicts: tuple[str, ...] = ()  # the keys the conflict resolver found this version contradicted by
    # Cosine to the query in [0, 1], the best of the COSINES signals. Kept as they arrive, not recomputed per read:
    # fusion, ranking, the window and the abstain judge read it several times for each of a hundred candidates.
    similarity: float = field(init=False, default=0.0)

    def __post_init__(self):
        if self.signals:  # (the pool's candidates start with none: a page's parked ones bring theirs)
            self.similarity = _similarity(self.signals)

    @property
    def fact_similarity(self) -> float:
        return max(self.signals.get("value_similarity", 0.0), self.signals.get("key_similarity", 0.0))

    @property
    def source(self) -> str:
        if "summary_similarity" in self.signals:
            return "summary"  # a session digest (retrieval/search/legs/digests.py)
        return "chunk" if self.signals.get("chunk_similarity", 0.0) > self.fact_similarity else "fact"


class Pool(dict):
    """RowId -> Candidate; a signal reported twice keeps its best value."""

    def add(self, row_id: RowId, signals: dict[str, float], chunk: dict | None = None, meta: dict | None = None):
        candidate = self.get(row_id)
        if candidate is None:  # most adds: a row one leg found
            self[row_id] = candidate = Candidate(row_id, dict(signals), chunk, meta)
            return candidate
        if meta is not None:
            candidate.meta = meta
        for name, value in signals.items():
            candidate.signals[name] = max(value, candidate.signals.get(name, value))
            if name in COSINES:
                candidate.similarity = min(1.0, max(candidate.similarity, value))
        if chunk is not None and signals.get("chunk_similarity", 0) >= candidate.signals.get("chunk_similarity", 0):
            candidate.chunk = chunk
        return candidate
