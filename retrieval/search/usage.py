"""Use of memories (memory.outcome): what reinforcement reads.

A positive event lifts a row; a harm event takes earned lift back, never more:
reinforcement is never negative, so harm cannot rank a row below its relevance.
"""

from collections import defaultdict
from datetime import UTC, datetime

from retrieval import knobs
from retrieval.caching import TtlCache
from retrieval.search import rank
from retrieval.store import clickhouse
from tenancy.access import Scope

OUTCOMES = ("positive", "harm")
USED_CITED = "used_cited"  # memory.ask cited the key: use, counted as a positive event


# Most namespaces never record an outcome: remember which do, so their searches skip the read.
CACHE_SECONDS = 10.0
_with_events = TtlCache(CACHE_SECONDS)


def record(scope: Scope, keys: list[str], outcome: str, weight: float, run_id: str = "", trace_id: str = "") -> int:
    now = datetime.now(UTC)
    _namespaces_with_events(scope.org).add((scope.org, scope.namespace))
    return clickhouse.insert(
        "memory_usage",
        [
            {
                "org": scope.org,
                "namespace": scope.namespace,
                "memory_key": key,
                "event": outcome,
                "weight": weight,
                "run_id": run_id,
                "trace_id": trace_id,
                "actor": scope.subject,
                "created_at": now,
            }
            for key in dict.fromkeys(keys)
        ],
    )


def earned(org: str, keys: set[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """(namespace, key) -> earned reinforcement in 0..1, decayed with the half-life."""
    with_events = _namespaces_with_events(org)
    keys = {(namespace, key) for namespace, key in keys if (org, namespace) in with_events}
    if not keys:
        return {}
    rows = clickhouse.query_rows(
        """
        SELECT namespace, memory_key, event, weight, dateDiff('second', created_at, now64(3)) / 86400 AS age
        FROM memory_usage
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)}
          AND memory_key IN {keys:Array(String)}
        """,
        {"org": org, "namespaces": sorted({n for n, _ in keys}), "keys": sorted({k for _, k in keys})},
    )
    events = defaultdict(lambda: {"positive": [], "harm": []})
    for namespace, key, event, weight, age in rows:
        events[(namespace, key)]["harm" if event == "harm" else "positive"].append((weight, max(age, 0.0)))
    half_life = knobs.REINFORCEMENT_HALF_LIFE_DAYS
    return {
        key: max(0.0, rank.decayed(found["positive"], half_life) - rank.decayed(found["harm"], half_life))
        for key, found in events.items()
    }


def _namespaces_with_events(org: str) -> set[tuple[str, str]]:
    def read():
        rows = clickhouse.query_rows(
            "SELECT DISTINCT namespace FROM memory_usage WHERE org = {org:String}", {"org": org}
        )
        return {(org, row[0]) for row in rows}

    return _with_events.get(org, read)
