"""Computed evidence: what a question asks to be computed rather than found, worked out from the rows in scope.

The query's intent is read deterministically (`language.query`: no model); each kind is served beside the hits
in `computed`, with the rows it was computed from, and never changes the ranking:

- **count** ("how many", "how often"): the live rows in scope, under the request's filters, that mention what
  the question is about (from the vector mirror's postings when it holds the namespace, else in ClickHouse),
  with the first and last date among them. What it is about: the names it asks about (`language.names`) and, of
  its other words (the asking words left out), the one the fewest rows mention ("How many times did Melanie go to
  the beach?": Melanie and beach). The count says what it counted; none when nothing is left to count by: the
  search answers from recall alone.
- **sum** ("how much did I spend on books in total?", "how many hours did I practice?"): the amounts the rows a
  count would count state (`derived_facts`, read from each value when it is written: retrieval/language/amounts.py),
  added up in the unit the question asks for (money: the currency the rows use most), with how many rows stated one.
  None when no row states an amount in that unit: the search answers from recall alone.
- **temporal_diff** ("how long ago", "how many days since", "how long between"): from the best hit's date to the
  question's date (its observation_date, else now), or, for "between", "before", "after", between the two best
  hits of different dates.
- **latest** (a recency cue: "latest", "current", "now"): the newest row of the best hit's key in scope, when the
  key holds several (one per session or writer), with how many; its rows and the newest one's value from the
  mirror when it holds the namespace, as for a count.

A count or a date difference is about several rows of one key as readily as of many keys, so those queries are
exempt from the per-key cap (plan.py).
"""

from collections import Counter
from datetime import datetime

from retrieval import index
from retrieval.language import amounts, names, text
from retrieval.language.query import INTENT_WORDS
from retrieval.search.legs import Context, postings
from retrieval.search.legs.vector import mirrored
from retrieval.search.pool import Candidate
from retrieval.store import clickhouse
from retrieval.store.rows import IDENTITY_COLUMNS, IDENTITY_TYPE, RowId

# How many rows a count names (the count itself is exact up to COUNT_LIMIT).
NAMED = 20
COUNT_LIMIT = 10_000
_ASKING = frozenset(text.stems(sorted(INTENT_WORDS)))
_BETWEEN = ("between", "before", "after", "until", "later")


def compute(ctx: Context, served: list[Candidate], anchor: datetime) -> list[dict]:
    """The computed evidence the query asks for, or [] (no intent, or nothing to compute from)."""
    intent = ctx.shape.intent
    rows = [c for c in served if c.source != "summary" and c.meta is not None]
    if intent == "count":
        return _count(ctx)
    if intent == "sum":
        return _sum(ctx)
    if intent == "temporal_diff" and rows:
        return _temporal_diff(ctx, rows, anchor)
    if intent == "latest" and rows:
        return _latest(ctx, rows[0])
    return []


def _count(ctx: Context) -> list[dict]:
    rows, said = _about(ctx)
    if not rows:
        return []
    return [
        {
            "kind": "count",
            "value": len(rows),
            "text": f"{len(rows)} memories mention {said}, {rows[0]['dated_at']:%Y-%m-%d} to {rows[-1]['dated_at']:%Y-%m-%d}",
            "computed_from": rows[:NAMED],
        }
    ]


def _about(ctx: Context) -> tuple[list[dict], str]:
    """The eligible rows that mention what the question is about (by date), and how the question says it. What it
    is about: the names it asks about and, of its other words (the asking words left out), the one the fewest rows
    mention; nothing when nothing is left to narrow by."""
    named = {term for name in names.about(ctx.shape.text) for term in names.terms(name)}
    others = [term for term in ctx.shape.terms if term not in _ASKING and term not in named]
    held = _rows_holding(ctx, others)  # a word no row holds ("go" beside "went") narrows nothing
    subject = sorted(named) + ([min(held, key=lambda term: (held[term], term))] if held else [])
    if not subject:
        return [], ""
    words = [word for word in text.tokens(ctx.shape.text) if text.stems([word])[0] in subject]
    return _mentioning(ctx, subject), " ".join(dict.fromkeys(words))


