"""search(): the one entry point REST and the Recall Lab both call.

plan -> embed -> legs -> rescore and hydrate -> fuse -> rank terms -> window
-> verdict -> hits. Each stage is timed; a failing leg is named in
`degraded` and the search goes on.
"""

import logging
import time
import uuid
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings

from retrieval import index, knobs
from retrieval.gates import thresholds
from retrieval.gates.thresholds import Gates
from retrieval.ingest import entities
from retrieval.language import query as query_text
from retrieval.providers import customer, remote
from retrieval.providers.embedders import get_embedder
from retrieval.search import (
    abstain,
    evidence,
    fallback,
    fusion,
    key_axis,
    mentions,
    paging,
    planes,
    rank,
    reach,
    records,
    rerank,
    spelling,
    trace,
    usage,
    window,
)
from retrieval.search.legs import Context
from retrieval.search.legs import entity as entity_leg
from retrieval.search.legs import lexical as lexical_leg
from retrieval.search.legs import run as run_legs
from retrieval.search.legs.vector import rescore
from retrieval.search.plan import Plan, SearchRequest, resolve
from retrieval.search.pool import Candidate, Pool
from retrieval.search.result import SearchResult, contradictions, hits, hydrate, provenance, reader_block
from retrieval.store import change_marker, clickhouse, eligibility, extraction_queue, namespaces, reads
from tenancy.access import Scope

log = logging.getLogger(__name__)


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
    names: mentions.Check  # the names the query is about, and those memory mentions
    skipped: list[str]
    config: namespaces.NamespaceConfig
    degraded: list[str]  # what the search could not run, known before the legs
    cosine: bool  # False when the query could not be embedded: no similarity to judge by
    work: spelling.Work  # what query spelling did
    cost_estimate: dict  # what the search may spend, estimated before it ran


def search(
    scope: Scope, request: SearchRequest, op: str = "memory.search", run_id: str = "", logged: bool = True
) -> SearchResult:
    """`logged=False`: kept out of the search trace log (an evaluation's searches, which keep their own answers and
    would otherwise swamp the log's latency and abstain series)."""
    clock = _Clock()
    if request.page:
        result = paging.serve(scope, request.page, clock)
        return _finish(scope, request, result, op, run_id, clock, False, logged)
    prepared = _prepare(scope, request, clock)
    ctx, degraded = prepared.ctx, list(prepared.degraded)
    pool = Pool()
    run_legs(ctx, pool, degraded, clock.stages)
    clock.last = time.perf_counter()
    candidates = _complete(ctx, pool, degraded)
    clock.lap("rescore")
    spent = fallback.Work()
    if ctx.plan.fallback and prepared.cosine:
        spent = fallback.run(scope, ctx, pool, prepared.gates, not prepared.names.absent, degraded)
        if spent.rounds:
            candidates = _complete(ctx, pool, degraded)
            clock.lap("fallback")
    earned = {}
    if ctx.plan.reinforcement_weight and request.personalization != "none":
        earned = usage.earned(ctx.org, {(c.id.namespace, c.id.memory_key) for c in candidates})
    scale = fusion.fuse(candidates, ctx.plan)
    date = ctx.shape.date if ctx.plan.mode != "temporal" else None
    subject_rows = frozenset()
    if ctx.shape.ordinal:  # "the latest", "the first": every row about it, ordered by date
        ids = [c.id for c in candidates]
        subject_rows = frozenset(
            _fail_open("chronology", degraded, lexical_leg.holding_every, ctx, ids, ctx.shape.subject)
        )
    inputs = rank.Inputs(ctx.plan, request, ctx.shape, date, earned, ctx.entities, subject_rows)
    rank.apply(candidates, scale, inputs)
    ranked = rank.order(candidates)
    clock.lap("rank")
    order, notes = ranked, list(ctx.plan.notes)
    if ctx.plan.rerank:
        order, note = rerank.order(scope, ctx, ranked, prepared.gates, degraded)
        notes += [note] if note else []
        clock.lap("rerank")
    provenance(ctx.org, order)
    served = window.shape(order, ctx.plan, prepared.floor)
    hydrate(ctx.org, served, ctx.model)
    served = [c for c in served if c.row is not None]
    contradictions(ctx.org, served)
    verdict = abstain.judge(ranked, served, prepared.gates, prepared.missing_entities, prepared.names, prepared.cosine)
    computed = (
        [] if verdict.abstain else _fail_open("computed", degraded, evidence.compute, ctx, served, _anchor(request))
    )
    typed = _fail_open("records", degraded, records.matching, ctx)  # beside the verdict: ask may answer from a record
    # A deferred extraction in flight: the empty answer may not be evidence of absence.
    pending = _fail_open("pending_extraction", degraded, extraction_queue.pending, ctx.org, ctx.namespaces) or 0
    result = SearchResult(
        hits=hits(
            served,
            home=scope.namespace,
            bodies=ctx.plan.bodies,
            floor_mode=ctx.plan.floor_mode,
            budget_tokens=ctx.plan.body_budget_tokens,
            explain=request.explain,
        ),
        abstain=verdict.abstain,
        abstain_code=verdict.code,
        abstain_reason=verdict.reason,
        retrieval_confidence=verdict.confidence,
        retrieval_risk=verdict.risk,
        candidates_total=len(candidates),
        namespaces_searched=ctx.namespaces,
        namespaces_skipped=prepared.skipped,
        pending_extraction=pending,
        degraded=degraded,
        search_mode=ctx.plan.mode,
        mode_source=ctx.plan.mode_source,
        recipe=ctx.plan.recipe,
        retrieval_budget=ctx.plan.budget,
        thresholds={**prepared.gates.as_dict(), "min_similarity_in_force": prepared.floor},
        query_entities=ctx.entities,
        notes=notes,
        computed=computed,
        records=typed,
        retrieval_work={
            **asdict(prepared.work),
            **_names_work(prepared.names),
            "fallback": asdict(spent),
            "retrieval_cost_estimate": prepared.cost_estimate,
            "vector_read": ctx.vector_read,
        },
    )
    if request.planes != planes.ROWS:
        result.hits, answered = planes.served(ctx, result.hits, typed, prepared.floor, request.planes, verdict.abstain)
        if answered and result.abstain:
            result.abstain, result.abstain_code, result.abstain_reason, result.retrieval_risk = False, None, None, "low"
            result.notes.append(
                "a record answers the question outright (plane record): the rows' abstain does not stand"
            )
    if request.paging:
        served_ids = {c.id for c in served}
        pool_order = window.shape(order, replace(ctx.plan, top_k=ctx.plan.pool_size), prepared.floor)
        rest = [c for c in pool_order if c.id not in served_ids]
        result.next = paging.park(scope, rest, ctx.plan, request.explain, verdict)
    clock.lap("window")
    return _finish(scope, request, result, op, run_id, clock, prepared.config.text_capture, logged)


