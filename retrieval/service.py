"""search(): the one entry point REST and the Recall Lab both call.

plan -> embed -> legs -> rescore and hydrate -> fuse -> rank terms -> window
-> verdict -> hits. Each stage is timed; a failing leg is named in
`degraded` and the search goes on.
"""

import logging
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings

from retrieval import (
    abstain,
    clickhouse,
    eligibility,
    fusion,
    names,
    namespaces,
    paging,
    rank,
    rerank,
    spelling,
    thresholds,
    trace,
    usage,
    vector_mirror,
    window,
)
from retrieval import query as query_text
from retrieval.errors import Refusal
from retrieval.legs import Context
from retrieval.legs import entity as entity_leg
from retrieval.legs import run as run_legs
from retrieval.legs.vector import rescore
from retrieval.plan import Plan, SearchRequest, resolve
from retrieval.pool import Candidate, Pool, row_id
from retrieval.providers import customer, remote
from retrieval.providers.embedders import get_embedder
from retrieval.providers.llm import get_llm
from retrieval.thresholds import Gates
from tenancy.access import Scope

log = logging.getLogger(__name__)

EXCERPT_CHARS = 320
READ_SCOPE_ORDER = {"": 0, "own_user": 1, "own_session": 2}
# The components a hit always carries, and those it carries when they are not zero;
# explain=true adds every other.
ALWAYS_COMPONENTS = ("similarity", "relevance", "rank_score")
MAIN_COMPONENTS = ("entity_boost", "prior", "reinforcement", "foreign", "demoted", "sensitivity_demotion")


@dataclass
class SearchResult:
    hits: list[dict]
    abstain: bool
    abstain_code: str | None
    abstain_reason: str | None
    retrieval_confidence: float
    retrieval_risk: str
    candidates_total: int
    namespaces_searched: list[str]
    namespaces_skipped: list[str] = field(default_factory=list)
    pending_extraction: int = 0
    degraded: list[str] = field(default_factory=list)
    next: str | None = None
    search_mode: str = ""
    mode_source: str = ""
    recipe: str | None = None
    retrieval_budget: str = ""
    thresholds: dict = field(default_factory=dict)
    query_entities: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)
    trace_id: str = ""
    retrieval_work: dict = field(default_factory=dict)  # query_spellings, query_spellings_skipped
    reader_block: str | None = None  # render="reader": the hits as one text block


class _Clock:
    def __init__(self):
        self.started = self.last = time.perf_counter()
        self.stages: dict[str, float] = {}

    def lap(self, stage: str):
        now = time.perf_counter()
        self.stages[stage] = round((now - self.last) * 1000, 3)
        self.last = now

    @property
    def total_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


@dataclass
class _Prepared:
    ctx: Context
    gates: Gates
    floor: float
    missing_entities: list[str]  # entity_filter entities, when none of them is in memory
    names: names.Check  # the names the query is about, and those memory mentions
    skipped: list[str]
    config: namespaces.NamespaceConfig
    degraded: list[str]  # what the search could not run, known before the legs
    cosine: bool  # False when the query could not be embedded: no similarity to judge by
    work: spelling.Work  # what query spelling did


