"""Key-based reads: memory.get, memory.bulk_get and memory.list.

A read sees the active version of each row; `history` adds every version,
superseded and deleted ones included, newest first.
"""

import base64
import json
from dataclasses import dataclass

from retrieval import clickhouse
from tenancy.access import Scope

# Columns a read serves (the table's bookkeeping, revision, stays inside).
COLUMNS = """
    memory_key, agent, session_id, version, status, superseded_by, value, memory_type, tags,
    category, entities, triples, confidence, source_class, sensitivity, pinned, valid_at, user_id, run_id,
    actor, embedding_model, chunk_count, created_at, updated_at
"""

_SCOPE = "org = {org:String} AND namespace = {namespace:String}"


def _params(scope: Scope, **more) -> dict:
    return {"org": scope.org, "namespace": scope.namespace, **more}


def get(scope: Scope, memory_key: str, agent: str | None = None, session_id: str | None = None) -> list[dict]:
    """The key's active rows (one per writer and session), newest first."""
    return clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_SCOPE} AND memory_key = {{key:String}} AND status = 'active'
          AND ({{agent:Nullable(String)}} IS NULL OR agent = {{agent:Nullable(String)}})
          AND ({{session:Nullable(String)}} IS NULL OR session_id = {{session:Nullable(String)}})
        ORDER BY version DESC
        LIMIT 1 BY agent, session_id
        """,
        _params(scope, key=memory_key, agent=agent, session=session_id),
    )


def history(scope: Scope, memory_key: str) -> list[dict]:
    """Every version of every row of the key, newest first."""
    return clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_SCOPE} AND memory_key = {{key:String}}
        ORDER BY version DESC
        """,
        _params(scope, key=memory_key),
    )


def bulk_get(scope: Scope, keys: list[str]) -> dict[str, dict]:
    """The newest active row of each key found, by key."""
    rows = clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_SCOPE} AND memory_key IN {{keys:Array(String)}} AND status = 'active'
        ORDER BY version DESC
        LIMIT 1 BY memory_key
        """,
        _params(scope, keys=sorted(set(keys))),
    )
    return {row["memory_key"]: row for row in rows}


@dataclass
class Page:
    items: list[dict]
    next_cursor: str | None


class BadCursor(ValueError):
    pass


# Each order: the sort column computed per key, and how a cursor resumes after a key.
_ORDERS = {
    "recent": ("newest_version", "UInt64"),
    "score": ("toFloat64(max(confidence))", "Float64"),
}


def list_keys(
    scope: Scope,
    order: str = "recent",
    limit: int = 100,
    cursor: str | None = None,
    memory_type: str | None = None,
    agent: str | None = None,
    key_prefix: str | None = None,
) -> Page:
    """Keys with an active row, newest first (`recent`) or by stored confidence (`score`).

    Paged by a keyset cursor, so a page is stable while rows are written.
    """
    sort, sort_type = _ORDERS[order]
    after_sort, after_key = _decode(cursor, order) if cursor else (None, None)
    rows = clickhouse.query(
        f"""
        SELECT memory_key, argMax(memory_type, version) AS newest_type, count() AS rows,
               max(version) AS newest_version, max(updated_at) AS newest_update, {sort} AS sort_value
        FROM memories FINAL
        WHERE {_SCOPE} AND status = 'active'
          AND ({{type:Nullable(String)}} IS NULL OR memory_type = {{type:Nullable(String)}})
          AND ({{agent:Nullable(String)}} IS NULL OR agent = {{agent:Nullable(String)}})
          AND startsWith(memory_key, {{prefix:String}})
        GROUP BY memory_key
        HAVING {{after_key:Nullable(String)}} IS NULL
            OR sort_value < {{after_sort:Nullable({sort_type})}}
            OR (sort_value = {{after_sort:Nullable({sort_type})}} AND memory_key > {{after_key:Nullable(String)}})
        ORDER BY sort_value DESC, memory_key ASC
        LIMIT {{limit:UInt32}}
        """,
        _params(
            scope, type=memory_type, agent=agent, prefix=key_prefix or "", after_sort=after_sort,
            after_key=after_key, limit=limit + 1,
        ),  # fmt: skip
    )
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = _encode(order, rows[-1]["sort_value"], rows[-1]["memory_key"]) if more else None
    items = [
        {"memory_key": row["memory_key"], "memory_type": row["newest_type"], "rows": row["rows"],
         "version": row["newest_version"], "updated_at": row["newest_update"]}
        for row in rows
    ]  # fmt: skip
    return Page(items=items, next_cursor=next_cursor)


def _encode(order: str, sort_value, key: str) -> str:
    raw = json.dumps([order, sort_value, key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str, order: str):
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        made_for, sort_value, key = json.loads(raw)
        if made_for != order or not isinstance(key, str) or not isinstance(sort_value, (int, float)):
            raise ValueError
        return sort_value, key
    except (ValueError, TypeError):
        raise BadCursor("cursor is not one this list returned (or was made for another order)") from None
