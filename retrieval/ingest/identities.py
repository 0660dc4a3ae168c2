"""A memory's identity (memory_key, agent, session_id) as the writers hold it: its lock and its current rows.

Each identity's writes are serialised within the process by a striped lock; writers in other processes race,
and the newest active version wins (`active_rows`).
"""

import threading
import zlib

from retrieval.store import clickhouse
from tenancy.access import Scope

_STRIPES = [threading.Lock() for _ in range(64)]


class Locked:
    """Hold the stripes of a batch's identities, taken in order so batches cannot deadlock."""

    def __init__(self, scope: Scope, keys):
        self.locks = [
            _STRIPES[i]
            for i in sorted({zlib.crc32(f"{scope.org}\0{scope.namespace}\0{key}".encode()) % 64 for key in keys})
        ]

    def __enter__(self):
        for lock in self.locks:
            lock.acquire()

    def __exit__(self, *exc):
        for lock in reversed(self.locks):
            lock.release()


def active_rows(scope: Scope, keys: set[str]) -> dict[tuple, dict]:
    """The keys' current rows, by identity (memory_key, agent, session_id): what a write compares with."""
    rows = clickhouse.query(
        """
        SELECT * FROM memories FINAL
        WHERE org = {org:String} AND namespace = {namespace:String}
          AND memory_key IN {keys:Array(String)} AND status = 'active'
        ORDER BY version
        """,
        {"org": scope.org, "namespace": scope.namespace, "keys": sorted(keys)},
    )
    # A race between two processes can leave two active versions; the newest is current.
    return {(row["memory_key"], row["agent"], row["session_id"]): row for row in rows}


def as_stored(scope: Scope, rows: list[dict]) -> list[dict | None]:
    """Each row (its memory_key, agent, session_id and version) as stored now, at its newest revision; None where
    that version is no longer the active one (a job's rows that moved on since it was queued)."""
    stored = active_rows(scope, {row["memory_key"] for row in rows})
    current = [stored.get((row["memory_key"], row["agent"], row["session_id"])) for row in rows]
    return [now if now is not None and now["version"] == row["version"] else None for now, row in zip(current, rows)]