def _sum(ctx: Context) -> list[dict]:
    rows, said = _about(ctx)
    facts = _facts(ctx, rows)
    asked = amounts.asked_unit(ctx.shape.text)
    if asked == "money":  # "how much did I spend": the currency the rows state most
        currencies = Counter(fact["unit"] for fact in facts if fact["unit"] in amounts.CURRENCIES)
        asked = currencies.most_common(1)[0][0] if currencies else None
    summed = [fact for fact in facts if fact["unit"] == asked]
    if not summed:
        return []
    total = round(sum(fact["value"] for fact in summed), 6)
    stated = sorted({(fact["dated_at"], fact["memory_key"], _identity(fact)) for fact in summed})
    first, last = stated[0][0], stated[-1][0]
    return [
        {
            "kind": "sum",
            "value": total,
            "unit": asked,
            "text": f"{total:g} {asked} in total, stated by {len(stated)} memories mentioning {said}, "
            f"{first:%Y-%m-%d} to {last:%Y-%m-%d} ({', '.join(fact['said'] for fact in summed[:NAMED])})",
            "computed_from": [
                {**dict(zip(IDENTITY_COLUMNS, identity)), "dated_at": dated} for dated, _, identity in stated[:NAMED]
            ],
        }
    ]


def _identity(row: dict) -> tuple:
    return tuple(row[name] for name in IDENTITY_COLUMNS)


def _facts(ctx: Context, rows: list[dict]) -> list[dict]:
    """The derived facts (amounts) of these row versions, in the order their values state them."""
    if not rows:
        return []
    return clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, position, value, unit, said, dated_at
        FROM derived_facts FINAL
        WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}
        ORDER BY dated_at, memory_key, version, position
        """,
        {
            "org": ctx.org,
            "namespaces": ctx.namespaces,
            "keys": sorted({row["memory_key"] for row in rows}),
            "ids": [_identity(row) for row in rows],
        },
    )


def _mentioning(ctx: Context, subject: list[str]) -> list[dict]:
    """The eligible rows whose value or key holds every subject term, by date (COUNT_LIMIT at most): from the
    mirrors' postings when they hold exactly the rows this search may read (a statement costs a count's search far
    more), else counted in ClickHouse."""
    mirrors = mirrored(ctx)
    held = None if mirrors is None else [mirror.holding_all(subject) for mirror in mirrors]
    if held is not None and None not in held:
        found = sorted((meta["dated_at"], rid.memory_key, rid) for each in held for rid, meta in each)
        return [{**rid._asdict(), "dated_at": dated_at} for dated_at, _, rid in found[:COUNT_LIMIT]]
    return clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, dated_at
        FROM memory_embeddings
        WHERE {ctx.eligible.where()} AND (namespace, memory_key, agent, session_id, version) IN (
            SELECT namespace, memory_key, agent, session_id, version FROM memory_terms FINAL
            WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND status = 'active'
              AND field IN ('value', 'key') AND term IN {{subject:Array(String)}}
            GROUP BY namespace, memory_key, agent, session_id, version
            HAVING uniqExact(term) = length({{subject:Array(String)}})
        )
        ORDER BY dated_at, memory_key
        LIMIT {{limit:UInt32}}
        """,
        ctx.params(subject=subject, limit=COUNT_LIMIT),
    )


def _rows_holding(ctx: Context, terms: list[str]) -> dict[str, int]:
    """How many live rows of the namespaces mention each term (value or key)."""
    if not terms:
        return {}
    if (held := postings.read(ctx, terms, "any")) is not None:
        return dict(postings.document_frequency(held))
    return dict(
        clickhouse.query_rows(
            """
            SELECT term, uniqExact(namespace, memory_key, agent, session_id, version) FROM memory_terms FINAL
            WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND status = 'active'
              AND field IN ('value', 'key') AND term IN {terms:Array(String)}
            GROUP BY term
            """,
            {"org": ctx.org, "namespaces": ctx.namespaces, "terms": terms},
        )
    )


