"""Which namespaces changed since this process last asked the engine: a search's way past its change reads.

On a ClickHouse server other processes write, so a search must learn what changed in its namespaces before reading
its in-process copies (the vector mirror's delta read, the side-table and configuration check): two statements,
7-13 ms each on this 2-core box, most of a warm search. A stamp says whether they are needed: each namespace's stamp
is read first (`read`), and a copy asks the engine again only once its namespace's stamp moved since the copy's last
answer, or that answer is LOOM_CHANGE_MARKER_MAX_AGE_S old (a safety net for changes no stamp sees: a mutation run
by hand). The embedded engine needs none: one process owns its data and sees every write.

Where the stamps come from (LOOM_CHANGE_MARKER):
- `engine` (the default): the engine's counts of the rows each namespace's tables have taken, kept by views on every
  insert (schema 0023_namespace_writes): one small statement for all of a search's namespaces, right wherever the
  writers run. The vector rows are counted apart from the side tables and configuration, so a memory write sends the
  next search to the delta read alone.
- `host`: when every process that writes to the database runs on one host with one LOOM_VAR_DIR, a write that
  committed stamps its namespace's slot in a small file those processes share: no statement at all. A write
  elsewhere (another host, SQL by hand) stamps nothing, and is read once the max age has passed.

A host stamp is a random number, not a counter: two writers racing leave one of their stamps, which differs from
what any reader saw before either, and that difference is all a reader needs. Namespaces share a slot by hash now
and then; a shared slot only costs a read.

With `engine`, the searches of one process that queue behind a count read take the next read's answer: a read that
began after a search began saw every write acknowledged before it (`SharedRead`). A read is a round trip (2.5 ms here,
0.6 ms of it the worker's CPU, against 1.6 ms for `SELECT 1`); 8 clients on two workers: the busier worker read
counts for 408 of 1,000 searches, and 141-178 -> 157-198 searches/s (five runs each way, alternated).

With `host`, a process's own memory write needs no read either: its vector mirror applied the write as the write
path stored it, and the write stored no side-table row. A writer swaps the slot's stamp under the file's lock, so it
knows the stamp it replaced; where that is the stamp a copy last asked at, no other writer came between, and the copy
takes the new stamp (`advanced`: the mirror, and the side-table answers, `reads.kept`). An engine count cannot say
that no other writer came between, so with `engine` the next search after a write reads what changed.
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
