"""The rank expression: relevance plus bounded correction terms.

Every term has a hard ceiling, so it can reorder near-ties but never lift a
row over one that is more relevant by more than the sum of the ceilings:
entity boost 0.5 x share, a recency or chronology cue NEAR_TIE + RECENCY (it
orders the near-ties by date; an ordinal cue, "the latest", also the rows holding
every word the question asks about wherever they ranked: lifted to the top, they
are what it asks to order, so for them the term has no ceiling), the date cue 0.15, the prior group capped at
LOOM_MEMORY_PRIOR_CAP, reinforcement at its weight, key match at 0.01 (0.05
as a boost). Demotions only lower. Pinned is not a term, nor is an exact identifier: a row holding the
identifier the query names (legs/exact.py) is served before the rest, a tier over the score.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from retrieval import knobs
from retrieval.language import text
from retrieval.language.query import DateCue, QueryShape
from retrieval.search.plan import Plan, SearchRequest
from retrieval.search.pool import Candidate


@dataclass
class Inputs:
    plan: Plan
    request: SearchRequest
    shape: QueryShape
    date: DateCue | None  # the date the question is about, if any
    earned: dict[tuple[str, str], float]  # (namespace, key) -> reinforcement earned, 0..1
    query_entities: list[str]  # known entities the query names, lowercased
    # With a recency or chronology cue: the pool's rows holding every word the question asks about (its subject),
    # which the cue orders by date wherever fusion placed them.
    subject_rows: frozenset = frozenset()


def entity_boost(wanted: set[str], carried: list[str]) -> float:
    """0.5 x the share of the entity_filter's entities (lowercased) a row carries."""
    if not wanted:
        return 0.0
    return knobs.ENTITY_BOOST * len(wanted & {entity.lower() for entity in carried}) / len(wanted)


# Every term apply() may add to relevance: rank_score = relevance + term_scale x their sum (the Lab stacks them).
TERMS = (
    "entity_boost",
    "query_entity_boost",
    "recency",
    "chronology",
    "recency_pool",
    "date",
    "session_digest",
    "prior",
    "reinforcement",
    "trust",
    "key_match",
    "sensitivity_demotion",
    "demoted",
)


def apply(candidates: list[Candidate], scale: float, inputs: Inputs) -> None:
    """Add each term to every candidate's components and set its score."""
    request, plan = inputs.request, inputs.plan
    personal = request.personalization != "none"
    eligible = set(settings.LOOM_MEMORY_SEARCH_SOURCE_CLASS_BOOST_ELIGIBLE)
    wanted_entities = {entity.lower() for entity in request.entity_filter}
    newness = _newness(candidates) if plan.recency_pool_weight else {}
    top = max((c.relevance for c in candidates), default=0.0)
    fresh = (
        _freshness(candidates, top - knobs.NEAR_TIE * scale, inputs.subject_rows)
        if (inputs.shape.recency or inputs.shape.earliest)
        else {}
    )
    # What every candidate is weighed against, read once (a search ranks a hundred or more).
    named = set(inputs.query_entities) - wanted_entities
    soft_tags, demote_tags = set(request.tags_soft), set(request.demote_tags)
    prior_cap, trust_weight = settings.LOOM_MEMORY_PRIOR_CAP, settings.LOOM_MEMORY_SEARCH_TRUST_WEIGHT
    key_match_weight = knobs.KEY_MATCH[settings.LOOM_MEMORY_SEARCH_KEY_MATCH_MODE]
    sensitivity_demotion = -settings.LOOM_MEMORY_SEARCH_SENSITIVITY_DEMOTE
    query_terms = set(inputs.shape.terms)
    for c in candidates:
        row, terms = c.meta, {}
        if wanted_entities:
            terms["entity_boost"] = entity_boost(wanted_entities, row["entities"])
        if named:
            carries = {entity.lower() for entity in row["entities"]}
            terms["query_entity_boost"] = knobs.QUERY_ENTITY_BOOST * len(named & carries) / len(named)
        if c.id in fresh:
            lift = (top - c.relevance) / scale  # to the top relevance, in term units
            if inputs.shape.recency:
                terms["recency"] = lift + knobs.RECENCY * fresh[c.id]
            else:
                terms["chronology"] = lift + knobs.RECENCY * (1 - fresh[c.id])
        if newness:
            terms["recency_pool"] = plan.recency_pool_weight * newness[c.id]
        if "digest" in c.signals:  # its session's digest is among the nearest (digest descent)
            terms["session_digest"] = plan.digest_descent * c.signals["digest"]
        if inputs.date is not None and plan.mode != "temporal":
            off_by_days = _days_off(row["dated_at"], inputs.date)
            terms["date"] = knobs.DATE * max(0.0, 1 - off_by_days / max(inputs.date.window_days, 1))
        if personal and row["source_class"] in eligible:
            confidence = row["confidence"] * plan.confidence_weight
            tags = knobs.TAG_BOOST if soft_tags.intersection(row["tags"]) else 0.0
            category = (
                knobs.CATEGORY_BOOST if request.category_soft and row["category"] == request.category_soft else 0.0
            )
            c.components.update(confidence_prior=confidence, tag_boost=tags, category_boost=category)
            terms["prior"] = min(confidence + tags + category, prior_cap)
            earned = inputs.earned.get((c.id.namespace, c.id.memory_key), 0.0)
            terms["reinforcement"] = plan.reinforcement_weight * earned
        if trust_weight:
            terms["trust"] = trust_weight * knobs.TRUST.get(row["source_class"], 0.0)
        key_match = key_match_weight * _key_share(c, query_terms, len(inputs.shape.terms))
        if key_match:
            terms["key_match"] = key_match
        if row["sensitivity"] in ("medium", "high") and not inputs.shape.contact:
            terms["sensitivity_demotion"] = sensitivity_demotion
        if demote_tags.intersection(row["tags"]):
            terms["demoted"] = knobs.DEMOTED
        c.components.update(terms)
        c.components["relevance"] = c.relevance
        if scale != 1:  # rrf: the terms count at its 1/61 scale
            c.components["term_scale"] = scale
        c.score = c.relevance + scale * sum(terms.values())
        c.components["rank_score"] = c.score
        if "exact" in c.signals:
            c.components["exact_identifier"] = c.signals["exact"]


