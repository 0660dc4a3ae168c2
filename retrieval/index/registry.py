"""Which namespaces' mirrors this process holds: loaded in the background on a namespace's first search, brought up
to date before each op reads them (`sync`), warmed at a start, and dropped, least recently searched first, to stay
within LOOM_VECTOR_MIRROR_MAX_BYTES.

Lock story: `lock` guards the registry's dicts (`mirrors`, `pending`, ...), never a mirror's arrays (each mirror
has its own lock, taken inside this one, never the other way round). `load_ended` (on the same lock) wakes the
writes and the warm-up that wait for a load.
"""

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings

from retrieval import metrics
from retrieval.index import reading
from retrieval.index.vectors import Vectors
from retrieval.store import change_marker, clickhouse, pace
from retrieval.store.rows import RowId

log = logging.getLogger(__name__)

lock = threading.Lock()
mirrors_held: dict[tuple[str, str, str, str], "Vectors | None"] = {}  # None: too large to mirror
keyed_wanted: set[tuple[str, str, str, str]] = set()  # the namespaces whose mirrors hold key vectors (`get`)
pending_notices: dict[tuple[str, str, str, str], list[tuple[str, list]]] = {}  # loading: the notices since it began
counting_words: set[tuple[str, str, str, str]] = (
    set()
)  # loaded, serving vectors, still counting its words (`count_words`)
last_used: dict[tuple[str, str, str, str], float] = {}  # when each mirror last served a search (eviction order)
outgrown: set[tuple[str, str, str, str]] = set()  # full mirrors grown past the byte budget: loaded compact again
# Notified as a load reads a range, installs its mirror, fails, or has counted its words (`awaited`, `warm`).
load_ended = threading.Condition(lock)
load_progress: dict[tuple[str, str, str, str], tuple[float, int, int]] = {}  # loading: (began, rows read, rows to read)


def enabled() -> bool:
    return settings.LOOM_VECTOR_MIRROR


def sync(org: str, namespaces: list[str], model: str, stamps: dict | None = None) -> None:
    """Bring these namespaces' loaded mirrors up to what the engine holds (on a ClickHouse server, where other
    processes write; the embedded engine's writes all pass through this process). Once per op, before it reads
    the mirrors, unless the namespace's stamp (`stamps`, as `change_marker.read` gave them; read here when not given)
    says no write came since the last read (retrieval/store/change_marker.py). A mirror the engine refuses to bring
    up to date is dropped: ClickHouse answers until it loads again. An engine that does not answer fails the op
    (ClickHouseUnavailable), and the mirror stays, to be read on from where it was once the engine answers."""
    if not enabled() or clickhouse.backend() == "embedded":
        return
    target, began = clickhouse.target(), time.monotonic()
    loaded = {n: mirror for n in namespaces if (mirror := mirrors_held.get((target, org, n, model))) is not None}
    if stamps is None and loaded:
        stamps = change_marker.read(org, list(loaded))
    for namespace, mirror in loaded.items():
        key, stamp = (target, org, namespace, model), stamps.get(namespace)
        try:
            if change_marker.unchanged(mirror.asked, stamp, "vectors"):
                reading.ask_shown(mirror, org, namespace)
                continue

            # The searches queued behind one delta read take its outcome instead of each reading again (with writes
            # coming, every search of every thread found the namespace changed, and the reads queued on the engine).
            def catch_up(mirror=mirror, namespace=namespace, stamp=stamp) -> None:
                reading.read_delta(mirror, org, namespace, model)
                mirror.asked = stamp

            mirror.delta.since(began, catch_up)
        except clickhouse.ClickHouseError as exc:
            log.warning("vector mirror of %s/%s dropped: its delta read failed: %s", org, namespace, exc)
            with lock:
                mirrors_held.pop(key, None)
            continue
        with lock:
            if mirrors_held.get(key) is mirror:
                keep(key, mirror)


