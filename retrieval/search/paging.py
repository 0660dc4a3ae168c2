"""Paging: a paged search parks the ranked pool beyond its window; `page=` serves it a window at a time.

A handle names the parked pool and an offset. Parked pools expire after
knobs.PAGE_TTL_SECONDS; an expired or unknown handle answers an
abstain with `page_expired`.

A pool is parked off the request path (`clickhouse.insert_later`): the insert was most of a paged search's time on
the embedded engine, and the MCP tool loom_search always pages. Until it is written this process serves its pages
from `_fresh`; another process that misses a handle younger than the write's bound (the handle says when it was
made) waits for the write, at most PARKING_S.
"""

import functools
import json
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta

from retrieval import knobs
from retrieval.search.plan import Plan
from retrieval.search.pool import COSINES, Candidate
from retrieval.search.result import SearchResult, hits, hydrate
from retrieval.store import clickhouse
from retrieval.store.rows import RowId
from tenancy.access import Scope

# How long a parked pool may take to be written: insert_later's wait, and the insert itself with room to spare.
PARKING_S = clickhouse.LATER_SECONDS + 1.5
_POLL_S = 0.05
# This process's pools parked within PARKING_S: (org, namespace, handle) -> (payload(), when it expires, parked at).
_fresh: dict[tuple[str, str, str], tuple[dict, datetime, float]] = {}
_fresh_lock = threading.Lock()


def park(scope: Scope, rest: list[Candidate], plan: Plan, explain: bool, verdict) -> str | None:
    if not rest:
        return None
    now = datetime.now(UTC)
    handle = f"pg_{int(now.timestamp() * 1000):x}-{secrets.token_hex(10)}"  # when it was made, then chance

    @functools.cache  # made when first read: by the write (off the request path), or a page this process serves
    def payload() -> dict:
        return {
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
                    # (the signals a hit reads)
                    "signals": {name: value for name, value in c.signals.items() if name in COSINES},
                    "chunk": c.chunk,
                    "components": c.components,
                    "relevance": c.relevance,
                    "score": c.score,
                    "below_threshold": c.below_threshold,
                }
                for c in rest
            ],
        }

    expires = now + timedelta(seconds=knobs.PAGE_TTL_SECONDS)
    row = {
        "org": scope.org,
        "namespace": scope.namespace,
        "handle": handle,
        "created_at": now,
        "expires_at": expires,
        "payload": lambda: json.dumps(payload()),
    }
    with _fresh_lock:
        for key in [key for key, (_, _, parked) in _fresh.items() if time.monotonic() - parked > PARKING_S]:
            del _fresh[key]
        _fresh[(scope.org, scope.namespace, handle)] = (payload, expires, time.monotonic())
    clickhouse.insert_later("search_pages", [row])
    return f"{handle}.0"


def _parked(scope: Scope, handle: str) -> dict | None:
    """The parked pool, while it has not expired: this process's own fresh one, else the engine's (waiting for it
    while the handle is young enough to be on its way there)."""
    fresh = _fresh.get((scope.org, scope.namespace, handle))
    if fresh is not None:
        payload, expires, _ = fresh
        return payload() if expires > datetime.now(UTC) else None
    deadline = time.monotonic() + max(0.0, min(_age_left(handle), PARKING_S))
    while True:
        payload = clickhouse.query_value(
            """
            SELECT payload FROM search_pages
            WHERE org = {org:String} AND namespace = {namespace:String} AND handle = {handle:String}
              AND expires_at > now64(3)
            LIMIT 1
            """,
            {"org": scope.org, "namespace": scope.namespace, "handle": handle},
        )
        if payload is not None or time.monotonic() >= deadline:
            return None if payload is None else json.loads(payload)
        time.sleep(_POLL_S)


def _age_left(handle: str) -> float:
    """How much longer a pool parked under this handle may take to be written (0: it is in, or never was)."""
    made, _, rest = handle.removeprefix("pg_").partition("-")
    try:
        made_s = int(made, 16) / 1000
    except ValueError:
        return 0.0
    return PARKING_S - (time.time() - made_s) if rest else 0.0


def serve(scope: Scope, page: str, clock):
    """The next window of a parked pool, or an abstain with page_expired."""
    handle, _, offset = page.partition(".")
    parked = _parked(scope, handle) if offset.isdigit() else None
    if parked is None:
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
