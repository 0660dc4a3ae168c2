"""The retrieval legs: each a ClickHouse query over a table the write path fills.

A leg returns (RowId, signals, chunk) triples for the pool. A leg that fails
fails open: the search goes on without it and names it in `degraded`.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from retrieval.language.query import QueryShape
from retrieval.search.plan import Plan, SearchRequest
from retrieval.search.pool import Pool
from retrieval.store import clickhouse
from retrieval.store.eligibility import Eligibility
from retrieval.store.rows import RowId, row_id

log = logging.getLogger(__name__)

# Tenant and status, for legs over tables other than memory_embeddings.
BASE = "org = {org:String} AND namespace IN {namespaces:Array(String)} AND status IN {statuses:Array(String)}"
# Ties break by the row's name, so two identical searches fill the pool identically.
TIE_BREAK = "memory_key, namespace, agent, session_id, version"


@dataclass
class Context:
    org: str
    namespaces: list[str]
    model: str
    vector: np.ndarray  # float32: bound as bytes, not float by float (clickhouse._bind_vectors)
    shape: QueryShape
    plan: Plan
    request: SearchRequest
    eligible: Eligibility
    entities: list[str] = field(default_factory=list)  # the query's entities, lowercased
    key_axis: bool = False
    window: tuple[datetime, datetime] | None = None
    side_held: frozenset[str] = frozenset()  # the side tables (reads.SIDE_KEYS) the namespaces hold rows in
    vector_read: str = ""  # set by the vector leg: clickhouse (an exact scan in SQL), mirror, or codes (codes-first)

    def params(self, **more) -> dict:
        """The parameters every leg binds; a leg that reads the query vector adds `q=ctx.vector`."""
        return {
            "org": self.org,
            "namespaces": self.namespaces,
            "model": self.model,
            "statuses": self.eligible.statuses,
            "pool": self.plan.pool_size,
            **self.eligible.params,
            **more,
        }


def matches(ctx: "Context", table: str, column: str, values: list[str], condition: str = "") -> list[dict]:
    """Rows of `table` whose `column` holds some of `values`, with how many distinct ones (`matched`), most first."""
    return clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, uniqExact({column}) AS matched
        FROM {table} FINAL
        WHERE {BASE} AND {column} IN {{values:Array(String)}} {condition} {ctx.eligible.in_eligible()}
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY matched DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(values=values),
    )


# A hit as legs report it: identity, signals, the best chunk (chunk leg), the rank columns (vector legs).
Hit = tuple[RowId, dict, dict | None, dict | None]


def rows_to_hits(rows: list[dict], signals) -> list[Hit]:
    """Pair each result row's identity with the signals `signals(row)` reads off it."""
    return [(row_id(r), signals(r), None, None) for r in rows]


def by_name() -> dict:
    """Every leg's `run(ctx)`, by the name plans use, in the order their hits are merged."""
    from retrieval.search.legs import bm25, chunks, digests, entity, exact, graph, lexical, related, temporal, vector

    return {
        "vector": vector.run,
        "chunks": chunks.run,
        "lexical": lexical.run,
        "bm25": bm25.run,
        "entity": entity.run,
        "graph": graph.run,
        "temporal": temporal.run,
        "related": related.run,
        "digests": digests.run,
        "exact": exact.run,
    }


def run(ctx: Context, pool: Pool, degraded: list[str], stage_ms: dict[str, float]) -> None:
    # The legs are independent: those that read memory run at once, statements side by side; merged in a fixed order.
    running = {
        name: clickhouse.on_the_side(_timed, leg, ctx) for name, leg in by_name().items() if name in ctx.plan.legs
    }
    for name, future in running.items():
        hits, elapsed_ms, error = future.result()
        stage_ms[f"leg_{name}"] = elapsed_ms
        if error is not None:  # a leg fails open; the search goes on
            log.warning("search leg %s failed: %s", name, error)
            degraded.append(f"leg:{name}")
            continue
        for rid, signals, chunk, meta in hits:
            pool.add(rid, signals, chunk, meta)


def _timed(leg, ctx: Context):
    started = time.perf_counter()
    try:
        return leg(ctx), (time.perf_counter() - started) * 1000, None
    except Exception as exc:
        return [], (time.perf_counter() - started) * 1000, exc
