"""Which namespaces changed since this process last asked the engine: a search's way past its change reads.

On a ClickHouse server other processes write, so before a search reads its in-process copies (the index's delta,
the side-table and configuration check) it must learn what changed: two statements, most of a warm search's time
(docs/operating.md). A namespace's stamp says whether they are needed: a copy asks again only once its stamp moved,
or its last answer is LOOM_CHANGE_MARKER_MAX_AGE_S old (a net for a change no stamp sees, a mutation by hand). The
embedded engine needs none: one process owns its data and sees every write.

LOOM_CHANGE_MARKER says where stamps come from:
- `engine` (the default): the engine's counts of the rows each namespace's tables took, kept by views on every
  insert (schema 0023): one small statement for all of a search's namespaces, wherever the writers run. Vector rows
  are counted apart from side tables, so a memory write sends the next search to the delta read alone. Searches
  queued behind a count read take the next read's answer (`SharedRead`: it began after they did).
- `host`: every writer on one host, one LOOM_VAR_DIR: a committed write stamps its namespace's slot in a shared file,
  no statement at all (a write from elsewhere is seen at the max age). A stamp is random, not a counter: racing
  writers leave one, which differs from what any reader saw, and a difference is all a reader needs. A writer swaps
  the stamp under the file's lock, so it knows the one it replaced: where a copy last asked at that stamp, no other
  writer came between and the copy takes the new stamp (`advanced`). An engine count cannot say so.

The costs measured: docs/benchmarks.md ("On a ClickHouse server every search first reads ...").
"""

import fcntl
import logging
import mmap
import os
import secrets
import struct
import threading
import time
from dataclasses import dataclass
from hashlib import blake2b

from django.conf import settings

from retrieval.store import clickhouse
from retrieval.store.shared_read import SharedRead

log = logging.getLogger(__name__)

SLOTS = 1 << 16  # 512 KiB of stamps
_STAMP = struct.Struct("<Q")
_opened: tuple[str, mmap.mmap] | None = None
_opening = threading.Lock()
_swapping = threading.Lock()  # the file's lock excludes other processes; this, this process's own threads


@dataclass(frozen=True)
class Stamp:
    """What a namespace's stamp says of its vector rows (the mirror's delta read) and of its side tables and
    configuration (their check): one random number for both with `host`, two counts with `engine`."""

    vectors: int
    side: int
    read_at: float  # time.monotonic() when it was read: a copy is asked again past the max age


def _marker() -> str | None:
    """Where stamps come from here (`engine`, `host`); None on the embedded engine."""
    return None if clickhouse.backend() == "embedded" else settings.LOOM_CHANGE_MARKER


def wrote(org: str, namespace: str) -> tuple[int, int] | None:
    """A write to this namespace committed: with `host`, stamp it, so the host's other processes ask the engine
    before their next search. Returns the stamp it replaced and its own (None unless the marker is `host`: the
    engine counts every write itself)."""
    if _marker() != "host":
        return None
    slots, at, stamp = _slots(), _slot(org, namespace), secrets.randbits(64)
    with _swapping:
        # A POSIX record lock, on a descriptor of its own: the lock is the process's (a forked worker's is not its
        # parent's or siblings', as flock's would be), and closing the descriptor releases it.
        fd = os.open(_path(), os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            replaced = _STAMP.unpack_from(slots, at)[0]
            _STAMP.pack_into(slots, at, stamp)
        finally:
            os.close(fd)
    return replaced, stamp


def advanced(asked: Stamp | None, swapped: tuple[int, int] | None) -> Stamp | None:
    """What a copy that has applied this process's own write (`swapped`: what `wrote` returned) was asked at: the
    write's stamp, when the one it replaced is the copy's own (no other writer came between); else as it was. The
    time it was asked stays: the max age still counts from the engine's answer."""
    if asked is None or swapped is None or asked.vectors != swapped[0]:
        return asked
    return Stamp(swapped[1], swapped[1], asked.read_at)


def read(org: str, namespaces: list[str]) -> dict[str, Stamp]:
    """Each namespace's stamp now, read before asking the engine what changed (so a write stamped meanwhile is asked
    again): from the host's file, or the engine's write counts (one statement, shared by the searches queued behind
    it). Empty on the embedded engine, and when the engine refuses the statement: every copy then asks. An engine
    that does not answer fails the search (ClickHouseUnavailable), and the searches queued behind its read with it."""
    marker, at = _marker(), time.monotonic()
    if marker == "host":
        slots = _slots()
        stamps = {namespace: _STAMP.unpack_from(slots, _slot(org, namespace))[0] for namespace in namespaces}
        return {namespace: Stamp(stamp, stamp, at) for namespace, stamp in stamps.items()}
    if marker is None or not namespaces:
        return {}
    named = tuple(sorted(set(namespaces)))
    try:
        counts, read_at = _counts(org, named).since(at, lambda: _count(org, named))
    except clickhouse.ClickHouseError as exc:
        log.warning("write counts of %s unread, every copy asks: %s", org, exc)
        return {}
    return {namespace: Stamp(*counts.get(namespace, (0, 0)), read_at) for namespace in namespaces}


def _count(org: str, namespaces: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """The engine's counts of the rows these namespaces' vector tables and side tables have taken."""
    counted = clickhouse.query_rows(
        """
        SELECT namespace, sum(vector_rows), sum(side_rows) FROM namespace_writes
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)}
        GROUP BY namespace
        """,
        {"org": org, "namespaces": list(namespaces)},
    )
    return {namespace: (vectors, side) for namespace, vectors, side in counted}


_shared_counts: dict[tuple, SharedRead] = {}
_sharing = threading.Lock()
MAX_SHARED = 4096  # sets of namespaces whose counts are shared; past it the table starts again (it only saves reads)


def _counts(org: str, namespaces: tuple[str, ...]) -> SharedRead:
    key = (clickhouse.target(), org, namespaces)
    with _sharing:
        if (shared := _shared_counts.get(key)) is None:
            if len(_shared_counts) >= MAX_SHARED:
                _shared_counts.clear()
            shared = _shared_counts[key] = SharedRead()
        return shared


def unchanged(asked: Stamp | None, current: Stamp | None, of: str) -> bool:
    """Nothing was written to the namespace's vector rows (`of` "vectors") or its side tables and configuration
    ("side") since the engine was asked at `asked`, and that answer is young enough to serve (None: no stamp, never
    unchanged)."""
    if asked is None or current is None:
        return False
    young = current.read_at - asked.read_at < settings.LOOM_CHANGE_MARKER_MAX_AGE_S
    return young and getattr(asked, of) == getattr(current, of)


def _slot(org: str, namespace: str) -> int:
    digest = blake2b(f"{org}\0{namespace}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % SLOTS * _STAMP.size


def _path() -> str:
    return os.path.join(settings.VAR_DIR, "changes")


def _slots() -> mmap.mmap:
    """The host's stamp file, mapped shared (a mapping made before a server forks its workers stays shared)."""
    global _opened
    path = _path()
    if _opened is not None and _opened[0] == path:
        return _opened[1]
    with _opening:
        if _opened is None or _opened[0] != path:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if os.fstat(fd).st_size < SLOTS * _STAMP.size:
                    os.ftruncate(fd, SLOTS * _STAMP.size)  # zeros; every process truncates to the same size
                _opened = (path, mmap.mmap(fd, SLOTS * _STAMP.size))
            finally:
                os.close(fd)
        return _opened[1]
