"""Key-based reads: memory.get, memory.bulk_get and memory.list.

A read sees the active version of each row; `history` adds every version,
superseded and deleted ones included, newest first.
"""

import base64
import json
from dataclasses import dataclass

from retrieval.caching import TtlCache
from retrieval.language.query import analyse
from retrieval.store import change_marker, clickhouse
from retrieval.store.tenants import Tenant

# Columns a read serves (the table's bookkeeping, revision, stays inside).
COLUMNS = """
    memory_key, agent, session_id, version, status, superseded_by, value, memory_type, tags,
    category, entities, triples, confidence, source_class, sensitivity, pinned, valid_at, user_id, run_id,
    actor, embedding_model, chunk_count, created_at, updated_at, duplicate_of, conflict_verdict, source_keys
"""

_SCOPE = "org = {org:String} AND namespace = {namespace:String}"
# The rows of `memories` a read reaches: the tenant's, held to the user and session the scope names (its read_scope,
# or the request's own narrowing: Scope.reading).
_ROWS = (
    f"{_SCOPE} AND ({{user:Nullable(String)}} IS NULL OR user_id = {{user:Nullable(String)}})"
    " AND ({session:Nullable(String)} IS NULL OR session_id = {session:Nullable(String)})"
)


def _params(scope: Tenant, **more) -> dict:
    return {"org": scope.org, "namespace": scope.namespace, "user": scope.user_id, "session": scope.session_id, **more}


def live_rows(org: str, namespace: str) -> int:
    """The namespace's live row count, from the BM25 corpus statistics (signed deltas, summed: exact at once)."""
    return (
        clickhouse.query_value(
            "SELECT sum(docs) FROM corpus_stats WHERE org = {org:String} AND namespace = {namespace:String} "
            "AND field = 'value'",
            {"org": org, "namespace": namespace},
        )
        or 0
    )


def get(scope: Tenant, memory_key: str, agent: str | None = None) -> list[dict]:
    """The key's active rows (one per writer and session), newest first."""
    return clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_ROWS} AND memory_key = {{key:String}} AND status = 'active'
          AND ({{agent:Nullable(String)}} IS NULL OR agent = {{agent:Nullable(String)}})
        ORDER BY version DESC
        LIMIT 1 BY agent, session_id
        """,
        _params(scope, key=memory_key, agent=agent),
    )


def history(scope: Tenant, memory_key: str) -> list[dict]:
    """Every version of every row of the key, newest first."""
    return clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_ROWS} AND memory_key = {{key:String}}
        ORDER BY version DESC
        """,
        _params(scope, key=memory_key),
    )


def retired_values(scope: Tenant, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
    """Each (namespace, key)'s superseded values (what memory.ask must not restate as current), newest first.

    The namespaces are those a search already served the caller (its own, or all_mine's)."""
    if not keys:
        return {}
    rows = clickhouse.query_rows(
        """
        SELECT namespace, memory_key, value FROM memories FINAL
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND memory_key IN {keys:Array(String)}
          AND (namespace, memory_key) IN {pairs:Array(Tuple(String, String))} AND status = 'superseded'
        ORDER BY version DESC
        """,
        {
            "org": scope.org,
            "namespaces": sorted({ns for ns, _ in keys}),
            "keys": sorted({key for _, key in keys}),
            "pairs": sorted(set(keys)),
        },
    )
    retired: dict[tuple[str, str], list[str]] = {}
    for namespace, key, value in rows:
        retired.setdefault((namespace, key), []).append(value)
    return retired


def keyword_matches(scope: Tenant, query: str, limit: int = 10) -> list[dict]:
    """Live keys whose value holds the query's content words (stemmed, stop words left out: the terms the lexical
    leg reads), most words first: what a plain keyword search would show beside the ranked hits."""
    terms = sorted(analyse(query).terms)
    if not terms:
        return []
    return clickhouse.query(
        f"""
        SELECT memory_key, uniqExact(term) AS matched, {{terms_total:UInt32}} AS terms_total
        FROM memory_terms FINAL
        WHERE {_SCOPE} AND field = 'value' AND term IN {{terms:Array(String)}} AND status = 'active'
        GROUP BY memory_key
        ORDER BY matched DESC, memory_key
        LIMIT {{limit:UInt32}}
        """,
        _params(scope, terms=terms, terms_total=len(terms), limit=limit),
    )


def chunks(scope: Tenant, memory_key: str) -> list[dict]:
    """The verbatim chunks of the key's live rows, in order (what the chunk leg searches)."""
    return clickhouse.query(
        f"""
        SELECT agent, session_id, version, chunk_index, start_char, text, embedding_model, embedding_dim
        FROM memory_chunks FINAL
        WHERE {_SCOPE} AND memory_key = {{key:String}} AND status = 'active'
        ORDER BY agent, session_id, version, chunk_index
        """,
        _params(scope, key=memory_key),
    )


def bulk_get(scope: Tenant, keys: list[str]) -> dict[str, dict]:
    """The newest active row of each key found, by key."""
    rows = clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_ROWS} AND memory_key IN {{keys:Array(String)}} AND status = 'active'
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


