"""Fact vectors: an exact scan of the live model's value vectors, with the key axis.

The key axis scores least(value distance, key distance): a question that names
the attribute a key encodes finds the row by its key.
"""

from retrieval import clickhouse
from retrieval.eligibility import IDENTITY_TYPE
from retrieval.legs import TIE_BREAK, Context, rows_to_hits
from retrieval.pool import RowId


def _similarities(ctx: Context) -> str:
    value = "dotProduct(value_vector, {q:Array(Float32)}) AS value_sim"
    key = "dotProduct(key_vector, {q:Array(Float32)})" if ctx.key_axis else "toFloat32(0)"
    return f"{value}, {key} AS key_sim"


def _signals(row: dict) -> dict:
    return {"value_similarity": row["value_sim"], "key_similarity": row["key_sim"]}


def run(ctx: Context):
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, {_similarities(ctx)}
        FROM memory_embeddings FINAL
        WHERE {ctx.eligible.where()}
        ORDER BY greatest(value_sim, key_sim) DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(),
    )
    return rows_to_hits(rows, _signals)


def rescore(ctx: Context, ids: list[RowId]) -> dict[RowId, dict]:
    """Vector similarities of these rows, if they are eligible; a row missing from the answer is not."""
    if not ids:
        return {}
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, {_similarities(ctx)}
        FROM memory_embeddings FINAL
        WHERE {ctx.eligible.where()}
          AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}
        """,
        ctx.params(keys=sorted({i.memory_key for i in ids}), ids=[i.as_tuple() for i in ids]),
    )
    return {row_id: signals for row_id, signals, _ in rows_to_hits(rows, _signals)}
