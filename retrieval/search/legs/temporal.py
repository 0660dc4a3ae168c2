"""Temporal: rows dated within a window of the question's resolved date, closest first.

Temporal mode keeps only these rows (the window is an eligibility filter there);
in every other mode a dated question adds them to the pool. The vector mirror
answers an unfiltered read; ClickHouse answers the rest.
"""

from retrieval.search.legs import TIE_BREAK, Context, rows_to_hits
from retrieval.search.legs.vector import mirrored
from retrieval.store import clickhouse
from retrieval.store.rows import name_order


def run(ctx: Context):
    if ctx.window is None:
        return []
    start, end = ctx.window
    half = max((end - start).total_seconds() / 2, 1.0)
    mirrors = mirrored(ctx)
    if mirrors is not None:
        found = [hit for mirror in mirrors for hit in mirror.dated_within(start, end, ctx.plan.pool_size)]
        found.sort(key=lambda hit: (hit[1], name_order(hit[0])))
        return [
            (row_id, {"temporal": max(0.0, 1 - off_by / half)}, None, None)
            for row_id, off_by, _ in found[: ctx.plan.pool_size]
        ]
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version,
               abs(dateDiff('millisecond', dated_at, {{middle:DateTime64(3, 'UTC')}})) / 1000 AS off_by
        FROM memory_embeddings
        WHERE {ctx.eligible.where()}
          AND dated_at BETWEEN {{start:DateTime64(3, 'UTC')}} AND {{end:DateTime64(3, 'UTC')}}
        ORDER BY off_by, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(middle=start + (end - start) / 2, start=start, end=end),
    )
    return rows_to_hits(rows, lambda r: {"temporal": max(0.0, 1 - r["off_by"] / half)})