def search(scope: Scope, request: SearchRequest, op: str = "memory.search", run_id: str = "") -> SearchResult:
    clock = _Clock()
    if request.page:
        result = paging.serve(scope, request.page, clock)
        return _finish(scope, request, result, op, run_id, clock, text_capture=False)
    prepared = _prepare(scope, request, clock)
    ctx, degraded = prepared.ctx, list(prepared.degraded)
    pool = Pool()
    run_legs(ctx, pool, degraded, clock.stages)
    clock.last = time.perf_counter()
    candidates = _complete(ctx, pool)
    clock.lap("rescore")
    if ctx.plan.hyde and prepared.cosine and _hyde(scope, ctx, pool, prepared.gates, degraded):
        candidates = _complete(ctx, pool)
        clock.lap("hyde")
    earned = {}
    if ctx.plan.reinforcement_weight and request.personalization != "none":
        earned = usage.earned(ctx.org, {(c.id.namespace, c.id.memory_key) for c in candidates})
    scale = fusion.fuse(candidates, ctx.plan)
    date = ctx.shape.date if ctx.plan.mode != "temporal" else None
    rank.apply(candidates, scale, rank.Inputs(ctx.plan, request, ctx.shape, date, earned, ctx.entities))
    ranked = rank.order(candidates)
    clock.lap("rank")
    order = _reranked(scope, ctx, ranked, prepared.gates, degraded, clock) if ctx.plan.rerank else ranked
    served = window.shape(order, ctx.plan, prepared.floor)
    hydrate(ctx.org, served, ctx.model)
    served = [c for c in served if c.row is not None]
    verdict = abstain.judge(ranked, served, prepared.gates, prepared.missing_entities, prepared.names, prepared.cosine)
    result = SearchResult(
        hits=hits(
            served, scope.namespace, ctx.plan.bodies, ctx.plan.floor_mode, ctx.plan.body_budget_tokens, request.explain
        ),
        abstain=verdict.abstain,
        abstain_code=verdict.code,
        abstain_reason=verdict.reason,
        retrieval_confidence=verdict.confidence,
        retrieval_risk=verdict.risk,
        candidates_total=len(candidates),
        namespaces_searched=ctx.namespaces,
        namespaces_skipped=prepared.skipped,
        degraded=degraded,
        search_mode=ctx.plan.mode,
        mode_source=ctx.plan.mode_source,
        recipe=ctx.plan.recipe,
        retrieval_budget=ctx.plan.budget,
        thresholds={**prepared.gates.as_dict(), "min_similarity_in_force": prepared.floor},
        query_entities=ctx.entities,
        notes=ctx.plan.notes,
        retrieval_work={**asdict(prepared.work), **_names_work(prepared.names)},
    )
    if request.paging:
        served_ids = {c.id for c in served}
        pool_order = window.shape(order, replace(ctx.plan, top_k=ctx.plan.pool_size), prepared.floor)
        rest = [c for c in pool_order if c.id not in served_ids]
        result.next = paging.park(scope, rest, ctx.plan, request.explain, verdict)
    clock.lap("window")
    return _finish(scope, request, result, op, run_id, clock, prepared.config.text_capture)


def search_trace(scope: Scope, request: SearchRequest) -> dict:
    """The vector leg alone: every candidate's distance, similarity, entity_boost, rank_score, rank and source."""
    clock = _Clock()
    prepared = _prepare(scope, request, clock)
    ctx = prepared.ctx
    ctx.plan.legs = {"vector", "chunks"}
    if not prepared.cosine:
        ctx.plan.legs = set()
    pool, degraded = Pool(), list(prepared.degraded)
    run_legs(ctx, pool, degraded, clock.stages)
    candidates = _complete(ctx, pool)
    wanted = {entity.lower() for entity in request.entity_filter}
    rows = []
    for c in candidates:
        boost = rank.entity_boost(wanted, c.meta["entities"])
        rows.append((c, boost, c.similarity + boost))
    rows.sort(key=lambda r: (-r[2], -r[0].similarity, r[0].id))
    traced = [
        {
            "memory_key": c.id.memory_key,
            "namespace": c.id.namespace,
            "agent": c.id.agent,
            "session_id": c.id.session_id,
            "version": c.id.version,
            "distance": round(1 - c.similarity, 6),
            "similarity": round(c.similarity, 6),
            "entity_boost": boost,
            "rank_score": round(score, 6),
            "rank": position,
            "source": c.source,
            "below_threshold": c.similarity < prepared.floor,
        }
        for position, (c, boost, score) in enumerate(rows[: ctx.plan.top_k], 1)
    ]
    return {
        "hits": traced,
        "candidates_total": len(candidates),
        "embedding_model": ctx.model,
        "key_axis": ctx.key_axis,
        "thresholds": prepared.gates.as_dict(),
        "degraded": degraded,
        **asdict(prepared.work),
        **_names_work(prepared.names),
        "latency_ms": clock.total_ms,
    }


