"""Fact vectors: an exact scan of the live model's value vectors, with the key axis.

The key axis scores least(value distance, key distance): a question that names
the attribute a key encodes finds the row by its key.
"""

from retrieval import index
from retrieval.search.legs import TIE_BREAK, Context, Hit
from retrieval.store import clickhouse
from retrieval.store.rows import IDENTITY_TYPE, META, RowId, name_order, row_id


def select(ctx: Context) -> str:
    key = "dotProduct(key_vector, {q:Array(Float32)})" if ctx.key_axis else "toFloat32(0)"
    return (
        "namespace, memory_key, agent, session_id, version, "
        f"dotProduct(value_vector, {{q:Array(Float32)}}) AS value_sim, {key} AS key_sim, {', '.join(META)}"
    )


def hits(rows: list[dict]) -> list[Hit]:
    return [
        (
            row_id(r),
            {"value_similarity": r["value_sim"], "key_similarity": r["key_sim"]},
            None,
            {name: r[name] for name in META},
        )
        for r in rows
    ]


def run(ctx: Context):
    mirrored = _from_mirror(ctx)
    if mirrored is not None:
        return mirrored
    ctx.vector_read = "clickhouse"
    rows = clickhouse.query(
        f"""
        SELECT {select(ctx)}
        FROM memory_embeddings
        WHERE {ctx.eligible.where()}
        ORDER BY greatest(value_sim, key_sim) DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(q=ctx.vector),
    )
    return hits(rows)


def mirrored(ctx: Context) -> list[index.Reader] | None:
    """The namespaces' mirrors, when they hold exactly the rows this search may read (else None: read ClickHouse)."""
    found = ctx.eligible
    if (
        not index.enabled()
        or found.narrowed
        or found.statuses != ["active"]
        or not found.hide_reflections
        or not found.hide_duplicates
    ):
        return None
    mirrors = [index.get(ctx.org, namespace, ctx.model, ctx.key_axis) for namespace in ctx.namespaces]
    return None if any(mirror is None for mirror in mirrors) else mirrors


def _scoring(ctx: Context) -> list | None:
    """The mirrors, when they can score this search: `mirrored`, holding key vectors if it scores the key axis (a
    mirror without them is loading them, or they would not fit the byte budget)."""
    mirrors = mirrored(ctx)
    if mirrors is None or (ctx.key_axis and not all(mirror.keyed for mirror in mirrors)):
        return None
    return mirrors


def _from_mirror(ctx: Context) -> list[Hit] | None:
    """The same answer from the in-process mirror, when it holds exactly the rows this search may read."""
    mirrors = _scoring(ctx)
    if mirrors is None:
        return None
    reads = {mirror.first_read(ctx.key_axis) for mirror in mirrors}
    ctx.vector_read = next(read for read in ("bits", "codes", "mirror") if read in reads)
    best = [hit for mirror in mirrors for hit in mirror.top(ctx.vector, ctx.key_axis, ctx.plan.pool_size)]
    if len(mirrors) > 1:  # (each mirror's are in this order already)
        best.sort(key=lambda hit: (-max(hit[1], hit[2]), name_order(hit[0])))
    return [
        (row_id, {"value_similarity": value, "key_similarity": key}, None, meta)
        for row_id, value, key, meta in best[: ctx.plan.pool_size]
    ]


def rescore(ctx: Context, ids: list[RowId]) -> list[Hit]:
    """Similarities and rank columns of these rows, if they are eligible; a row missing from the answer is not.
    From the mirrors when they hold exactly the rows this search may read (a statement for a hybrid search's few
    lexical-only rows cost more than the rest of the search: docs/benchmarks.md)."""
    if not ids:
        return []
    mirrors = _scoring(ctx)
    if mirrors is not None:
        by_namespace = dict(zip(ctx.namespaces, mirrors))
        return [
            (row_id, {"value_similarity": value, "key_similarity": key}, None, meta)
            for namespace in ctx.namespaces
            for row_id, value, key, meta in by_namespace[namespace].scored(
                [i for i in ids if i.namespace == namespace], ctx.vector, ctx.key_axis
            )
        ]
    rows = clickhouse.query(
        f"""
        SELECT {select(ctx)}
        FROM memory_embeddings
        WHERE {ctx.eligible.where()}
          AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}
        """,
        ctx.params(q=ctx.vector, keys=sorted({i.memory_key for i in ids}), ids=[i.as_tuple() for i in ids]),
    )
    return hits(rows)