def search_trace(scope: Scope, request: SearchRequest) -> dict:
    """The vector leg alone: every candidate's distance, similarity, entity_boost, rank_score, rank and source."""
    clock = _Clock()
    prepared = _prepare(scope, request, clock)
    legs = frozenset({"vector", "chunks"} if prepared.cosine else ())
    ctx = replace(prepared.ctx, plan=replace(prepared.ctx.plan, legs=legs))
    pool, degraded = Pool(), list(prepared.degraded)
    run_legs(ctx, pool, degraded, clock.stages)
    candidates = _complete(ctx, pool, degraded)
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
        "vector_read": ctx.vector_read,
        "thresholds": prepared.gates.as_dict(),
        "degraded": degraded,
        **asdict(prepared.work),
        **_names_work(prepared.names),
        "latency_ms": clock.total_ms,
    }


def _prepare(scope: Scope, request: SearchRequest, clock: _Clock) -> _Prepared:
    user_id, session_id = reach.read_scope(scope, request)
    searched, skipped = reach.namespaces_searched(scope, request)
    embedder = get_embedder()
    # The first reads, side by side: which side tables the namespaces hold and the revision of the namespace's
    # configuration (on a server, where another process may have changed either), and other processes' writes,
    # before any leg reads; each only where the namespaces' stamps, read once for both, moved since it last asked.
    stamps = change_marker.read(scope.org, sorted({*searched, scope.namespace}))
    side = clickhouse.on_the_side(reads.side_tables_held, scope.org, searched, scope.namespace, stamps)
    index.sync(scope.org, searched, embedder.model_name, stamps)
    degraded = []
    try:
        side_held, revision = side.result()
    except clickhouse.ClickHouseError as exc:  # fails open: the digests, records and entity summaries are left out
        log.warning("side-table check failed: %s", exc)
        side_held, revision = frozenset(), None
        degraded.append("side_tables")
    config = namespaces.get(scope, revision)
    anchor = _anchor(request)
    shape = query_text.analyse(request.searched, anchor)
    plan = resolve(request, config.retrieval_defaults, shape, config.rerank_endpoint)
    estimate = fallback.cost_estimate(plan, request.searched, embedder.model_name)
    clock.lap("plan")
    named = clickhouse.on_the_side(mentions.check, scope.org, searched, embedder.model_name, request.searched)
    work = spelling.Work()
    try:
        with customer.for_org(scope.org, scope.namespace, scope.subject, "memory.search", request.user_id):
            vector = _embed_query(embedder, scope, request.searched, work)
    except customer.SWITCHED as exc:
        vector = None
        degraded += [f"leg:{leg}:{exc.code.lower()}" for leg in sorted(plan.legs & {"vector", "chunks"})]
        plan = _without_a_model(plan, exc)
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
        half = timedelta(days=max(cue.window_days, knobs.TEMPORAL_WINDOW_DAYS))
        dated = (cue.at - half, cue.at + half)
    elif plan.mode == "temporal":
        plan = replace(
            plan, notes=(*plan.notes, "temporal: no date in the query or observation_date; ordered by cosine alone")
        )
    elif cue is not None:
        dated = (cue.at - timedelta(days=cue.window_days), cue.at + timedelta(days=cue.window_days))
    found = eligibility.build(request, dated if plan.mode == "temporal" else None, user_id, session_id)
    ctx = Context(scope.org, searched, embedder.model_name, vector, shape, plan, request, found, window=dated)
    ctx.key_axis = key_axis.enabled(scope.org, scope.namespace, embedder.model_name)
    ctx.side_held = side_held
    wanted = sorted({entity.lower() for entity in request.entity_filter})
    detect = "entity" in plan.legs or "graph" in plan.legs
    mentioned = set(wanted) | (set(entity_leg.mentioned_names(request.searched)) if detect else set())
    present = set(entity_leg.known(scope.org, searched, ctx.model, sorted(mentioned))) if mentioned else set()
    # entity_absent: not one of the filter's entities is in memory.
    missing = wanted if wanted and not present & set(wanted) else []
    # The entities whose summary reads like the question: named in other words ("the Berlin office").
    like = []
    if detect and cosine and "entity_summaries" in ctx.side_held:
        like = entities.nearest(scope.org, searched, ctx.model, vector, gates.hyde_fallback, knobs.ENTITY_NEAREST)
    if detect:
        ctx.entities = sorted(set(wanted) | present | set(like))
    try:
        checked = named.result()
    except clickhouse.ClickHouseError as exc:  # the check fails open: the cosine gates still judge
        log.warning("entity check failed: %s", exc)
        checked = mentions.Check()
        degraded.append("entity_check")
    if like:  # an entity summary reads like the question: what it names and asks about is in memory, in other words
        checked = replace(checked, found=like if checked.absent else checked.found, held=checked.words)
    clock.lap("prepare")
    return _Prepared(ctx, gates, floor, missing, checked, skipped, config, degraded, cosine, work, estimate)