def get(org: str, namespace: str, model: str, keys: bool = False, compact: bool = False) -> Vectors | None:
    """The namespace's mirror when it is loaded; else None, and (the first time) its load begins. With `keys` (a
    search scored on the key axis too), a mirror that holds no key vectors begins loading again with them (unless
    they would not fit the byte budget), and is returned meanwhile for what reads none (the write gates, the
    lexical and temporal legs): check `keyed` before scoring keys. The namespace's mirror holds them from then on.
    A compact mirror only with `compact` (the write gates')."""
    key = (clickhouse.target(), org, namespace, model)
    with lock:
        if keys:
            keyed_wanted.add(key)
        if key not in mirrors_held:
            _begin_load(key)
            return None
        mirror = mirrors_held[key]
        if mirror is not None and keys and not mirror.keyed and mirror.keys_fit:
            _begin_load(key)
        last_used[key] = time.monotonic()
        return mirror if mirror is None or compact or not mirror.compact else None


def awaited(org: str, namespace: str, model: str, timeout: float) -> Vectors | None:
    """The namespace's mirror for the write gates (a compact one too), as `get` gives it, but waiting up to `timeout`
    seconds for a load under way (or begun by this call) to install it: the first write after a start finds its
    namespace loading, and a load of 100k rows takes seconds. None when it is not in by then, or too large; at once
    when the load's pace so far says it will not be in by then (every write during a million rows' minute-long load
    waited the whole timeout before, and was unjudged after all)."""
    key = (clickhouse.target(), org, namespace, model)
    if get(org, namespace, model, compact=True) is None:
        deadline = time.monotonic() + timeout
        with lock:
            load_ended.wait_for(
                lambda: key in mirrors_held or key not in pending_notices or _ends_after(key, deadline), timeout
            )
    return get(org, namespace, model, compact=True)


def _ends_after(key: tuple[str, str, str, str], deadline: float) -> bool:
    """Whether the namespace's load, at its pace so far, reads its last row after `deadline`. Under lock."""
    if (progress := load_progress.get(key)) is None:
        return False
    began, read, total = progress
    now = time.monotonic()
    return now + pace.seconds_left(now - began, read, total) > deadline


def _begin_load(key: tuple[str, str, str, str]) -> None:
    """Under lock: load the namespace in the background, unless a load is under way."""
    if key not in pending_notices:
        pending_notices[key] = []
        threading.Thread(target=_load_in_background, args=(key,), name="loom-mirror-load", daemon=True).start()


def warm(model: str, keyed: Callable[[str, str, str], bool]) -> list[tuple[str, str]]:
    """A serving process's start: load, one at a time and smallest first, the mirrors of the namespaces written most
    recently (up to LOOM_VECTOR_MIRROR_WARM of them, as many as fit LOOM_VECTOR_MIRROR_MAX_BYTES together). A restart
    left every namespace to load on its first search or large write, which scanned ClickHouse or waited for it
    (`awaited`) meanwhile; a namespace idle at the start is in before it is asked. `keyed(org, namespace, model)`:
    whether its searches score the key axis (its first search would load it again with key vectors). The (org,
    namespace) pairs held at the end, in the order loaded."""
    held: list[tuple[str, str]] = []
    if not enabled() or not settings.LOOM_VECTOR_MIRROR_WARM:
        return held
    try:
        recent = clickhouse.query(
            """
            SELECT org, namespace, count() AS rows, max(embedding_dim) AS dim FROM memory_embeddings
            WHERE embedding_model = {model:String} AND status = 'active' AND embedding_dim > 0
            GROUP BY org, namespace
            ORDER BY max(inserted_at) DESC, org, namespace
            LIMIT {most:UInt32}
            """,
            {"model": model, "most": settings.LOOM_VECTOR_MIRROR_WARM},
            every_org=True,  # the process's most recent namespaces, whoever's
        )
        # The most recently written that fit (the rest load when asked for, as before), each weighed by every version
        # it stores: at least what its load keeps.
        room, chosen = settings.LOOM_VECTOR_MIRROR_MAX_BYTES, []
        for row in recent:
            keys = keyed(row["org"], row["namespace"], model)
            if (weight := row["rows"] * Vectors.row_bytes(row["dim"], keys)) <= room:
                room -= weight
                chosen.append((row["rows"], row["org"], row["namespace"], keys))
        # Smallest first, one at a time (words counted too): the most namespaces in soonest, while the process serves.
        # A namespace asked for meanwhile begins its own load (`get`), as on a cold start.
        for _, org, namespace, keys in sorted(chosen):
            get(org, namespace, model, keys)  # begins its load, as its first search would
            key = (clickhouse.target(), org, namespace, model)
            with lock:
                load_ended.wait_for(lambda key=key: key not in pending_notices and key not in counting_words)
                if mirrors_held.get(key) is not None:
                    held.append((org, namespace))
    except (clickhouse.ClickHouseError, clickhouse.ClickHouseUnavailable) as exc:  # (each loads when asked for)
        log.warning("vector mirrors warmed for %d namespaces, then stopped: %s", len(held), exc)
    return held