EXCERPT_CHARS = 160  # of the newest value, in a listing


def list_keys(
    scope: Tenant,
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
               max(version) AS newest_version, max(updated_at) AS newest_update, {sort} AS sort_value,
               argMax(sensitivity, version) AS newest_sensitivity, argMax(duplicate_of, version) AS newest_duplicate_of,
               leftUTF8(argMax(value, version), {{excerpt:UInt32}}) AS newest_excerpt
        FROM memories FINAL
        WHERE {_ROWS} AND status = 'active'
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
            scope,
            type=memory_type,
            agent=agent,
            prefix=key_prefix or "",
            after_sort=after_sort,
            after_key=after_key,
            limit=limit + 1,
            excerpt=EXCERPT_CHARS,
        ),
    )
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = _encode(order, rows[-1]["sort_value"], rows[-1]["memory_key"]) if more else None
    items = [
        {
            "memory_key": row["memory_key"],
            "memory_type": row["newest_type"],
            "rows": row["rows"],
            "version": row["newest_version"],
            "updated_at": row["newest_update"],
            "sensitivity": row["newest_sensitivity"],
            # A high-sensitivity value is read by its key alone (memory.get), never shown in a listing.
            "excerpt": "" if row["newest_sensitivity"] == "high" else row["newest_excerpt"],
            "duplicate_of": row["newest_duplicate_of"] or None,
        }
        for row in rows
    ]
    return Page(items=items, next_cursor=next_cursor)


def recall(
    scope: Tenant, memory_key: str | None = None, limit: int = 50, cursor: str | None = None
) -> tuple[Page, str | None]:
    """The conversation turns behind a memory (its `source_keys`; a turn, itself), or (no key) the turns of the
    session the scope is held to, in the order they were said; paged by a keyset cursor. With a reason when none
    can be: source_not_found, source_has_no_turns."""
    keys = None
    if memory_key is not None:
        source = get(scope, memory_key)
        if not source:
            return Page([], None), "source_not_found"
        keys = [memory_key] if source[0]["memory_type"] == "turn" else source[0]["source_keys"]
        if not keys:
            return Page([], None), "source_has_no_turns"
    after_at, after_key = _decode(cursor, "recall") if cursor else (None, None)
    rows = clickhouse.query(
        f"""
        SELECT {COLUMNS}, toUnixTimestamp64Milli(coalesce(valid_at, created_at)) AS said_at
        FROM memories FINAL
        WHERE {_ROWS} AND memory_type = 'turn' AND status = 'active'
          AND ({{whole_session:Bool}} OR has({{keys:Array(String)}}, memory_key))
          AND ({{after_key:Nullable(String)}} IS NULL
               OR (said_at, memory_key) > ({{after_at:Nullable(Int64)}}, {{after_key:Nullable(String)}}))
        ORDER BY said_at, memory_key
        LIMIT {{limit:UInt32}}
        """,
        _params(
            scope, whole_session=keys is None, keys=keys or [], after_at=after_at, after_key=after_key, limit=limit + 1
        ),
    )
    more, rows = len(rows) > limit, rows[:limit]
    return Page(rows, _encode("recall", rows[-1]["said_at"], rows[-1]["memory_key"]) if more else None), None


def sessions(scope: Tenant, limit: int = 100) -> list[dict]:
    """The namespace's conversations (sessions with turns), the most recently spoken in first: each one's turn
    count and first and last turn's time."""
    return clickhouse.query(
        f"""
        SELECT session_id, count() AS turns, min(coalesce(valid_at, created_at)) AS first_at,
               max(coalesce(valid_at, created_at)) AS last_at
        FROM memories FINAL
        WHERE {_ROWS} AND memory_type = 'turn' AND status = 'active'
        GROUP BY session_id
        ORDER BY last_at DESC, session_id
        LIMIT {{limit:UInt32}}
        """,
        _params(scope, limit=limit),
    )