def _prepare(scope: Scope, request: SearchRequest, clock: _Clock) -> _Prepared:
    config = namespaces.get(scope)
    anchor = _anchor(request)
    shape = query_text.analyse(request.searched, anchor)
    plan = resolve(request, config.retrieval_defaults, shape, config.rerank_endpoint)
    user_id, session_id = _read_scope(scope, request)
    searched, skipped = _namespaces(scope, request)
    embedder = get_embedder()
    clock.lap("plan")
    named = clickhouse.on_the_side(names.check, scope.org, searched, embedder.model_name, request.searched)
    degraded = []
    work = spelling.Work()
    try:
        with customer.for_org(scope.org, scope.namespace, scope.subject, "memory.search", request.user_id):
            vector = _embed_query(embedder, scope, request.searched, work)
    except customer.SWITCHED as exc:
        vector = None
        degraded += [f"leg:{leg}:{exc.code.lower()}" for leg in sorted(plan.legs & {"vector", "chunks"})]
        _without_a_model(plan, exc)
    clock.lap("embed")
    gates = thresholds.for_search(scope.org, scope.namespace, embedder)
    floor = plan.min_similarity if plan.min_similarity is not None else gates.min_similarity
    cosine = vector is not None
    if not cosine:
        # Candidates still read their rank columns; there is no cosine to floor.
        vector, floor = np.zeros(embedder.dim, dtype=np.float32), 0.0
    cue = shape.date
    dated = None  # the window the temporal leg reads: temporal mode keeps only its rows, other modes add them
    if plan.mode == "temporal" and cue is not None:
        half = timedelta(days=max(cue.window_days, settings.LOOM_MEMORY_SEARCH_TEMPORAL_WINDOW_DAYS))
        dated = (cue.at - half, cue.at + half)
    elif plan.mode == "temporal":
        plan.notes.append("temporal: no date in the query or observation_date; ordered by cosine alone")
    elif cue is not None:
        dated = (cue.at - timedelta(days=cue.window_days), cue.at + timedelta(days=cue.window_days))
    found = eligibility.build(request, dated if plan.mode == "temporal" else None, user_id, session_id)
    ctx = Context(scope.org, searched, embedder.model_name, vector, shape, plan, request, found, window=dated)
    ctx.key_axis = _key_axis(scope.org, scope.namespace, embedder.model_name)
    wanted = sorted({entity.lower() for entity in request.entity_filter})
    detect = "entity" in plan.legs or "graph" in plan.legs
    mentioned = set(wanted) | (set(entity_leg.mentioned_names(request.searched)) if detect else set())
    present = set(entity_leg.known(scope.org, searched, sorted(mentioned))) if mentioned else set()  # one read
    # entity_absent: not one of the filter's entities is in memory.
    missing = wanted if wanted and not present & set(wanted) else []
    if detect:
        ctx.entities = sorted(set(wanted) | present)
    try:
        checked = named.result()
    except clickhouse.ClickHouseError as exc:  # the check fails open: the cosine gates still judge
        log.warning("entity check failed: %s", exc)
        checked = names.Check()
        degraded.append("entity_check")
    clock.lap("prepare")
    return _Prepared(ctx, gates, floor, missing, checked, skipped, config, degraded, cosine, work)


def _names_work(checked: names.Check) -> dict:
    """`retrieval_work`'s account of the entity check: the names read from the query and those found."""
    return {"names_checked": checked.names, "names_found": checked.found}


