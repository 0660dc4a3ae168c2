"""From a search request to a plan: the mode, the legs, the pool and every knob in force.

Precedence, per field: the request, then its recipe (filling only what the
request left unset), then the namespace's `retrieval_defaults`, then the
deployment default. On top, the planner's shape rule: an identifier in the
query takes the lexical fusion (`rrf`) unless the request or its recipe chose
a mode.
"""

from dataclasses import dataclass, field, fields
from datetime import date, datetime

from django.conf import settings

from retrieval import knobs, options
from retrieval.language.query import QueryShape

# Each mode's legs beyond the fact vectors and chunks, which every mode runs.
MODE_LEGS = {
    "semantic": set(),
    "rrf": {"lexical", "bm25"},
    "hybrid": {"lexical", "bm25"},
    "bm25_hybrid": {"lexical", "bm25"},
    "lexical": {"lexical", "bm25"},
    "graph": {"graph"},
    "temporal": {"temporal"},
    "related": {"related"},
}

DEFAULTS = {
    "top_k": 5,
    "retrieval_budget": "standard",
    "unmatched": True,
    "extra_candidates": 0,
    "bodies": "excerpt",
    "floor_mode": "readmit",
    "chunk_max_share": 1.0,
    "confidence_weight": 0.1,
}


@dataclass
class SearchRequest:
    """A memory.search as the caller sent it; None means 'not set'."""

    query: str = ""
    top_k: int | None = None
    search_mode: str | None = None
    recipe: str | None = None
    retrieval_budget: str | None = None
    alpha: float | None = None
    hyde: bool | None = None
    agent: str = "*"
    memory_type: str | None = None
    tags: list[str] = field(default_factory=list)
    tags_soft: list[str] = field(default_factory=list)
    category: str | None = None
    category_soft: str | None = None
    demote_tags: list[str] = field(default_factory=list)
    entity_filter: list[str] = field(default_factory=list)
    user_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    read_scope: str | None = None
    namespace_scope: str | None = None
    exclude_keys: list[str] = field(default_factory=list)
    include_duplicates: bool = False
    include_superseded: bool = False
    include_proposed: bool = False
    as_of: datetime | None = None
    as_of_basis: str = "valid_time"
    observation_date: date | None = None
    bodies: str | None = None
    body_budget_tokens: int | None = None
    min_similarity: float | None = None
    floor_mode: str | None = None
    explain: bool = False
    render: str | None = None  # "reader": the hits as one text block too (reader_block)
    paging: bool = False
    page: str | None = None
    personalization: str = "default"
    confidence_weight: float | None = None
    recency_pool_weight: float | None = None
    reinforcement_weight: float | None = None
    chunk_max_share: float | None = None
    rerank: str | None = None
    context: str = ""  # memory.ask: the conversation's latest user turn, searched with the query, never logged
    planes: frozenset[str] = frozenset({"memory", "session"})  # search.query's may add entity and record (planes.py)

    @property
    def searched(self) -> str:
        """What the legs look for: the query, after the context that says what it refers to."""
        return f"{self.context}\n{self.query}" if self.context else self.query

    @classmethod
    def of(cls, data: dict) -> "SearchRequest":
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True)
class Plan:
    """Everything a search runs by, decided once by `resolve` (a stage that must change it makes a new one)."""

    mode: str
    mode_source: str  # request | recipe | namespace | default | planner
    recipe: str | None
    budget: str
    top_k: int
    pool_size: int
    alpha: float
    hyde: bool  # asked for (request, recipe or namespace): HyDE runs whenever the pass is weak, always under deep
    fallback: bool  # the weak-pass fallback may spend LLM calls (retrieval/search/fallback.py)
    per_key_cap: int  # rows of one key in a window (0: no cap); a count or a date difference is exempt
    unmatched: bool  # whether legs other than the vectors may add candidates
    lexical_weight: float  # rrf's weight on the lexical order
    legs: frozenset[str]
    bodies: str
    body_budget_tokens: int | None
    min_similarity: float | None  # None: the resolver's floor
    floor_mode: str
    chunk_max_share: float
    confidence_weight: float
    recency_pool_weight: float
    digest_descent: float  # the session_digest term's weight (the namespace's retrieval_defaults, else knobs)
    reinforcement_weight: float
    rerank: str | None
    notes: tuple[str, ...] = ()


