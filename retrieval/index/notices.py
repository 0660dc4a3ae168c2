"""What the write path tells the index: rows it stored (`added`, or `staged` then shown once its statements are in)
and rows it retired. Each notice is applied to the namespace's loaded mirrors, or kept for a load under way and
applied on top of it, in order (adding is idempotent, retiring one-way), so no write falls between a load and its
notices.

Lock story: the registry's lock, then each mirror's (as the registry takes them).
"""

from collections.abc import Callable

from retrieval.index import registry
from retrieval.index.held import shown_of
from retrieval.store import change_marker, clickhouse, reads
from retrieval.store.rows import RowId, row_id


def _stamp(org: str, namespace: str) -> tuple[int, int] | None:
    """Stamp this process's memory write for the host (change_marker.wrote); it stores no side-table row, so the
    side-table answers kept here stand."""
    swapped = change_marker.wrote(org, namespace)
    reads.kept(org, namespace, swapped)
    return swapped


def added(org: str, namespace: str, rows: list[dict], chunks: list[dict], memory_rows: list[dict]) -> None:
    """The write path stored these embedding rows (active versions, stubs among them), these chunks, and these memory
    rows."""
    staged(org, namespace, rows, memory_rows)(chunks)


def staged(org: str, namespace: str, rows: list[dict], memory_rows: list[dict]) -> Callable[[list[dict]], None]:
    """`added` in two steps, for a write whose statements are under way: the rows are held in the namespace's loaded
    mirrors now, hidden from every read (their Python runs while the engine stores them); the function returned
    shows them, with the write's chunks, once the write has stored them. A write that fails never calls it."""
    models = {row["embedding_model"] for row in rows}
    vectored = {  # each model's rows that have their vectors (the rest are stubs)
        model: [row for row in rows if row["embedding_model"] == model and row["embedding_dim"]] for model in models
    }
    mirrors = (
        {model: registry.peek(org, namespace, model, compact=True) for model in models} if registry.enabled() else {}
    )
    shown = shown_of(memory_rows) if any(mirror is not None for mirror in mirrors.values()) else None
    held = {  # model: (its mirror now, the rows it holds hidden)
        model: (mirror, mirror.stage(vectored[model], shown)) for model, mirror in mirrors.items() if mirror is not None
    }

    def show(chunks: list[dict]) -> None:
        nonlocal shown
        if not rows:
            return
        swapped = _stamp(org, namespace)
        if not registry.enabled():
            return
        with registry.lock:
            for model in models:
                key = (clickhouse.target(), org, namespace, model)
                if key not in registry.pending_notices and registry.mirrors_held.get(key) is None:
                    continue
                stubs = [row_id(row) for row in rows if row["embedding_model"] == model and not row["embedding_dim"]]
                mine = vectored[model]
                chunked = any(chunk["embedding_model"] == model for chunk in chunks)
                shown = shown if shown is not None else shown_of(memory_rows)
                # (A mirror without key vectors serves while one with them loads: both take it.)
                if key in registry.pending_notices:
                    registry.pending_notices[key].append(("add", (mine, chunked, shown, stubs)))
                if (mirror := registry.mirrors_held.get(key)) is not None:
                    if model in held and held[model][0] is mirror:
                        mirror.show(held[model][1], chunked, stubs)
                    else:  # loaded (or loaded again) meanwhile
                        mirror.add(mine, chunked, shown, stubs)
                    mirror.asked = change_marker.advanced(mirror.asked, swapped)  # it holds this write now
                    registry.keep(key, mirror)

    return show


def retired(org: str, namespace: str, rows: list[dict]) -> None:
    """The write path superseded or deleted these row versions."""
    if not rows:
        return
    swapped = _stamp(org, namespace)
    if not registry.enabled():
        return
    ids = [RowId(namespace, row["memory_key"], row["agent"], row["session_id"], row["version"]) for row in rows]
    with registry.lock:
        for key, notices in registry.pending_notices.items():
            if key[:3] == (clickhouse.target(), org, namespace):
                notices.append(("retire", ids))
        for key, mirror in registry.mirrors_held.items():
            if key[:3] == (clickhouse.target(), org, namespace) and mirror is not None:
                mirror.retire(ids)
                mirror.asked = change_marker.advanced(mirror.asked, swapped)
