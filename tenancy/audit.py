"""An org's audit log, as audit.list and the Lab's audit page read it: the changes the services recorded in
ClickHouse (retrieval/store/audit.py) and the tokens' issues and revocations, from the token rows (kept there so the
token commands need only the Django database: they run while `make run` holds the embedded engine).
"""

from datetime import datetime

from retrieval.store import audit
from tenancy.models import ApiToken


def entries(org: str, limit: int, before: datetime | None = None) -> list[dict]:
    """The org's entries, newest first; `before` pages back."""
    merged = audit.recent(org, limit, before) + token_events(org, limit, before)
    return sorted(merged, key=lambda entry: entry["at"], reverse=True)[:limit]


def token_events(org: str, limit: int, before: datetime | None = None) -> list[dict]:
    """The org's token issues and revocations, newest first, shaped as audit entries."""
    events = []
    for row in ApiToken.objects.filter(org__name=org).order_by("-created_at"):
        access = {"role": row.role, "namespaces": row.namespaces, "read_scope": row.read_scope, "name": row.name}
        events.append(_event(row.created_at, row.created_by, "token.issue", row.prefix, access))
        if row.revoked_at:
            events.append(_event(row.revoked_at, row.revoked_by, "token.revoke", row.prefix, {}))
    events = [event for event in events if before is None or event["at"] < before]
    return sorted(events, key=lambda event: event["at"], reverse=True)[:limit]


def _event(at: datetime, actor: str, action: str, prefix: str, detail: dict) -> dict:
    return {"at": at, "actor": actor or "unknown", "action": action, "target": prefix, "detail": detail, "origin": ""}
