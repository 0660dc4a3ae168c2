"""Lexical: the share of the query's content words (stemmed) a row's value or key holds."""

from retrieval import clickhouse
from retrieval.legs import BASE, TIE_BREAK, Context, rows_to_hits


def run(ctx: Context):
    terms = ctx.shape.terms
    if not terms:
        return []
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, uniqExact(term) AS matched
        FROM memory_terms FINAL
        WHERE {BASE} AND term IN {{terms:Array(String)}} {ctx.eligible.in_eligible()}
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY matched DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(terms=terms),
    )
    return rows_to_hits(rows, lambda r: {"lexical": r["matched"] / len(terms)})