def _fail_open(name: str, degraded: list[str], read, *args) -> list:
    """A read beside the hits fails open, as a leg does: named in `degraded`, the search answers without it."""
    try:
        return read(*args)
    except clickhouse.ClickHouseError as exc:
        log.warning("%s failed open: %s", name, exc)
        degraded.append(name)
        return []


def _names_work(checked: mentions.Check) -> dict:
    """`retrieval_work`'s account of the check: the names read from the query and those found, the words it asks
    about beyond them and those no memory holds (the evidence of entity_absent and content_absent)."""
    return {
        "names_checked": checked.names,
        "names_found": checked.found,
        "words_checked": checked.words,
        "words_absent": checked.words_absent,
    }


# After an embed of the query timed out, the next try gets this long: time for an embedding-cache hit, so a hung
# provider still answers EMBED_TIMEOUT within one embed bound plus this (001, Query spelling).
LAST_CHANCE_S = 0.25


def _embed_query(embedder, scope: Scope, query: str, work: spelling.Work) -> np.ndarray:
    """The query's vector, in the corpus spelling of its words where the namespace has one (retrieval/search/spelling.py).

    The spelling lookup runs beside the embed of the query as typed; a remembered answer spares that embed when it
    respells. A lookup that fails or runs past its bound, or a respelled embed that fails, leaves the query as
    typed, and says so (`query_spellings_skipped`). The search fails only when every embed it tried failed: a
    refused embed as typed waits for the lookup's answer and tries the respelled text; a try after a timeout gets
    LAST_CHANCE_S. An LLM-free read spends no second embed on it.
    """
    if settings.LOOM_READS_LLM_FREE:  # the spec: an LLM-free read embeds its query once, as typed
        return np.asarray(embedder.embed(query), dtype=np.float32)
    known, missing = spelling.remembered(scope.org, scope.namespace, spelling.candidates(query))
    asked, started = None, time.monotonic()
    if missing and spelling.backing_off(scope.org, scope.namespace):
        work.query_spellings_skipped = True
    elif missing:
        asked = clickhouse.on_the_side(spelling.lookup, scope.org, scope.namespace, embedder.model_name, missing)
    typed, failure = None, None
    tried_typed = not known  # a remembered respelling spares the embed as typed
    if tried_typed:
        try:
            typed = embedder.embed(query)
        except (remote.ProviderError, remote.EmbedTimeout) as exc:  # fails the search only if the respelled does
            failure = exc
    if asked is not None:
        try:
            known.update(asked.result(timeout=max(0.0, spelling.LOOKUP_BOUND_S - (time.monotonic() - started))))
            spelling.succeeded(scope.org, scope.namespace)
        except Exception as exc:  # a lookup that fails costs the rewrite, never the search
            spelling.failed(scope.org, scope.namespace, exc)
            work.query_spellings_skipped = True
    if known:
        try:
            with _after(failure):
                vector = embedder.embed(spelling.respelled(query, known))
            work.query_spellings = known
            return np.asarray(vector, dtype=np.float32)
        except (remote.ProviderError, remote.EmbedTimeout) as exc:
            log.warning("the respelled query could not be embedded (%s): embedding it as typed", exc)
            work.query_spellings_skipped = True
            failure = failure or exc
    if not tried_typed:
        with _after(failure):
            typed = embedder.embed(query)
    if typed is None:
        raise failure  # every embed tried failed
    return np.asarray(typed, dtype=np.float32)


