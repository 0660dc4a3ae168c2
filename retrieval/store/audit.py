"""The audit log: who switched an org's model calls, issued or revoked a token, registered a namespace or
recalibrated, and who read a sensitive memory by key, when and from where. Append-only; an org's admins read their
org's (op audit.list).

The services that make those changes record them, so the API, the Lab and the commands are all covered; where a
change came from is the request's client address (set by the site's middleware, `origin`) or this process.
"""

import contextvars
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from retrieval.store import clickhouse

_origin: contextvars.ContextVar[str | None] = contextvars.ContextVar("audit_origin", default=None)


@contextmanager
def origin(where: str) -> Iterator[None]:
    """Changes recorded meanwhile came from `where` (a request: http:<client address>)."""
    token = _origin.set(where)
    try:
        yield
    finally:
        _origin.reset(token)


def record(org: str, actor: str, action: str, target: str = "", detail: dict | None = None) -> None:
    clickhouse.insert("audit_log", [_entry(org, actor, action, target, detail)])


def _entry(org: str, actor: str, action: str, target: str, detail: dict | None) -> dict:
    return {
        "org": org,
        "at": datetime.now(UTC),
        "actor": actor,
        "action": action,
        "target": target,
        "detail": json.dumps(detail or {}, sort_keys=True, default=str),
        "origin": _origin.get() or f"process:{os.getpid()}",
    }


def sensitive_reads(org: str, namespace: str, actor: str, op: str, rows: list[dict]) -> None:
    """One entry per key read whose rows hold a `high` value (never embedded or searched: readable by key alone,
    so every such read is on the record) or that is a `chunk:` key, as the spec asks."""
    reasons: dict[str, set[str]] = {}
    for row in rows:
        if row["sensitivity"] == "high":
            reasons.setdefault(row["memory_key"], set()).add("high")
        if row["memory_key"].startswith("chunk:"):
            reasons.setdefault(row["memory_key"], set()).add("chunk")
    if not reasons:
        return
    detail = [{"op": op, "memory_key": key, "reason": sorted(why)} for key, why in sorted(reasons.items())]
    clickhouse.insert("audit_log", [_entry(org, actor, "memory.read_sensitive", namespace, d) for d in detail])


def recent(org: str, limit: int, before: datetime | None = None) -> list[dict]:
    """The org's entries, newest first; `before` pages back."""
    rows = clickhouse.query(
        """
        SELECT at, actor, action, target, detail, origin FROM audit_log
        WHERE org = {org:String} AND ({before:Nullable(DateTime64(3, 'UTC'))} IS NULL
                                      OR at < {before:Nullable(DateTime64(3, 'UTC'))})
        ORDER BY at DESC LIMIT {limit:UInt32}
        """,
        {"org": org, "before": before, "limit": limit},
    )
    return [{**row, "detail": json.loads(row["detail"])} for row in rows]
