"""Related: rows sharing tags and entities with the request's tags, tags_soft and entity_filter."""

from retrieval.search.legs import TIE_BREAK, Context, rows_to_hits
from retrieval.store import clickhouse


def run(ctx: Context):
    tags = sorted(set(ctx.request.tags) | set(ctx.request.tags_soft))
    entities = sorted({entity.lower() for entity in ctx.request.entity_filter})
    facets = len(tags) + len(entities)
    if not facets:
        return []
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version,
               length(arrayIntersect(tags, {{facet_tags:Array(String)}}))
               + length(arrayIntersect(arrayMap(e -> lower(e), entities), {{facet_entities:Array(String)}})) AS overlap
        FROM memory_embeddings
        WHERE {ctx.eligible.where()} AND overlap > 0
        ORDER BY overlap DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(facet_tags=tags, facet_entities=entities),
    )
    return rows_to_hits(rows, lambda r: {"related": r["overlap"] / facets})