def _embed_query(embedder, scope: Scope, query: str, work: spelling.Work) -> np.ndarray:
    """The query's vector, in the corpus spelling of its words where the namespace has one (retrieval/spelling.py).

    The spelling lookup runs beside the embed of the query as typed; a remembered answer spares that embed when it
    respells. A lookup that fails or runs past its bound, or a respelled embed that fails, leaves the query as
    typed, and says so (`query_spellings_skipped`).
    """
    known, missing = spelling.remembered(scope.org, scope.namespace, spelling.candidates(query))
    asked, started = None, time.monotonic()
    if missing and spelling.backing_off(scope.org, scope.namespace):
        work.query_spellings_skipped = True
    elif missing:
        asked = clickhouse.on_the_side(spelling.lookup, scope.org, scope.namespace, missing)
    typed = None if known else embedder.embed(query)
    if asked is not None:
        try:
            known.update(asked.result(timeout=max(0.0, spelling.LOOKUP_BOUND_S - (time.monotonic() - started))))
            spelling.succeeded(scope.org, scope.namespace)
        except Exception as exc:  # a lookup that fails costs the rewrite, never the search
            spelling.failed(scope.org, scope.namespace, exc)
            work.query_spellings_skipped = True
    if known:
        try:
            vector = embedder.embed(spelling.respelled(query, known))
            work.query_spellings = known
            return np.asarray(vector, dtype=np.float32)
        except (remote.ProviderError, remote.EmbedTimeout) as exc:
            log.warning("the respelled query could not be embedded (%s): embedding it as typed", exc)
            work.query_spellings_skipped = True
    return np.asarray(typed if typed is not None else embedder.embed(query), dtype=np.float32)


def _without_a_model(plan: Plan, refused: customer.ModelCallRefused) -> None:
    """No query vector (the org's model calls are off): rank by the legs that need no model call."""
    plan.legs = (plan.legs - {"vector", "chunks"}) | {"lexical", "bm25"}
    plan.notes.append(f"{refused}: ranked by token overlap (search_mode lexical) instead of {plan.mode}")
    plan.mode = "lexical"


def _complete(ctx: Context, pool: Pool) -> list[Candidate]:
    """Cosines and rank columns for candidates a non-vector leg found, dropping any the filters exclude."""
    lacking = [row for row, c in pool.items() if c.meta is None]
    for row, signals, _, meta in rescore(ctx, lacking):
        pool.add(row, signals, None, meta)
    return [c for c in pool.values() if c.meta is not None]


# What a hit shows of its row. Read without FINAL (the merge costs more than the row):
# each identity's newest revision is kept here instead.
HIT_COLUMNS = (
    "namespace, memory_key, agent, session_id, version, revision, status, superseded_by, value, memory_type, "
    "tags, entities, source_class, valid_at, created_at"
)


def hydrate(org: str, candidates: list[Candidate], model: str = "") -> None:
    """Attach each candidate's memory row (the exact version the legs scored, at its latest revision).

    Live rows the vector mirror holds come from it; the rest are read.
    """
    candidates = [c for c in candidates if c.row is None]  # the reranker may have read the pool's head already
    if not candidates:
        return
    by_id = vector_mirror.rows(org, model, [c.id for c in candidates]) if model else {}
    unread = [c for c in candidates if c.id not in by_id]
    rows = (
        clickhouse.query(
            f"""
        SELECT {HIT_COLUMNS} FROM memories
        WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}}
          AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{eligibility.IDENTITY_TYPE}}}
        """,
            {
                "org": org,
                "namespaces": sorted({c.id.namespace for c in unread}),
                "keys": sorted({c.id.memory_key for c in unread}),
                "ids": [c.id.as_tuple() for c in unread],
            },
        )
        if unread
        else []
    )
    for row in rows:
        held = by_id.get(rid := row_id(row))
        if held is None or row["revision"] > held["revision"]:
            by_id[rid] = row
    for c in candidates:
        c.row = by_id.get(c.id)


