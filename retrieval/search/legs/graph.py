"""Graph: rows one hop from the query's entities, and rows carrying a matching triple.

One hop: an entity an edge joins to a query entity (a declared triple or a
co-mention on some row). A triple matches when its subject or object is a
query entity, and fully when its relation shares a stemmed word with the query.
"""

from retrieval.search.legs import BASE, TIE_BREAK, Context, rows_to_hits
from retrieval.store import clickhouse


def run(ctx: Context):
    if not ctx.entities:
        return []
    params = ctx.params(entities=ctx.entities, terms=ctx.shape.terms)
    hops = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, uniqExact(entity) AS reached
        FROM entity_mentions FINAL
        WHERE {BASE} AND entity IN (
            SELECT dst FROM entity_edges FINAL
            WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND status = 'active'
              AND src IN {{entities:Array(String)}} AND dst NOT IN {{entities:Array(String)}}
        ) {ctx.eligible.in_eligible()}
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY reached DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        params,
    )
    triples = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version,
               max(if(hasAny(relation_terms, {{terms:Array(String)}}), 1.0, 0.5)) AS matched
        FROM entity_triples FINAL
        WHERE {BASE} AND (subject IN {{entities:Array(String)}} OR object IN {{entities:Array(String)}})
          {ctx.eligible.in_eligible()}
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY matched DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        params,
    )
    return rows_to_hits(hops, lambda r: {"graph_hop": 1.0}) + rows_to_hits(
        triples, lambda r: {"graph_triple": r["matched"]}
    )
