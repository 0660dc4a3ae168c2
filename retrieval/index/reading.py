"""What the index reads from ClickHouse: a namespace's load, in ranges of keys, and the delta a loaded mirror reads
of what other processes wrote (a ClickHouse server's; the embedded engine's writes all pass through this process).

No lock of its own: a load builds a mirror no search sees until the registry installs it; a delta read adds to a
loaded one through its own methods (each under the mirror's lock), one at a time (`Vectors.delta`).
"""

import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings

from retrieval.index.held import identity, shown_of
from retrieval.index.vectors import Vectors
from retrieval.store import clickhouse
from retrieval.store.rows import META, THESE_VERSIONS, RowId, row_id, versions

# An insert is visible within this long of the `inserted_at` the engine stamped on it (the stamp is taken as the
# engine writes the block, just before it commits): each delta read reaches back this far, so an insert that became
# visible late is still read (adding is idempotent, retiring one-way). Longer costs every search after a burst of
# writes a re-read of that burst.
SYNC_LAG = timedelta(seconds=2)


# How often a mirror asks again for the memory rows of rows that came without them (`Vectors.await_shown`): a
# write's come within moments; a failed write's never do (loom_repair retires its rows).
SHOWN_RETRY_S = 1.0


def read_delta(mirror: Vectors, org: str, namespace: str, model: str) -> None:
    """The vector rows that reached the engine since the mirror's last read: new versions added (with what a hit
    shows of them), retirements applied. First which rows came (identity, revision, status; no vectors), then the
    vectors of those the mirror does not hold: a row stays in the read-back window (SYNC_LAG) for a while, and this
    process's own writes reach the mirror directly, so most of what a delta sees is held already (re-reading a
    batch's vectors cost every search after it tens of milliseconds)."""
    came = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, revision, status, embedding_dim,
               now64(6, 'UTC') AS read_at
        FROM memory_embeddings
        WHERE {_WHERE} AND inserted_at > {{since:DateTime64(6, 'UTC')}}
        ORDER BY inserted_at
        """,
        {"org": org, "namespace": namespace, "model": model, "since": mirror.since},
    )
    if not came:
        return
    live = [row for row in came if row["status"] == "active" and row["embedding_dim"] > 0]
    if stubs := [row_id(row) for row in came if row["status"] == "active" and not row["embedding_dim"]]:
        mirror.add([], unvectored=stubs)  # another process stored them
    wanted = sorted({identity(row) for row in live if not mirror.holds(row_id(row), row["revision"])})
    if wanted:
        columns = columns_of(mirror.keyed, mirror.compact)
        rows = clickhouse.query_decoded(
            f"""
            SELECT {", ".join(columns)} FROM memory_embeddings
            WHERE {_WHERE} AND status = 'active' AND embedding_dim > 0 AND {THESE_VERSIONS}
            ORDER BY memory_key, agent, session_id, version, revision DESC
            LIMIT 1 BY memory_key, agent, session_id, version
            """,
            {"org": org, "namespace": namespace, "model": model, **versions(wanted)},
        )
        added = [dict(zip(columns, row)) for row in rows]
        fresh = [identity(row) for row in added if row_id(row) not in mirror.position]
        shown = shown_of(live_memory_columns(org, namespace, fresh), read=True) if fresh and not mirror.compact else {}
        # Chunks come only with a new version: whether the namespace has any is known once its new rows are asked.
        chunked = bool(fresh) and not mirror.chunked and _any_chunk(org, namespace, model, fresh)
        mirror.add(added, chunked, shown)
    ask_shown(mirror, org, namespace)
    mirror.retire([row_id(row) for row in came if row["status"] != "active"])
    mirror.since = max(mirror.since, came[-1]["read_at"] - SYNC_LAG)


def ask_shown(mirror: Vectors, org: str, namespace: str) -> None:
    """The memory rows of the rows the mirror awaits them for (`Vectors.await_shown`), at most every SHOWN_RETRY_S."""
    if not mirror.unshown or time.monotonic() - mirror.shown_asked < SHOWN_RETRY_S:
        return
    mirror.shown_asked = time.monotonic()
    wanted = [rid[1:] for rid in list(mirror.unshown)]
    mirror.take_shown(shown_of(live_memory_columns(org, namespace, wanted), read=True))


_COLUMNS = (
    "namespace",
    "memory_key",
    "agent",
    "session_id",
    "version",
    "revision",
    "value_vector",
    "key_vector",
    "duplicate_of",
    "user_id",
    "run_id",
    *META,
)


_WHERE = "org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}"


def columns_of(keyed: bool, compact: bool = False) -> tuple[str, ...]:
    """What a mirror reads of a vector row: the key vector only when it holds them (half the bytes otherwise); a
    compact mirror no rank columns but the type (a reflection is never a canonical)."""
    skipped = {"key_vector"} if not keyed else set()
    if compact:
        skipped |= set(META) - {"memory_type"}
    return tuple(name for name in _COLUMNS if name not in skipped)


def _any_chunk(org: str, namespace: str, model: str, identities: list[tuple]) -> bool:
    return bool(
        clickhouse.query_value(
            f"""
            SELECT count() > 0 FROM memory_chunks WHERE {_WHERE} AND {THESE_VERSIONS}
            """,
            {"org": org, "namespace": namespace, "model": model, **versions(identities)},
        )
    )


# A load reads a large namespace in ranges of memory_key of about this many rows, so its peak is the mirror plus two
# ranges' rows as read, the one being added and the next, read meanwhile (a million rows read at once held several
# times the mirror's bytes: the wire copy, the rows decoded, the arrays built from them).
LOAD_STEP = 100_000


FIRST_LOAD_STEP = 10_000


def load(
    org: str, namespace: str, model: str, progressed: Callable, keyed: bool, compact: bool = False
) -> Vectors | None:
    """The namespace's mirror, read in ranges of keys: with key vectors if `keyed` and they fit
    LOOM_VECTOR_MIRROR_MAX_BYTES, else without; compact (for the write gates alone) if even that would be over it, or
    `compact` (its full mirror outgrew the budget); None when that would be over it too (ClickHouse serves it
    then)."""
    params = {"org": org, "namespace": namespace, "model": model}
    # Read first: rows reaching the engine while the load reads are then in the first delta.
    since = None if clickhouse.backend() == "embedded" else clickhouse.query_value("SELECT now64(6, 'UTC')")
    count, dim = clickhouse.query_rows(
        f"""
        SELECT count(), max(embedding_dim) FROM memory_embeddings
        WHERE {_WHERE} AND status = 'active' AND embedding_dim > 0
        """,
        params,
    )[0]
    keys_fit = count * Vectors.row_bytes(dim, True) <= settings.LOOM_VECTOR_MIRROR_MAX_BYTES
    keyed = keyed and keys_fit  # (without them: key-axis searches read ClickHouse, the rest this mirror)
    if compact or count * Vectors.row_bytes(dim, keyed) > settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
        if count * Vectors.row_bytes(dim, False, compact=True) > settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
            return None
        compact, keyed, keys_fit = True, False, False
    chunked = clickhouse.query_value(f"SELECT count() > 0 FROM memory_chunks WHERE {_WHERE}", params)
    columns = columns_of(keyed, compact)
    mirror = Vectors(keyed, compact)
    mirror.keys_fit = keys_fit
    key, began = (clickhouse.target(), org, namespace, model), time.monotonic()

    def read(low: str, high: str | None) -> tuple[list, list[dict]]:
        """A range's vector rows, then (a full mirror's) the values and dates of its live rows."""
        within = {**params, "low": low, "high": high}
        rows = clickhouse.query_decoded(
            f"""
            SELECT {", ".join(columns)}
            FROM memory_embeddings
            WHERE {_WHERE} AND {_KEY_RANGE} AND status = 'active' AND embedding_dim > 0
              AND (memory_key, agent, session_id, version) NOT IN (
                  SELECT memory_key, agent, session_id, version FROM memory_embeddings
                  WHERE {_WHERE} AND {_KEY_RANGE} AND status != 'active')
            ORDER BY memory_key, agent, session_id, version, revision DESC
            LIMIT 1 BY memory_key, agent, session_id, version
            """,
            within,
        )
        return rows, [] if compact else live_memory_columns(org, namespace, keys=(low, high))

    ranges = key_ranges(params, count)
    ahead = clickhouse.beside(read, *ranges[0])
    for at in range(len(ranges)):
        rows, live = ahead.result()
        if at + 1 < len(ranges):  # the engine reads the next range while this one's rows are added
            ahead = clickhouse.beside(read, *ranges[at + 1])
        # Sized for the namespace once, not doubled range by range (a doubling holds both copies), and a quarter over
        # for the writes to come: sized to the row, the first write after a load doubled every array under the lock
        # (for many seconds at millions of rows, the namespace's searches waiting). Rows never written take no memory.
        if rows:
            mirror.reserve(count + count // 4, dim)
        rows = [dict(zip(columns, row)) for row in rows]
        if compact:  # (no words, shown values or stubs to note)
            mirror.add(rows, bool(chunked), words=False)
        else:
            # (A write under way may store a row's vector after the first read and its value before the second: its
            # own notice adds the vector, and takes the row out of `unvectored`, once the load is in.)
            # (A high-sensitivity row has no model: never embedded nor indexed, it names nothing to either check.)
            # (Those the range's vector rows hold are left out as they are shown: `Vectors.show`.)
            unvectored = [RowId(namespace, *identity(row)) for row in live if row["embedding_model"]]
            mirror.add(rows, bool(chunked), shown_of(live, read=True), unvectored, words=False)
        progressed(key, began, len(mirror.ids), count)
    mirror.since = since - SYNC_LAG if since is not None else None
    return mirror


_KEY_RANGE = "memory_key >= {low:String} AND ({high:Nullable(String)} IS NULL OR memory_key < {high:Nullable(String)})"


def key_ranges(params: dict, count: int) -> list[tuple[str, str | None]]:
    """[low, high) ranges of memory_key holding about LOAD_STEP of the namespace's live vector rows each (a key's
    rows all in one), the first FIRST_LOAD_STEP (its pace tells a waiting write soon whether to wait: `awaited`); a
    single range below LOAD_STEP."""
    if count <= LOAD_STEP:
        return [("", None)]
    keys = clickhouse.query_rows(
        f"""
        SELECT memory_key FROM memory_embeddings
        WHERE {_WHERE} AND status = 'active' AND embedding_dim > 0
        ORDER BY memory_key
        """,
        params,
    )
    bounds = sorted({key for (key,) in [*keys[FIRST_LOAD_STEP : FIRST_LOAD_STEP + 1], *keys[LOAD_STEP::LOAD_STEP]]})
    return list(zip(["", *bounds], [*bounds, None]))


# What a hit shows of a row, and what the mirror's word counts need: the names its triples declare, whether it was
# embedded at all (`embedding_model` is empty for a high-sensitivity row).
SHOWN_COLUMNS = (
    *("memory_key", "agent", "session_id", "version"),
    *("value", "valid_at", "created_at", "triples", "embedding_model"),
)


def live_memory_columns(
    org: str, namespace: str, only: list[tuple] | None = None, keys: tuple[str, str | None] = ("", None)
) -> list[dict]:
    """Value and dates of the namespace's live rows (`only` these identities; those whose key is in the range
    `keys`), by the same liveness rule as the vectors."""
    where = f"org = {{org:String}} AND namespace = {{namespace:String}} AND {_KEY_RANGE}"
    params = {"org": org, "namespace": namespace, "low": keys[0], "high": keys[1]}
    if only is not None:
        where += f" AND {THESE_VERSIONS}"
        params |= versions(only)
    rows = clickhouse.query_decoded(
        f"""
        SELECT {", ".join(SHOWN_COLUMNS)} FROM memories
        WHERE {where} AND status = 'active'
          AND (memory_key, agent, session_id, version) NOT IN (
              SELECT memory_key, agent, session_id, version FROM memories WHERE {where} AND status != 'active')
        LIMIT 1 BY memory_key, agent, session_id, version
        """,
        params,
    )
    return [dict(zip(SHOWN_COLUMNS, row)) for row in rows]