def hits(
    served: list[Candidate], home: str, bodies: str, floor_mode: str, budget_tokens: int | None, explain: bool
) -> list[dict]:
    """The served window as the caller reads it, bodies cut to `bodies`, floor_mode and the token budget."""
    budget = budget_tokens * 4 if budget_tokens else None  # ~4 characters a token
    out = []
    for c in served:
        row = c.row
        matched = c.chunk["text"] if c.source == "chunk" and c.chunk else row["value"]
        body_mode = "none" if c.below_threshold and floor_mode == "ids_only" else bodies
        excerpt = "" if body_mode == "none" else _excerpt(matched)
        body = {"full": row["value"], "source": row["value"], "unit": matched}.get(body_mode)
        truncated = False
        if budget is not None:
            excerpt, body, truncated, budget = _spend(excerpt, body, budget)
        components = dict(c.components)
        if c.id.namespace != home:
            components["foreign"] = 1.0
        if not explain:
            components = {k: v for k, v in components.items() if k in ALWAYS_COMPONENTS or (k in MAIN_COMPONENTS and v)}
        out.append(
            {
                "memory_key": c.id.memory_key,
                "namespace": c.id.namespace,
                "agent": c.id.agent,
                "session_id": c.id.session_id,
                "version": c.id.version,
                "content_excerpt": excerpt,
                "value": body,
                "body_truncated": truncated,
                "similarity": round(c.similarity, 6),
                "rank_score": round(c.score, 6),
                "below_threshold": c.below_threshold,
                "source": c.source,
                "parent_memory_key": c.id.memory_key if c.source == "chunk" else None,
                "chunk_index": c.chunk["chunk_index"] if c.source == "chunk" and c.chunk else None,
                "status": row["status"],
                "superseded_by": row["superseded_by"] or None,
                "source_class": row["source_class"],
                "verified": False,
                "memory_type": row["memory_type"],
                "tags": row["tags"],
                "entities": row["entities"],
                "valid_at": row["valid_at"],
                "created_at": row["created_at"],
                "score_components": {k: round(v, 6) if isinstance(v, float) else v for k, v in components.items()},
            }
        )
    return out


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1].rstrip() + "…"


def _spend(excerpt: str, body: str | None, budget: int):
    """Charge this hit's body against the remaining budget, cutting what does not fit."""
    text = body if body is not None else excerpt
    if len(text) <= budget:
        return excerpt, body, False, budget - len(text)
    cut = text[:budget]
    return (cut if body is None else excerpt[:budget]), (cut if body is not None else None), True, 0


def _finish(scope, request, result: SearchResult, op, run_id, clock: _Clock, text_capture: bool) -> SearchResult:
    if request.render == "reader":
        result.reader_block = reader_block(result)
    result.latency_ms = clock.total_ms
    result.stage_ms = clock.stages
    result.trace_id = uuid.uuid4().hex
    if settings.LOOM_SEARCH_TRACE_LOG_ENABLED:
        try:
            trace.record(scope, request, result, op, run_id, text_capture)
        except Exception as exc:  # the log fails open: the search has its answer
            log.warning("search trace log write failed: %s", exc)
            result.degraded.append("trace_log")
    return result


def reader_block(result: SearchResult) -> str:
    """The window as a model reads evidence: numbered hits, each with its key, date and text (the served body,
    else the excerpt); a weak hit is marked; an abstained search says so and why, so nothing reads as an answer."""
    if result.abstain:
        return f"No memory answers this ({result.abstain_code}): {result.abstain_reason}"
    blocks = []
    for number, hit in enumerate(result.hits, 1):
        dated = hit["valid_at"] or hit["created_at"]
        weak = " · below the similarity floor" if hit["below_threshold"] else ""
        text = hit["value"] if hit["value"] is not None else hit["content_excerpt"]
        blocks.append(f"[{number}] {hit['memory_key']} · {dated:%Y-%m-%d}{weak}\n{text}")
    return "\n\n".join(blocks)


def _anchor(request: SearchRequest) -> datetime:
    if request.observation_date is not None:
        return datetime.combine(request.observation_date, datetime.min.time(), UTC)
    return request.as_of or datetime.now(UTC)


def _read_scope(scope: Scope, request: SearchRequest) -> tuple[str | None, str | None]:
    """The user and session filters in force: the token's read_scope is a ceiling a request only narrows."""
    claim, asked = scope.read_scope or "", request.read_scope or ""
    effective = max(claim, asked, key=READ_SCOPE_ORDER.__getitem__)
    user_id, session_id = request.user_id, request.session_id
    if effective in ("own_user", "own_session") and (not user_id or user_id == "-"):
        raise Refusal("MISSING_FIELD", f"read_scope {effective} needs the request's user_id", "user_id", 422)
    if effective == "own_session" and (not session_id or session_id == "-"):
        raise Refusal("MISSING_FIELD", "read_scope own_session needs the request's session_id", "session_id", 422)
    return user_id, session_id