def _temporal_diff(ctx: Context, rows: list[Candidate], anchor: datetime) -> list[dict]:
    asked = ctx.shape.text.lower()
    first = rows[0]
    if any(f" {word} " in f" {asked} " for word in _BETWEEN):
        other = next((c for c in rows[1:] if c.meta["dated_at"].date() != first.meta["dated_at"].date()), None)
        if other is None:
            return []
        early, late = sorted((first, other), key=lambda c: c.meta["dated_at"])
        days = (late.meta["dated_at"].date() - early.meta["dated_at"].date()).days  # calendar days
        said = (
            f"{early.id.memory_key} ({early.meta['dated_at']:%Y-%m-%d}) to {late.id.memory_key} "
            f"({late.meta['dated_at']:%Y-%m-%d}): {days} days"
        )
        return [{"kind": "temporal_diff", "value": days, "text": said, "computed_from": [_of(early), _of(late)]}]
    days = (anchor.date() - first.meta["dated_at"].date()).days
    said = f"{first.id.memory_key} ({first.meta['dated_at']:%Y-%m-%d}) to {anchor:%Y-%m-%d}: {days} days"
    return [{"kind": "temporal_diff", "value": days, "text": said, "computed_from": [_of(first)]}]


def _of(c: Candidate) -> dict:
    """A row evidence was computed from, as the statements name theirs."""
    return {**c.id._asdict(), "dated_at": c.meta["dated_at"]}


def _latest(ctx: Context, best: Candidate) -> list[dict]:
    rows = _key_rows(ctx, best.id)
    if len(rows) < 2:
        return []
    newest = rows[0]
    value = _value(ctx, RowId(*(newest[name] for name in RowId._fields)))
    said = f"the newest of {len(rows)} rows of {newest['memory_key']} ({newest['dated_at']:%Y-%m-%d}): {value}"
    return [{"kind": "latest", "value": value, "text": said, "computed_from": rows[:NAMED]}]


def _key_rows(ctx: Context, best: RowId) -> list[dict]:
    """The eligible rows of the best hit's key in its namespace, newest first: from its mirror when the mirrors hold
    exactly the rows this search may read (found by the key's words, which its rows' postings hold), else read."""
    mirrors, words = mirrored(ctx), list(text.key_terms(best.memory_key))
    held = mirrors[ctx.namespaces.index(best.namespace)].holding_all(words) if mirrors and words else None
    if held is not None:
        found = sorted(
            ((meta["dated_at"], rid.version, rid) for rid, meta in held if rid.memory_key == best.memory_key),
            reverse=True,
        )
        return [{**rid._asdict(), "dated_at": dated_at} for dated_at, _, rid in found]
    return clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, dated_at
        FROM memory_embeddings
        WHERE {ctx.eligible.where()} AND memory_key = {{key:String}} AND namespace = {{key_namespace:String}}
        ORDER BY dated_at DESC, version DESC
        """,
        ctx.params(key=best.memory_key, key_namespace=best.namespace),
    )


def _value(ctx: Context, rid: RowId) -> str:
    """A live row's value: from its mirror when it holds the value, else read."""
    if held := index.rows(ctx.org, ctx.model, [rid]).get(rid):
        return held["value"]
    return clickhouse.query_value(
        """
        SELECT argMax(value, revision) FROM memories
        WHERE org = {org:String} AND namespace = {namespace:String} AND memory_key = {key:String}
          AND agent = {agent:String} AND session_id = {session:String} AND version = {version:UInt64}
        """,
        {
            "org": ctx.org,
            "namespace": rid.namespace,
            "key": rid.memory_key,
            "agent": rid.agent,
            "session": rid.session_id,
            "version": rid.version,
        },
    )