def order(candidates: list[Candidate]) -> list[Candidate]:
    """Rows holding the query's identifiers first; then by score; ties by similarity, then by the row's name, so
    identical searches serve identical windows."""
    return sorted(
        candidates,
        key=lambda c: (
            -c.signals.get("exact", 0.0),
            -c.score,
            -c.similarity,
            c.id.memory_key,
            c.id.namespace,
            c.id.agent,
            c.id.session_id,
            -c.id.version,
        ),
    )


def _key_share(c: Candidate, terms: set[str], count: int) -> float:
    """The share of the query's `count` content words (`terms`, as a set) the row's stemmed key parts cover.

    A tie-break among candidates the legs found, so it needs no statement of its
    own: rows a key names are found by the key axis and the lexical legs.
    """
    if not count:
        return 0.0
    return len(terms & text.key_terms(c.id.memory_key).keys()) / count


def _days_off(dated: datetime, cue: DateCue) -> float:
    """Days between a row's date and the asked date; a named day spans the whole day."""
    if cue.window_days <= 1 and cue.at <= dated < cue.at + timedelta(days=1):
        return 0.0
    return abs((dated - cue.at).total_seconds()) / 86400


def _freshness(candidates: list[Candidate], least: float, subject_rows: frozenset) -> dict:
    """Where each near-tie's date (relevance at least `least`, or a row holding the question's subject) falls
    between the oldest (0) and the newest (1) of them."""
    near = [c for c in candidates if c.relevance >= least or c.id in subject_rows]
    dates = [c.meta["dated_at"] for c in near]
    span = (max(dates) - min(dates)).total_seconds() if dates else 0
    if not span:
        return {}
    oldest = min(dates)
    return {c.id: (c.meta["dated_at"] - oldest).total_seconds() / span for c in near}


def _newness(candidates: list[Candidate]) -> dict:
    """Each candidate's place from oldest (0) to newest (1) in the pool."""
    ordered = sorted(candidates, key=lambda c: (c.meta["dated_at"], c.id))
    span = max(len(ordered) - 1, 1)
    return {c.id: index / span for index, c in enumerate(ordered)}


def decayed(events: list[tuple[float, float]], half_life_days: float) -> float:
    """Saturating sum of (weight, age in days) events, each halving every half-life: 0..1."""
    total = sum(weight * 0.5 ** (age / half_life_days) for weight, age in events)
    return 1 - math.exp(-total)