def extracted_from(scope: Tenant, turn_keys: list[str]) -> dict[str, list[dict]]:
    """The live facts extracted from these turns, by turn (a fact of several turns under each)."""
    rows = clickhouse.query(
        f"""
        SELECT {COLUMNS} FROM memories FINAL
        WHERE {_SCOPE} AND status = 'active' AND source_class = 'extracted'
          AND hasAny(source_keys, {{keys:Array(String)}})
        ORDER BY memory_key
        """,
        _params(scope, keys=turn_keys),
    )
    found: dict[str, list[dict]] = {}
    for row in rows:
        for key in row["source_keys"]:
            found.setdefault(key, []).append(row)
    return found


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


# Rows these key-free reads serve: live, and not high-sensitivity (those are read by key only).
_SERVABLE = f"{_ROWS} AND status = 'active' AND sensitivity != 'high'"


def timeline(
    scope: Tenant,
    entity: str | None = None,
    tags: list[str] | None = None,
    memory_key_prefix: str | None = None,
    since=None,
    until=None,
    order: str = "desc",
    top_k: int = 50,
) -> tuple[list[dict], int]:
    """Rows about an entity, a tag set or a key prefix, in time order (coalesce(valid_at, created_at)).

    Returns the window and how many rows match in all, so a caller knows there is more.
    """
    direction = "ASC" if order == "asc" else "DESC"
    rows = clickhouse.query(
        f"""
        SELECT {COLUMNS}, coalesce(valid_at, created_at) AS at, count() OVER () AS total
        FROM memories FINAL
        WHERE {_SERVABLE}
          AND ({{entity:Nullable(String)}} IS NULL OR has(arrayMap(e -> lower(e), entities), lower({{entity:Nullable(String)}})))
          AND (empty({{tags:Array(String)}}) OR hasAny(tags, {{tags:Array(String)}}))
          AND startsWith(memory_key, {{prefix:String}})
          AND ({{since:Nullable(DateTime64(3, 'UTC'))}} IS NULL OR at >= {{since:Nullable(DateTime64(3, 'UTC'))}})
          AND ({{until:Nullable(DateTime64(3, 'UTC'))}} IS NULL OR at < {{until:Nullable(DateTime64(3, 'UTC'))}})
        ORDER BY at {direction}, memory_key, agent, session_id
        LIMIT {{top_k:UInt32}}
        """,
        _params(
            scope, entity=entity, tags=tags or [], prefix=memory_key_prefix or "", since=since, until=until, top_k=top_k
        ),
    )
    return rows, (rows[0]["total"] if rows else 0)


def related(scope: Tenant, memory_key: str, min_overlap: int = 1, top_k: int = 20) -> tuple[list[dict], str | None]:
    """Rows sharing entities with the key's newest row, most shared first; (rows, reason when none can be)."""
    source = get(scope, memory_key)
    if not source:
        return [], "source_not_found"
    wanted = sorted({entity.lower() for entity in source[0]["entities"]})
    if not wanted:
        return [], "source_has_no_entities"
    rows = clickhouse.query(
        f"""
        SELECT {COLUMNS},
               arrayIntersect(arrayDistinct(arrayMap(e -> lower(e), entities)), {{wanted:Array(String)}}) AS shared,
               length(shared) AS overlap
        FROM memories FINAL
        WHERE {_SERVABLE} AND memory_key != {{key:String}} AND overlap >= {{min_overlap:UInt32}}
        ORDER BY overlap DESC, coalesce(valid_at, created_at) DESC, memory_key
        LIMIT {{top_k:UInt32}}
        """,
        _params(scope, wanted=wanted, key=memory_key, min_overlap=min_overlap, top_k=top_k),
    )
    for row in rows:
        row["shared"] = sorted(row["shared"])
    return rows, None


# Tables that hold texts beside the rows (digests, entity summaries, typed records), each with the column that
# names one (one live version per name). Most namespaces hold none, so a search asks once which they hold
# (`side_tables_held`) before it reads them.
SIDE_KEYS = {"session_summaries": "session_id", "entity_summaries": "entity", "memory_records": "record_key"}
_held = TtlCache(10)
# On a ClickHouse server: (the host's stamps when the engine was asked, its answer); `change_marker` says how long
# an answer serves.
_asked = TtlCache(0)