def resolve(request: SearchRequest, namespace_defaults: dict, shape: QueryShape, rerank_endpoint: str = "") -> Plan:
    recipe = options.RECIPES.get(request.recipe or "", {})

    def pick(name: str, fallback=None):
        for source in (getattr(request, name, None), recipe.get(name), namespace_defaults.get(name)):
            if source is not None:
                return source
        return DEFAULTS.get(name, fallback)

    notes = []
    if request.search_mode:
        mode, source = request.search_mode, "request"
    elif "search_mode" in recipe:
        mode, source = recipe["search_mode"], "recipe"
    elif namespace_defaults.get("search_mode"):
        mode, source = namespace_defaults["search_mode"], "namespace"
    else:
        mode, source = settings.LOOM_MEMORY_SEARCH_DEFAULT_MODE, "default"
    if source in ("namespace", "default") and shape.identifiers and mode == "semantic":
        mode, source = "rrf", "planner"
        notes.append(f"identifier {shape.identifiers[0]!r} in the query: lexical fusion (rrf)")

    budget = pick("retrieval_budget")
    top_k = pick("top_k")
    legs = set(MODE_LEGS[mode]) | {"vector", "chunks"}
    if budget != "fast" or request.entity_filter:
        legs.add("entity")
    if budget == "deep":
        legs.add("graph")
    if shape.date is not None:  # a dated question reads that date's rows in every mode
        legs.add("temporal")
    legs.add("digests")  # no statement where a namespace has no digest
    if shape.identifiers:  # the row holding it as written is served first in every mode
        legs.add("exact")
    unmatched = pick("unmatched")
    if not unmatched:
        legs &= {"vector"}
    rerank = _reranker(request.rerank, rerank_endpoint, budget, notes)
    multiplier = (
        settings.LOOM_MEMORY_SEARCH_POOL_MULTIPLIER_RERANK if rerank else settings.LOOM_MEMORY_SEARCH_POOL_MULTIPLIER
    )
    multiplier *= 2 if budget == "deep" else 1
    pool = max(top_k * multiplier, knobs.POOL_MIN) + pick("extra_candidates")
    if request.paging:
        pool = max(pool, settings.LOOM_MEMORY_SEARCH_PAGING_POOL)
    hyde = pick("hyde")
    calls_llm = budget != "fast" and not settings.LOOM_READS_LLM_FREE
    return Plan(
        mode=mode,
        mode_source=source,
        recipe=request.recipe,
        budget=budget,
        top_k=top_k,
        pool_size=pool,
        alpha=pick("alpha", settings.LOOM_MEMORY_SEARCH_DEFAULT_ALPHA),
        hyde=hyde is True and calls_llm,
        fallback=hyde is not False and calls_llm,  # hyde=false forces the raw query
        per_key_cap=0 if shape.intent in ("count", "sum", "temporal_diff") else settings.LOOM_MEMORY_SEARCH_PER_KEY_CAP,
        unmatched=unmatched,
        lexical_weight=knobs.RRF_PATH_LEXICAL_WEIGHT if shape.path_shaped else 1.0,
        legs=frozenset(legs),
        bodies=pick("bodies"),
        body_budget_tokens=request.body_budget_tokens,
        min_similarity=pick("min_similarity"),
        floor_mode=pick("floor_mode"),
        chunk_max_share=pick("chunk_max_share"),
        confidence_weight=pick("confidence_weight"),
        recency_pool_weight=pick("recency_pool_weight", settings.LOOM_MEMORY_SEARCH_RECENCY_POOL_WEIGHT),
        digest_descent=pick("digest_descent", knobs.DIGEST_DESCENT),
        reinforcement_weight=pick("reinforcement_weight", settings.LOOM_MEMORY_SEARCH_REINFORCEMENT_WEIGHT),
        rerank=rerank,
        notes=tuple(notes),
    )


def _reranker(asked: str | None, namespace_endpoint: str, budget: str, notes: list[str]) -> str | None:
    """The reranker a search runs. "none" turns off the namespace's too. An LLM-free read runs only the one the
    request names; neither it nor a fast one makes builtin:openai's LLM call."""
    if asked == "none":
        return None
    name = asked or (namespace_endpoint if not settings.LOOM_READS_LLM_FREE else "") or None
    if name and name.startswith("builtin:openai") and (budget == "fast" or settings.LOOM_READS_LLM_FREE):
        notes.append(f"rerank {name} not run: a {'fast' if budget == 'fast' else 'LLM-free'} read makes no LLM call")
        return None
    return name