def peek(org: str, namespace: str, model: str, compact: bool = False) -> Vectors | None:
    """The namespace's mirror when it is loaded; no load begins (a search's side reads leave that to its vector leg,
    which knows whether the key vectors are wanted). A compact mirror only with `compact` (a write's notices)."""
    with lock:
        mirror = mirrors_held.get((clickhouse.target(), org, namespace, model))
    return mirror if mirror is None or compact or not mirror.compact else None


def mentioned(org: str, namespaces: list[str], model: str, words: list[str]) -> tuple[list[bool], bool] | None:
    """Whether some live row of these namespaces holds each word (stemmed terms, or "\0" + a lowercased entity), by
    their loaded mirrors, and whether that is the namespaces' whole answer (each mirror holds every live row's
    words); None while the mirror is off or a namespace's is not loaded."""
    if not enabled():
        return None
    mirrors = [peek(org, namespace, model) for namespace in namespaces]
    if any(mirror is None for mirror in mirrors):
        return None
    answers = [mirror.mentions(words) for mirror in mirrors]
    return [any(flags) for flags in zip(*(flags for flags, _ in answers))], all(whole for _, whole in answers)


def _load_in_background(key: tuple[str, str, str, str]) -> None:
    target, org, namespace, model = key
    try:
        clickhouse.use_target_in_thread(target)
        mirror = reading.load(org, namespace, model, _progressed, key in keyed_wanted, key in outgrown)
        # Key vectors asked for meanwhile: loaded again with them.
        while mirror is not None and key in keyed_wanted and not mirror.keyed and mirror.keys_fit:
            mirror = reading.load(org, namespace, model, _progressed, True)
        if mirror is not None:
            mirror._gate_cells()  # a large namespace's first write batch then finds them trained
        loaded_rows = 0 if mirror is None else len(mirror.ids)  # held without their words (the notices bring theirs)
    except Exception as exc:  # the scan keeps answering; the next search tries again
        log.warning("vector mirror load of %s/%s failed: %s", org, namespace, exc)
        with lock:
            pending_notices.pop(key, None)
            load_progress.pop(key, None)
            load_ended.notify_all()
        return
    finally:
        clickhouse.release_thread()
    with lock:
        load_ended.notify_all()  # (its waiters read on once this block, which installs the mirror, lets the lock go)
        load_progress.pop(key, None)
        for kind, items in pending_notices.pop(key):
            if mirror is None:
                continue
            if kind == "add":
                mirror.add(*items)
            else:
                mirror.retire(items)
        last_used[key] = time.monotonic()
        if not keep(key, mirror) or mirror.compact:  # (a compact mirror holds no words)
            return
        counting_words.add(key)
    # Its vectors serve searches and the write gates from now; its words (the lexical legs' postings, the entity
    # check's counts: a large share of a load) are counted meanwhile.
    try:
        mirror.count_words(loaded_rows)
    finally:
        with lock:
            counting_words.discard(key)
            load_ended.notify_all()


