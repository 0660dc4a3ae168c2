"""Fact vectors: an exact scan of the live model's value vectors, with the key axis.

The key axis scores least(value distance, key distance): a question that names
the attribute a key encodes finds the row by its key.
"""

from retrieval import clickhouse
from retrieval.eligibility import IDENTITY_TYPE
from retrieval.legs import TIE_BREAK, Context, Hit
from retrieval.pool import RowId

# What ranking reads of a row, carried on its vector row so the pool is ranked without `memories`.
META = ("memory_type", "tags", "category", "entities", "source_class", "confidence", "sensitivity", "dated_at")


def _select(ctx: Context) -> str:
    key = "dotProduct(key_vector, {q:Array(Float32)})" if ctx.key_axis else "toFloat32(0)"
    return (
        "namespace, memory_key, agent, session_id, version, "
        f"dotProduct(value_vector, {{q:Array(Float32)}}) AS value_sim, {key} AS key_sim, {', '.join(META)}"
    )


def _hits(rows: list[dict]) -> list[Hit]:
    return [
        (
            RowId(r["namespace"], r["memory_key"], r["agent"], r["session_id"], r["version"]),
            {"value_similarity": r["value_sim"], "key_similarity": r["key_sim"]},
            None,
            {name: r[name] for name in META},
        )
        for r in rows
    ]


def run(ctx: Context):
    rows = clickhouse.query(
        f"""
        SELECT {_select(ctx)}
        FROM memory_embeddings
        WHERE {ctx.eligible.where()}
        ORDER BY greatest(value_sim, key_sim) DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(q=ctx.vector),
    )
    return _hits(rows)


def rescore(ctx: Context, ids: list[RowId]) -> list[Hit]:
    """Similarities and rank columns of these rows, if they are eligible; a row missing from the answer is not."""
    if not ids:
        return []
    rows = clickhouse.query(
        f"""
        SELECT {_select(ctx)}
        FROM memory_embeddings
        WHERE {ctx.eligible.where()}
          AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}
        """,
        ctx.params(q=ctx.vector, keys=sorted({i.memory_key for i in ids}), ids=[i.as_tuple() for i in ids]),
    )
    return _hits(rows)
