"""Paging: a paged search parks the ranked pool beyond its window; `page=` serves it a window at a time.

A handle names the parked pool and an offset. Parked pools expire after
LOOM_MEMORY_SEARCH_PAGE_TTL_SECONDS; an expired or unknown handle answers an
abstain with `page_expired`.
"""

import json
import secrets
from datetime import UTC, datetime, timedelta

from django.conf import settings

from retrieval.search.plan import Plan
from retrieval.search.pool import Candidate
from retrieval.search.result import SearchResult, hits, hydrate
from retrieval.store import clickhouse
from retrieval.store.rows import RowId
from tenancy.access import Scope


def park(scope: Scope, rest: list[Candidate], plan: Plan, explain: bool, verdict) -> str | None:
    if not rest:
        return None
    handle = "pg_" + secrets.token_hex(12)
    now = datetime.now(UTC)
    payload = {
        "window": {
            "top_k": plan.top_k,
            "bodies": plan.bodies,
            "floor_mode": plan.floor_mode,
            "budget_tokens": plan.body_budget_tokens,
            "mode": plan.mode,
            "explain": explain,
            "confidence": verdict.confidence,
            "risk": verdict.risk,
        },
        "candidates": [
            {
                "id": list(c.id.as_tuple()),
                "signals": c.signals,
                "chunk": c.chunk,
                "components": c.components,
                "relevance": c.relevance,
                "score": c.score,
                "below_threshold": c.below_threshold,
            }
            for c in rest
        ],
    }
    clickhouse.insert(
        "search_pages",
        [
            {
                "org": scope.org,
                "namespace": scope.namespace,
                "handle": handle,
                "created_at": now,
                "expires_at": now + timedelta(seconds=settings.LOOM_MEMORY_SEARCH_PAGE_TTL_SECONDS),
                "payload": json.dumps(payload),
            }
        ],
    )
    return f"{handle}.0"


def serve(scope: Scope, page: str, clock):
    """The next window of a parked pool, or an abstain with page_expired."""
    handle, _, offset = page.partition(".")
    payload = clickhouse.query_value(
        """
        SELECT payload FROM search_pages
        WHERE org = {org:String} AND namespace = {namespace:String} AND handle = {handle:String}
          AND expires_at > now64(3)
        LIMIT 1
        """,
        {"org": scope.org, "namespace": scope.namespace, "handle": handle},
    )
    if payload is None or not offset.isdigit():
        return SearchResult(
            hits=[],
            abstain=True,
            abstain_code="page_expired",
            abstain_reason="the page handle names no parked result (expired, or not this namespace's); search again",
            retrieval_confidence=0.0,
            retrieval_risk="abstain",
            candidates_total=0,
            namespaces_searched=[scope.namespace],
        )
    parked = json.loads(payload)
    shown = parked["window"]
    start, top_k = int(offset), shown["top_k"]
    candidates = [
        Candidate(
            RowId(*item["id"]),
            signals=item["signals"],
            chunk=item["chunk"],
            components=item["components"],
            relevance=item["relevance"],
            score=item["score"],
            below_threshold=item["below_threshold"],
        )
        for item in parked["candidates"][start : start + top_k]
    ]
    hydrate(scope.org, candidates)
    candidates = [c for c in candidates if c.row is not None]
    more = start + top_k < len(parked["candidates"])
    clock.lap("page")
    return SearchResult(
        hits=hits(
            candidates,
            home=scope.namespace,
            bodies=shown["bodies"],
            floor_mode=shown["floor_mode"],
            budget_tokens=shown["budget_tokens"],
            explain=shown["explain"],
        ),
        abstain=False,
        abstain_code=None,
        abstain_reason=None,
        retrieval_confidence=shown["confidence"],
        retrieval_risk=shown["risk"],
        candidates_total=len(parked["candidates"]),
        namespaces_searched=[scope.namespace],
        next=f"{handle}.{start + top_k}" if more else None,
        search_mode=shown["mode"],
        mode_source="page",
    )