def _after(failure: BaseException | None):
    """An embed tried after another timed out gets LAST_CHANCE_S; any other, its whole bound."""
    return remote.last_chance(LAST_CHANCE_S) if isinstance(failure, remote.EmbedTimeout) else nullcontext()


def _without_a_model(plan: Plan, refused: customer.ModelCallRefused) -> Plan:
    """No query vector (the org's model calls are off): rank by the legs that need no model call."""
    return replace(
        plan,
        legs=(plan.legs - {"vector", "chunks"}) | {"lexical", "bm25"},
        notes=(*plan.notes, f"{refused}: ranked by token overlap (search_mode lexical) instead of {plan.mode}"),
        mode="lexical",
    )


def _complete(ctx: Context, pool: Pool, degraded: list[str]) -> list[Candidate]:
    """Cosines and rank columns for candidates a non-vector leg found, dropping any the filters exclude; the lexical
    signal for those the lexical leg's cut left out (legs/lexical.py)."""
    lacking = [row for row, c in pool.items() if c.meta is None]
    for row, signals, _, meta in rescore(ctx, lacking):
        pool.add(row, signals, None, meta)
    candidates = [c for c in pool.values() if c.meta is not None]
    if "lexical" in ctx.plan.legs and "leg:lexical" not in degraded:
        unscored = [c.id for c in candidates if "lexical" not in c.signals]
        for row, signals, _, _ in _fail_open("lexical_completion", degraded, lexical_leg.complete, ctx, unscored):
            pool.add(row, signals)
    return candidates


def _finish(
    scope, request, result: SearchResult, op, run_id, clock: _Clock, text_capture: bool, logged: bool
) -> SearchResult:
    if request.render == "reader":
        result.reader_block = reader_block(result)
    result.latency_ms = clock.total_ms
    result.stage_ms = clock.stages
    result.trace_id = uuid.uuid4().hex
    if logged and settings.LOOM_SEARCH_TRACE_LOG_ENABLED:
        trace.record(scope, request, result, op, run_id, text_capture)
    return result


def _anchor(request: SearchRequest) -> datetime:
    if request.observation_date is not None:
        return datetime.combine(request.observation_date, datetime.min.time(), UTC)
    return request.as_of or datetime.now(UTC)
