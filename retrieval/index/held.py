"""How the index holds a row: its rank columns, its id, its dates and what a hit shows of it, kept so that a million
rows cost the least memory and the garbage collector the least work. Pure functions, no lock."""

from sys import intern

import numpy as np

from retrieval.store import native
from retrieval.store.rows import META, RowId

# A hit's columns that the vector row already carries.
SHOWN_META = ("memory_type", "tags", "entities", "source_class")


def meta_of(row: dict) -> dict:
    """A row's rank columns as the mirror keeps them: lists (tags, entities) as tuples. The garbage collector stops
    tracking a dict of immutable values; with lists, every row left three objects for each full collection to walk,
    every thread held meanwhile (docs/benchmarks.md). Strings interned, as in `held_id`; `dated_at` as its
    DateTime64(3) column keeps it (a write's notice carries microseconds, which a read of the row never shows)."""
    meta = {name: _interned(row[name]) for name in META}
    if (dated := meta["dated_at"]) is not None and dated.microsecond % 1000:
        meta["dated_at"] = native.as_stored(dated)
    return meta


def _interned(value):
    if isinstance(value, str):
        return intern(value)
    if isinstance(value, list):
        return tuple(intern(item) if isinstance(item, str) else item for item in value)
    return value


def held_id(rid: RowId) -> RowId:
    """A row's id as the mirror keeps it: its namespace, agent and session interned. A decoded or parsed row
    brings its own copy of each, which the mirror would otherwise keep for every row (with the rank columns' strings,
    hundreds of bytes a row)."""
    return RowId(intern(rid.namespace), rid.memory_key, intern(rid.agent), intern(rid.session_id), rid.version)


def ms(moment) -> np.datetime64:
    """A timezone-aware datetime as numpy's UTC milliseconds (ClickHouse keeps dated_at to the millisecond)."""
    return np.datetime64(moment.replace(tzinfo=None) - moment.utcoffset(), "ms")


def dates(moments: list) -> list[np.datetime64]:
    """`ms` of each, every distinct moment converted once: a write's rows share theirs."""
    converted = {moment: ms(moment) for moment in set(moments)}
    return [converted[moment] for moment in moments]


def identity(row: dict) -> tuple:
    return row["memory_key"], row["agent"], row["session_id"], row["version"]


def shown_of(memory_rows: list[dict], read: bool = False) -> dict[tuple, tuple]:
    """What a hit shows of each memory row (value, valid_at, created_at), dates as ClickHouse keeps them (a write
    notice carries microseconds; rows `read` from ClickHouse have them so), and the names its triples declare (entity
    mentions too, as the write path stores them), by identity. A vector row without one is hydrated from ClickHouse."""
    stored = (lambda moment: moment) if read else native.as_stored
    return {
        identity(m): (
            m["value"],
            stored(m["valid_at"]),
            stored(m["created_at"]),
            tuple({part.lower() for subject, _, obj in m["triples"] for part in (subject, obj)}),
        )
        for m in memory_rows
    }


# The write gates compare a row with rows of its write scope only: a duplicate's canonical must be visible wherever
# the duplicate is (the same writer, user, session and run), and be the same kind of memory.
SCOPE = ("agent", "user_id", "session_id", "run_id", "memory_type")


def scope_of(row: dict) -> tuple:
    return tuple(row[name] for name in SCOPE)