def _side(table: str) -> str:
    """`table`'s key column, refusing a table that is not a side table (names reach SQL only from SIDE_KEYS)."""
    if table not in SIDE_KEYS:
        raise ValueError(f"{table} is not a side table")
    return SIDE_KEYS[table]


def live_side(table: str, scope: Tenant, keys: list[str]) -> dict[str, dict]:
    """The live versions of these names in `table` (a side table), by name."""
    column = _side(table)
    rows = clickhouse.query(
        f"""
        SELECT * FROM {table} FINAL
        WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND {column} IN {{keys:Array(String)}}
          AND status = 'active'
        """,
        _params(scope, keys=keys),
    )
    return {row[column]: row for row in rows}


def side_tables_held(
    org: str, namespaces: list[str], configured: str | None = None, stamps: dict | None = None
) -> tuple[frozenset[str], int | None]:
    """The side tables holding a live row in any of these namespaces, and the configuration revision of namespace
    `configured` (0: none registered; None: not asked). The embedded engine's answer is kept 10 s per namespace (every
    write passes through this process, and says so at once: `now_holds`) and its configuration is not asked (the
    process's copy is the engine's); on a ClickHouse server another process may have written either since, so a
    search asks, in one statement, unless the namespaces' stamps (`stamps`, as `change_marker.read` gave them for
    these namespaces and `configured`; read here when not given) say nothing was written since it last asked
    (retrieval/store/change_marker.py)."""
    target = clickhouse.target()
    if clickhouse.backend() != "embedded":
        named = _stamped(namespaces, configured)
        stamps = change_marker.read(org, named) if stamps is None else stamps
        now = [stamps.get(namespace) for namespace in named]
        key = (target, org, tuple(namespaces), configured)
        asked = _asked.last(key)
        if asked is not None and all(change_marker.unchanged(was, stamp, "side") for was, stamp in zip(asked[0], now)):
            return asked[1]
        return _asked.put(key, (now, _side_tables(org, namespaces, configured)))[1]
    held = frozenset().union(*(_held.get((target, org, n), lambda n=n: _side_tables(org, [n])[0]) for n in namespaces))
    return held, None


def _stamped(namespaces: list[str] | tuple[str, ...], configured: str | None) -> list[str]:
    """The namespaces whose stamps a side-table answer is kept with, in the order its stamps are listed."""
    return sorted({*namespaces, configured or ""} - {""})


def _side_tables(org: str, namespaces: list[str], configured: str | None = None) -> tuple[frozenset[str], int | None]:
    # Without FINAL: a live version anywhere says "read this table"; one deleted since costs the leg a read that
    # finds nothing, where merging every version here would cost every search.
    selects = [
        f"SELECT '{table}', 0 FROM {table} WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}}"
        " AND status = 'active' LIMIT 1"
        for table in SIDE_KEYS
    ]
    if configured is not None:
        selects.append(
            "SELECT 'namespaces', max(revision) FROM namespaces WHERE org = {org:String} AND namespace = {configured:String}"
        )
    rows = clickhouse.query_rows(
        " UNION ALL ".join(selects), {"org": org, "namespaces": namespaces, "configured": configured or ""}
    )
    revision = next((revision for name, revision in rows if name == "namespaces"), None)
    return frozenset(name for name, _ in rows if name in SIDE_KEYS), revision


def kept(org: str, namespace: str, swapped: tuple[int, int] | None) -> None:
    """This process's own write to `namespace` (`swapped`: its stamp swap, `change_marker.wrote`) stored no live
    side-table row and no configuration: the answers asked here for the namespace stay the engine's, at the write's
    stamp, unless another writer stamped between. (A write that does store one stamps again through `now_holds`,
    which no answer takes: the next search asks.)"""
    if swapped is None:
        return
    target = clickhouse.target()
    for key, (stamps, answer) in _asked.items():
        if key[:2] != (target, org):
            continue
        names = _stamped(*key[2:])
        if namespace in names:
            at = names.index(namespace)
            _asked.put(key, ([*stamps[:at], change_marker.advanced(stamps[at], swapped), *stamps[at + 1 :]], answer))


def now_holds(table: str, org: str, namespace: str) -> None:
    """A write just stored a live row in `table`: the next search here, and on the host's other processes, reads it."""
    change_marker.wrote(org, namespace)
    key = (clickhouse.target(), org, namespace)
    if (known := _held.last(key)) is not None:  # else the next search reads what the namespace holds
        _held.put(key, known | {table})
