"""Verbatim chunks: passages of long values; each parent row keeps its best passage."""

from retrieval import index
from retrieval.search.legs import BASE, TIE_BREAK, Context
from retrieval.store import clickhouse
from retrieval.store.rows import row_id


def run(ctx: Context):
    if index.without_chunks(ctx.org, ctx.namespaces, ctx.model):
        return []  # no value in these namespaces was long enough to chunk
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version,
               max(sim) AS chunk_sim, argMax(chunk_index, sim) AS chunk_index,
               argMax(start_char, sim) AS start_char, argMax(text, sim) AS text
        FROM (
            SELECT namespace, memory_key, agent, session_id, version, chunk_index, start_char, text,
                   dotProduct(vector, {{q:Array(Float32)}}) AS sim
            FROM memory_chunks FINAL
            WHERE {BASE} AND embedding_model = {{model:String}} AND embedding_dim > 0 {ctx.eligible.in_eligible()}
        )
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY chunk_sim DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(q=ctx.vector),
    )
    return [
        (
            row_id(r),
            {"chunk_similarity": r["chunk_sim"]},
            {"text": r["text"], "start_char": r["start_char"], "chunk_index": r["chunk_index"]},
            None,
        )
        for r in rows
    ]
