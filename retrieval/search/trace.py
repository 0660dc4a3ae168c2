"""The search trace log: one row per search when LOOM_SEARCH_TRACE_LOG_ENABLED, kept 180 days.

The query text is stored only when the namespace consents to text capture. A row is written off the request path
(`clickhouse.insert_later`: within half a second, in a batch; an insert in line was a large share of an embedded
search: docs/benchmarks.md), and
this process's waiting rows are written before any read of the log. A row lost with its process fails open, as a
failed insert did: the search had its answer.
A non-admin reads only the rows its own calls wrote; a token granted some namespaces reads only the rows of
searches that read none beyond them (a fanned-out search's keys come from every namespace it read).
"""

from datetime import UTC, datetime

from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role


def record(scope: Scope, request, result, op: str, run_id: str, text_capture: bool) -> None:
    clickhouse.insert_later(
        "search_trace_log",
        [
            {
                "org": scope.org,
                "namespace": scope.namespace,
                "namespaces_searched": result.namespaces_searched,
                "created_at": datetime.now(UTC),
                "trace_id": result.trace_id,
                "op": op,
                "caller": scope.subject,
                "run_id": run_id or "",
                "query": request.query if text_capture else "",
                "query_captured": text_capture,
                "search_mode": result.search_mode,
                "top_k": len(result.hits),
                "keys": [hit["memory_key"] for hit in result.hits],
                "scores": [hit["rank_score"] for hit in result.hits],
                "similarities": [hit["similarity"] for hit in result.hits],
                "abstain": result.abstain,
                "abstain_code": result.abstain_code or "",
                "retrieval_risk": result.retrieval_risk,
                "retrieval_confidence": result.retrieval_confidence,
                "candidates_total": result.candidates_total,
                "degraded": result.degraded,
                "latency_ms": result.latency_ms,
                "stage_ms": result.stage_ms,
            }
        ],
    )


# The filters every reader of the log shares; a non-admin's `caller` is its own subject, and a token granted some
# namespaces (`scoped`) reads the searches of those alone.
_FILTER = """
    org = {org:String} AND namespace = {namespace:String}
    AND ({caller:Nullable(String)} IS NULL OR caller = {caller:Nullable(String)})
    AND (NOT {scoped:Bool} OR hasAll({readable:Array(String)}, namespaces_searched))
    AND ({since:Nullable(DateTime64(3, 'UTC'))} IS NULL OR created_at >= {since:Nullable(DateTime64(3, 'UTC'))})
    AND ({until:Nullable(DateTime64(3, 'UTC'))} IS NULL OR created_at < {until:Nullable(DateTime64(3, 'UTC'))})
    AND ({op:Nullable(String)} IS NULL OR op = {op:Nullable(String)})
    AND ({abstain:Nullable(Bool)} IS NULL OR abstain = {abstain:Nullable(Bool)})
    AND ({risk:Nullable(String)} IS NULL OR retrieval_risk = {risk:Nullable(String)})
"""


def _params(scope: Scope, since, until, op, abstain, risk, **more) -> dict:
    mine = None if scope.role >= Role.ADMIN else scope.subject
    return {
        "org": scope.org,
        "namespace": scope.namespace,
        "caller": mine,
        "scoped": scope.namespaces is not None,
        "readable": sorted(scope.namespaces or ()),
        "since": since,
        "until": until,
        "op": op,
        "abstain": abstain,
        "risk": risk,
        **more,
    }


def read(
    scope: Scope,
    since: datetime | None = None,
    until: datetime | None = None,
    op: str | None = None,
    abstain: bool | None = None,
    risk: str | None = None,
    limit: int = 50,
    before: str | None = None,
    trace_id: str | None = None,
) -> list[dict]:
    """Newest first; `before` is the trace_id of the last row of the previous page; `trace_id` reads one row."""
    clickhouse.flush_later()
    return clickhouse.query(
        f"""
        SELECT created_at, trace_id, op, caller, run_id, query, query_captured, search_mode, top_k, keys, scores,
               similarities, abstain, abstain_code, retrieval_risk, retrieval_confidence, candidates_total,
               degraded, latency_ms, stage_ms
        FROM search_trace_log
        WHERE {_FILTER}
          AND ({{trace_id:Nullable(String)}} IS NULL OR trace_id = {{trace_id:Nullable(String)}})
          AND ({{before:Nullable(String)}} IS NULL OR (created_at, trace_id) < (
              SELECT created_at, trace_id FROM search_trace_log
              WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND trace_id = {{before:Nullable(String)}}
              LIMIT 1))
        ORDER BY created_at DESC, trace_id DESC
        LIMIT {{limit:UInt32}}
        """,
        _params(scope, since, until, op, abstain, risk, before=before, limit=limit, trace_id=trace_id),
    )


def page(scope: Scope, limit: int = 50, before: str | None = None, **filters) -> tuple[list[dict], str | None]:
    """One page of the log, newest first, and the `before` of the next page: None when this is the last (a row
    past the page is read to tell, so an exactly full last page does not lead to an empty one)."""
    rows = read(scope, **filters, limit=limit + 1, before=before)
    return rows[:limit], rows[limit - 1]["trace_id"] if len(rows) > limit else None


def series(scope: Scope, since=None, until=None, op=None, abstain=None, risk=None, buckets: int = 24) -> list[dict]:
    """Latency p50/p95 and the abstain rate over time, in about `buckets` equal steps of the rows' span."""
    clickhouse.flush_later()
    return clickhouse.query(
        f"""
        WITH (SELECT (min(created_at), max(created_at)) FROM search_trace_log WHERE {_FILTER}) AS span,
             greatest(1, intDiv(dateDiff('second', span.1, span.2), {{buckets:UInt32}}) + 1) AS step
        SELECT toStartOfInterval(created_at, toIntervalSecond(step)) AS at, count() AS searches,
               quantile(0.5)(latency_ms) AS p50, quantile(0.95)(latency_ms) AS p95, avg(abstain) AS abstain_rate
        FROM search_trace_log
        WHERE {_FILTER}
        GROUP BY at ORDER BY at
        """,
        _params(scope, since, until, op, abstain, risk, buckets=buckets),
    )


def rated(scope: Scope, limit: int = 5000) -> list[dict]:
    """Logged searches of this namespace alone, their question text kept, that memory.outcome rated positive on
    keys they served: trace_id, query and those keys (`positive`), oldest first. An outcome names the search by
    its trace_id, or else by the run it searched within. Labelled questions, as the callers' own outcomes label
    them (retrieval/evaluation builds question sets from them)."""
    clickhouse.flush_later()
    return clickhouse.query(
        f"""
        SELECT t.trace_id AS trace_id, any(t.query) AS query, groupUniqArray(u.memory_key) AS positive
        FROM (
            SELECT trace_id, query, keys, created_at,
                   arrayJoin(arrayFilter(link -> link != 'run:', ['trace:' || trace_id, 'run:' || run_id])) AS link
            FROM search_trace_log
            WHERE {_FILTER} AND query_captured AND arrayAll(n -> n = {{namespace:String}}, namespaces_searched)
        ) AS t
        INNER JOIN (
            SELECT if(trace_id != '', 'trace:' || trace_id, 'run:' || run_id) AS link, memory_key FROM memory_usage
            WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND event = 'positive'
              AND (trace_id != '' OR run_id != '')
        ) AS u ON t.link = u.link
        WHERE has(t.keys, u.memory_key)
        GROUP BY t.trace_id
        ORDER BY min(t.created_at), t.trace_id
        LIMIT {{limit:UInt32}}
        """,
        _params(scope, None, None, None, None, None, limit=limit),
    )