def _progressed(key: tuple[str, str, str, str], began: float, read: int, total: int) -> None:
    """A load's progress, for the writes waiting for it (`awaited`)."""
    with lock:
        load_progress[key] = (began, read, total)
        load_ended.notify_all()


def keep(key: tuple, mirror: Vectors | None) -> bool:
    """Hold this mirror of the namespace (None: too large to mirror), within the byte budget (`_within_budget`);
    whether it is held. A full mirror grown alone past the budget is loaded again compact (`load`) and serves
    meanwhile, past the budget for as long as that load takes (it is in memory already; dropped, its namespace's
    writes went unjudged and its searches scanned meanwhile). A compact one grown past it is marked too large:
    ClickHouse serves the namespace from then on, and its writes are judged while a batch's pairs stay within
    LOOM_WRITE_GATES_MAX_PAIRS. Under lock."""
    if mirror is not None and mirror.nbytes > settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
        if not mirror.compact:
            if key not in outgrown:
                log.info("vector mirror of %s/%s past LOOM_VECTOR_MIRROR_MAX_BYTES: loading it compact", *key[1:3])
            outgrown.add(key)
            _begin_load(key)
            mirrors_held[key] = mirror
            return True
        mirror = None
    mirrors_held[key] = mirror
    _within_budget(key)
    return mirror is not None


def _within_budget(keep: tuple) -> None:
    """Drop the least recently searched mirrors (never `keep`, the one just loaded or grown) until all fit the
    budget. A dropped mirror is forgotten, not marked: its namespace's next search loads it again. Under lock."""
    held = {key: mirror.nbytes for key, mirror in mirrors_held.items() if mirror is not None}
    total = sum(held.values())
    for key in sorted(held, key=lambda k: last_used.get(k, 0.0)):
        if total <= settings.LOOM_VECTOR_MIRROR_MAX_BYTES:
            return
        if key != keep:
            del mirrors_held[key]
            last_used.pop(key, None)
            total -= held[key]
            log.info("vector mirror of %s/%s dropped to stay within LOOM_VECTOR_MIRROR_MAX_BYTES", key[1], key[2])


def held_bytes() -> int:
    """What the loaded mirrors weigh together (`Vectors.nbytes`)."""
    return sum(mirror.nbytes for mirror in list(mirrors_held.values()) if mirror)


metrics.mirror_bytes.set_function(held_bytes)


def loading() -> int:
    """How many namespaces are loading now, in the background (their vectors, or their words)."""
    with lock:
        return len(pending_notices) + len(counting_words)


metrics.mirror_loading.set_function(loading)


def loaded(org: str, namespace: str, model: str) -> bool:
    """Whether the namespace's mirror is in, words too, with no load of it under way (under the lock: a load installs
    its mirror and drops others for the budget in one step)."""
    key = (clickhouse.target(), org, namespace, model)
    with lock:
        return key in mirrors_held and key not in pending_notices and key not in counting_words


def rows(org: str, model: str, ids: list[RowId]) -> dict[RowId, dict]:
    """Memory rows the loaded mirrors hold for these ids (live versions only); the rest must be read."""
    if not enabled():
        return {}
    target, found = clickhouse.target(), {}
    for namespace in {rid.namespace for rid in ids}:
        mirror = mirrors_held.get((target, org, namespace, model))
        if mirror is not None and not mirror.compact:
            found.update(mirror.rows([rid for rid in ids if rid.namespace == namespace]))
    return found


def without_chunks(org: str, namespaces: list[str], model: str) -> bool:
    """True when every namespace's mirror is loaded and none of them has a chunk: the chunk leg has nothing to read."""
    if not enabled():
        return False
    target = clickhouse.target()
    mirrors = [mirrors_held.get((target, org, namespace, model)) for namespace in namespaces]
    return all(mirror is not None and not mirror.compact and not mirror.chunked for mirror in mirrors)
