"""The audit log: who switched an org's model calls, issued or revoked a token, registered a namespace or
recalibrated, when and from where. Append-only; an org's admins read their org's (op audit.list).

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
    clickhouse.insert(
        "audit_log",
        [
            {
                "org": org,
                "at": datetime.now(UTC),
                "actor": actor,
                "action": action,
                "target": target,
                "detail": json.dumps(detail or {}, sort_keys=True, default=str),
                "origin": _origin.get() or f"process:{os.getpid()}",
            }
        ],
    )


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