def _namespaces(scope: Scope, request: SearchRequest) -> tuple[list[str], list[str]]:
    """The addressed namespace, plus (all_mine) the caller's others up to the fan-out cap."""
    wanted = request.namespace_scope or settings.LOOM_MEMORY_SEARCH_DEFAULT_NAMESPACE_SCOPE
    if wanted != "all_mine":
        return [scope.namespace], []
    if scope.namespaces is not None:
        others = sorted(scope.namespaces - {scope.namespace})
    else:
        others = [ns for ns in namespaces.names(scope.org) if ns != scope.namespace]
    cap = settings.LOOM_MEMORY_SEARCH_FANOUT_MAX_NAMESPACES
    return [scope.namespace] + others[:cap], others[cap:]


_key_axis_cache: dict[tuple[str, str, str], tuple[float, bool]] = {}


def _key_axis(org: str, namespace: str, model: str) -> bool:
    """On, off, or (auto) on when the namespace reuses its keys: then keys name attributes."""
    mode = settings.LOOM_MEMORY_SEARCH_KEY_AXIS
    if mode != "auto":
        return mode == "on"
    cached = _key_axis_cache.get((org, namespace, model))
    if cached and time.monotonic() - cached[0] < 60:
        return cached[1]
    share = clickhouse.query_value(
        """
        SELECT if(count() = 0, 0, 1 - uniqExact(memory_key) / count()) FROM memory_embeddings FINAL
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
          AND status = 'active'
        """,
        {"org": org, "namespace": namespace, "model": model},
    )
    on = share >= settings.LOOM_MEMORY_SEARCH_KEY_AXIS_AUTO_REUSE_SHARE
    _key_axis_cache[(org, namespace, model)] = (time.monotonic(), on)
    return on


HYDE_PROMPT = (
    "Write a short passage, two sentences at most, that answers the question as a stored note would. "
    "Write only the passage."
)


def _hyde(scope: Scope, ctx: Context, pool: Pool, gates: Gates, degraded: list[str]) -> bool:
    """HyDE: search with the embedding of an LLM-written answer, when the first pass is weak (always under deep).

    Its cosine is `hyde_similarity`, one more vector signal of the candidates it
    finds. It fails open: a refusal or a failed call is named in `degraded`.
    Returns whether it ran.
    """
    top = max((c.similarity for c in pool.values() if c.meta is not None), default=0.0)
    if ctx.plan.budget != "deep" and top >= gates.hyde_fallback:
        return False
    llm = get_llm()
    if llm.provider == "fake":
        degraded.append("hyde:fake_llm")  # an echo would only embed the question again
        return False
    try:
        with customer.for_org(scope.org, scope.namespace, scope.subject, "hyde"):
            passage = llm.complete(HYDE_PROMPT, ctx.request.searched, max_tokens=200).text
            vector = get_embedder().embed(passage)
    except customer.ModelCallRefused as exc:
        degraded.append(f"hyde:{exc.code.lower()}")
        return False
    except (remote.ProviderError, remote.EmbedTimeout) as exc:
        log.warning("HyDE failed open: %s", exc)
        degraded.append("hyde:failed")
        return False
    found = Pool()
    run_legs(
        replace(ctx, vector=np.asarray(vector, dtype=np.float32), plan=replace(ctx.plan, legs={"vector"})),
        found,
        degraded,
        {},
    )
    for rid, candidate in found.items():
        pool.add(rid, {"hyde_similarity": candidate.fact_similarity}, None, candidate.meta)
    return True


def _reranked(
    scope: Scope, ctx: Context, ranked: list[Candidate], gates: Gates, degraded: list[str], clock: _Clock
) -> list[Candidate]:
    """The pool in the reranker's order; the abstain gates keep reading the fused one."""
    top = max((c.similarity for c in ranked), default=0.0)
    if note := rerank.skipped(ctx.plan.rerank, top, gates.rerank_skip):
        ctx.plan.notes.append(note)
        return ranked
    hydrate(ctx.org, ranked[: settings.LOOM_RERANK_MAX_DOCUMENTS], ctx.model)  # the reranker reads the rows' text
    order = rerank.apply(scope, ctx.plan.rerank, ctx.request.searched, ranked, degraded)
    clock.lap("rerank")
    return order
