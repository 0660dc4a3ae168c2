"""Which namespaces changed since this process last asked the engine: a search's way past its change reads.

On a ClickHouse server other processes write, so every search asks the engine what changed in its namespaces
before reading its in-process copies (the vector mirror's delta read, the side-table and configuration check):
two statements, 10-15 ms each on this 2-core box, most of a warm search. When every process that writes to the
database runs on one host with one LOOM_VAR_DIR (LOOM_CHANGE_MARKER=host), a write that committed stamps its
namespace's slot in a small file those processes share, and a search asks the engine only once the slot's stamp
moved since it last asked. A write elsewhere (another host, SQL by hand) stamps nothing: a copy is then at most
LOOM_CHANGE_MARKER_MAX_AGE_S old, after which the search asks anyway. With the default marker, `engine`, every
search asks. The embedded engine needs neither: one process owns its data and sees every write.

A stamp is a random number, not a counter: two writers racing leave one of their stamps, which differs from what
any reader saw before either, and that difference is all a reader needs. Namespaces share a slot by hash now and
then; a shared slot only costs a read.
"""

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

SLOTS = 1 << 16  # 512 KiB of stamps
_STAMP = struct.Struct("<Q")
_opened: tuple[str, mmap.mmap] | None = None
_opening = threading.Lock()


@dataclass(frozen=True)
class Stamp:
    value: int
    read_at: float  # time.monotonic() when it was read: a copy is asked again past the max age


def shared() -> bool:
    """Whether searches here trust the host's stamps (else they ask the engine every time)."""
    return settings.LOOM_CHANGE_MARKER == "host" and clickhouse.backend() != "embedded"


def wrote(org: str, namespace: str) -> None:
    """A write to this namespace committed: the host's other processes ask the engine before their next search."""
    if shared():
        _STAMP.pack_into(_slots(), _slot(org, namespace), secrets.randbits(64))


def now(org: str, namespace: str) -> Stamp | None:
    """The namespace's stamp, read before asking the engine (so a write stamped meanwhile is asked again); None
    while the marker is off."""
    if not shared():
        return None
    return Stamp(_STAMP.unpack_from(_slots(), _slot(org, namespace))[0], time.monotonic())


def unchanged(asked: Stamp | None, current: Stamp | None) -> bool:
    """Nothing was written since the engine was asked at `asked`, and that answer is young enough to serve."""
    if asked is None or current is None:
        return False
    return asked.value == current.value and current.read_at - asked.read_at < settings.LOOM_CHANGE_MARKER_MAX_AGE_S


def _slot(org: str, namespace: str) -> int:
    digest = blake2b(f"{org}\0{namespace}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % SLOTS * _STAMP.size


def _slots() -> mmap.mmap:
    """The host's stamp file, mapped shared (a mapping made before a server forks its workers stays shared)."""
    global _opened
    path = os.path.join(settings.VAR_DIR, "changes")
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
