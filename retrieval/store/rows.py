"""A memory row version's identity, as every table keys it, and how new versions are numbered."""

import threading
import time
from typing import NamedTuple

# A row version's status: the active version of an identity is the one search reads.
ACTIVE, SUPERSEDED, DELETED = "active", "superseded", "deleted"

# The row identity within an org, in the order the tables' sort keys and the IN-tuples of the legs spell it.
IDENTITY_COLUMNS = ("namespace", "memory_key", "agent", "session_id", "version")
IDENTITY = ", ".join(IDENTITY_COLUMNS)
# A list of identities as one bound parameter: `(namespace, ...) IN {ids:IDENTITY_TYPE}`.
IDENTITY_TYPE = "Array(Tuple(String, String, String, String, UInt64))"

# Some row versions of one namespace, by (memory_key, agent, session_id, version): the keys narrow the primary
# key, the tuples pick the versions. Its parameters: `versions(identities)`.
THESE_VERSIONS = (
    "memory_key IN {keys:Array(String)}"
    " AND (memory_key, agent, session_id, version) IN {ids:Array(Tuple(String, String, String, UInt64))}"
)


def versions(identities: list[tuple]) -> dict:
    """THESE_VERSIONS's parameters."""
    return {"keys": sorted({identity[0] for identity in identities}), "ids": list(identities)}


# What ranking reads of a row, carried on its vector row so the pool is ranked without `memories`.
META = ("memory_type", "tags", "category", "entities", "source_class", "confidence", "sensitivity", "dated_at")


class RowId(NamedTuple):
    """A row version's identity. A tuple, not a frozen dataclass: a write batch or a search makes thousands."""

    namespace: str
    memory_key: str
    agent: str
    session_id: str
    version: int

    def as_tuple(self) -> tuple:
        return tuple(self)


def row_id(row: dict) -> RowId:
    return RowId(*(row[column] for column in IDENTITY_COLUMNS))


def name_order(rid: RowId) -> tuple:
    """A row's name as ties break on it (key first), so two identical searches fill a pool identically."""
    return (rid.memory_key, rid.namespace, rid.agent, rid.session_id, rid.version)


_version_lock = threading.Lock()
_last_version = 0


def next_version() -> int:
    """Nanoseconds since the epoch, strictly increasing within the process."""
    global _last_version
    with _version_lock:
        _last_version = max(time.time_ns(), _last_version + 1)
        return _last_version
