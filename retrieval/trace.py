"""The search trace log: one row per search when LOOM_SEARCH_TRACE_LOG_ENABLED, kept 180 days.

The query text is stored only when the namespace consents to text capture.
A non-admin reads only the rows its own calls wrote.
"""

from datetime import UTC, datetime

from retrieval import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role


def record(scope: Scope, request, result, op: str, run_id: str, text_capture: bool) -> None:
    clickhouse.insert(
        "search_trace_log",
        [
            {
                "org": scope.org,
                "namespace": scope.namespace,
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


def read(
    scope: Scope,
    since: datetime | None = None,
    until: datetime | None = None,
    op: str | None = None,
    abstain: bool | None = None,
    risk: str | None = None,
    limit: int = 50,
    before: str | None = None,
) -> list[dict]:
    """Newest first; `before` is the trace_id of the last row of the previous page."""
    mine = None if scope.role >= Role.ADMIN else scope.subject
    return clickhouse.query(
        """
        SELECT created_at, trace_id, op, caller, run_id, query, query_captured, search_mode, top_k, keys, scores,
               similarities, abstain, abstain_code, retrieval_risk, retrieval_confidence, candidates_total,
               degraded, latency_ms, stage_ms
        FROM search_trace_log
        WHERE org = {org:String} AND namespace = {namespace:String}
          AND ({caller:Nullable(String)} IS NULL OR caller = {caller:Nullable(String)})
          AND ({since:Nullable(DateTime64(3, 'UTC'))} IS NULL OR created_at >= {since:Nullable(DateTime64(3, 'UTC'))})
          AND ({until:Nullable(DateTime64(3, 'UTC'))} IS NULL OR created_at < {until:Nullable(DateTime64(3, 'UTC'))})
          AND ({op:Nullable(String)} IS NULL OR op = {op:Nullable(String)})
          AND ({abstain:Nullable(Bool)} IS NULL OR abstain = {abstain:Nullable(Bool)})
          AND ({risk:Nullable(String)} IS NULL OR retrieval_risk = {risk:Nullable(String)})
          AND ({before:Nullable(String)} IS NULL OR (created_at, trace_id) < (
              SELECT created_at, trace_id FROM search_trace_log
              WHERE org = {org:String} AND namespace = {namespace:String} AND trace_id = {before:Nullable(String)}
              LIMIT 1))
        ORDER BY created_at DESC, trace_id DESC
        LIMIT {limit:UInt32}
        """,
        {"org": scope.org, "namespace": scope.namespace, "caller": mine, "since": since, "until": until,
         "op": op, "abstain": abstain, "risk": risk, "before": before, "limit": limit},
    )  # fmt: skip
