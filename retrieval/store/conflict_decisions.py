"""The conflict resolver's decisions (table `conflict_decisions`): the record of why a row was superseded, marked
contradicted or cleared, and what a search reads to say a served row stands contradicted.

A search asks only of namespaces that hold a contradiction (a count asked at most once a second per namespace, and
at once after this process recorded one), so a namespace with none pays nothing.
"""

from datetime import UTC, datetime

from retrieval.caching import TtlCache
from retrieval.store import clickhouse
from retrieval.store.rows import RowId
from retrieval.store.tenants import Tenant

REVISION, CONTRADICTION, COMPATIBLE = "revision", "contradiction", "compatible"
_COLUMNS = "memory_key, agent, session_id, version, other_key, other_version, decision, reason, model, decided_at"


def record(scope: Tenant, row: dict, other: dict, decision: str, reason: str, model: str) -> None:
    """The decision on `row` (judged against `other`); a contradiction marks both rows."""
    now = datetime.now(UTC)
    sides = [(row, other), (other, row)] if decision == CONTRADICTION else [(row, other)]
    clickhouse.insert(
        "conflict_decisions",
        [
            {
                "org": scope.org,
                "namespace": scope.namespace,
                "memory_key": this["memory_key"],
                "agent": this["agent"],
                "session_id": this["session_id"],
                "version": this["version"],
                "other_key": that["memory_key"],
                "other_version": that["version"],
                "decision": decision,
                "reason": reason,
                "model": model,
                "decided_at": now,
            }
            for this, that in sides
        ],
    )
    _held.forget()


def of_key(scope: Tenant, memory_key: str) -> list[dict]:
    """The decisions on a key's versions, oldest first: a memory's history shows them."""
    return clickhouse.query(
        f"""
        SELECT {_COLUMNS} FROM conflict_decisions
        WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND memory_key = {{key:String}}
        ORDER BY decided_at
        """,
        {"org": scope.org, "namespace": scope.namespace, "key": memory_key},
    )


_held = TtlCache(1.0)


def contradicted(org: str, ids: list[RowId]) -> dict[RowId, list[str]]:
    """The keys each of these row versions stands contradicted by."""
    namespaces = sorted({rid.namespace for rid in ids})
    asked = [ns for ns in namespaces if _held.get((clickhouse.target(), org, ns), lambda ns=ns: _count(org, ns))]
    ids = [rid for rid in ids if rid.namespace in asked]
    if not ids:
        return {}
    rows = clickhouse.query(
        """
        SELECT namespace, memory_key, agent, session_id, version, groupArray(other_key) AS others
        FROM conflict_decisions
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND decision = 'contradiction'
          AND memory_key IN {keys:Array(String)}
        GROUP BY namespace, memory_key, agent, session_id, version
        """,
        {"org": org, "namespaces": asked, "keys": sorted({rid.memory_key for rid in ids})},
    )
    wanted = set(ids)
    found = {}
    for row in rows:
        rid = RowId(row["namespace"], row["memory_key"], row["agent"], row["session_id"], row["version"])
        if rid in wanted:
            found[rid] = sorted(set(row["others"]))
    return found


def _count(org: str, namespace: str) -> int:
    return clickhouse.query_value(
        """
        SELECT count() FROM conflict_decisions
        WHERE org = {org:String} AND namespace = {namespace:String} AND decision = 'contradiction'
        """,
        {"org": org, "namespace": namespace},
    )
