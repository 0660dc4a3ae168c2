"""Temporal: rows dated within a window of the question's resolved date, closest first."""

from retrieval import clickhouse
from retrieval.legs import TIE_BREAK, Context, rows_to_hits


def run(ctx: Context):
    if ctx.window is None:
        return []
    middle = ctx.window[0] + (ctx.window[1] - ctx.window[0]) / 2
    half = max((ctx.window[1] - ctx.window[0]).total_seconds() / 2, 1.0)
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version,
               abs(dateDiff('millisecond', dated_at, {{middle:DateTime64(3, 'UTC')}})) / 1000 AS off_by
        FROM memory_embeddings
        WHERE {ctx.eligible.where()}
        ORDER BY off_by, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(middle=middle),
    )
    return rows_to_hits(rows, lambda r: {"temporal": max(0.0, 1 - r["off_by"] / half)})
