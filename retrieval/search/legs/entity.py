"""Entity: rows naming the query's entities (the entity_filter, and known entities the query names)."""

import numpy as np

from retrieval import index
from retrieval.language import text
from retrieval.search.legs import Context, matches, postings, rows_to_hits
from retrieval.store import clickhouse

_EDGE_PUNCTUATION = "\"'.,;:!?()[]{}<>"


def known(org: str, namespaces: list[str], model: str, names: list[str]) -> list[str]:
    """Which of these (lowercased) names a live row of the namespaces mentions: the loaded mirrors answer when they
    hold every live row (a search of the `standard` budget asked ClickHouse this every time, ~9 in 10 of the LoCoMo
    questions naming something), else one statement."""
    if not names:
        return []
    held = index.mentioned(org, namespaces, model, ["\0" + name for name in names])
    if held is not None and held[1]:
        return sorted({name for name, mentioned in zip(names, held[0]) if mentioned})
    rows = clickhouse.query_rows(
        """
        SELECT DISTINCT entity FROM entity_mentions FINAL
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND status = 'active'
          AND entity IN {names:Array(String)}
        ORDER BY entity
        """,
        {"org": org, "namespaces": namespaces, "names": sorted(set(names))},
    )
    return [row[0] for row in rows]


def mentioned_names(query: str, longest: int = 4) -> list[str]:
    """Every run of up to `longest` words of the query, lowercased: the names it could be saying.

    Words split at whitespace with punctuation trimmed from their ends, so `db-01` and
    `acme.io` stay whole; the word tokens (`db`, `01`) are tried as well.
    """
    words = [word.strip(_EDGE_PUNCTUATION) for word in query.lower().split()]
    words = [word for word in words if word]
    runs = {" ".join(words[i : i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)}
    return sorted(runs | set(text.tokens(query)))


def run(ctx: Context):
    if not ctx.entities:
        return []
    count = len(ctx.entities)
    held = postings.read(ctx, ["\0" + entity for entity in ctx.entities], "any")
    if held is not None:  # the mirrors' postings of the entities: how many of them each row mentions, as below
        return [
            (rid, {"entity": matched / count}, None, None)
            for rid, matched in postings.best(held, _once, ctx.plan.pool_size)
        ]
    rows = matches(ctx, "entity_mentions", "entity", ctx.entities)
    return rows_to_hits(rows, lambda r: {"entity": r["matched"] / count})


def _once(entity: str, tf: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each entity a row mentions counts 1 (an entity's postings hold a row once: a tf of 1)."""
    return tf
