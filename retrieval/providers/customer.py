"""Whose a model call is, and whether that org's model calls are switched on.

Every sender calls `require()` first, before any cache or provider: the op's
org (set by the service layer with `for_org`) must name a customer, and that
customer's switch must be on. Each process keeps a copy of the switched-off
orgs, re-read at most every LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS and at once
after a change made here; a copy older than
LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS is not trusted and every call is
refused (`SwitchUnread`) until a read succeeds.
"""

import logging
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from django.conf import settings

from retrieval import clickhouse

log = logging.getLogger(__name__)

_customer: ContextVar[str | None] = ContextVar("loom_customer", default=None)


class ModelCallRefused(Exception):
    """No model call may be made for this org now; nothing model-made may reach it."""

    code = "MODEL_CALLS_OFF"


class ModelCallsOff(ModelCallRefused):
    """An admin switched this org's model calls off."""


class SwitchUnread(ModelCallRefused):
    """The switches could not be read for longer than the copy may be trusted."""

    code = "MODEL_CALLS_SWITCH_UNREAD"


class Unattributed(ModelCallRefused):
    """A call that names no org: refused before anything is sent (MODEL_CALL_UNATTRIBUTED)."""

    code = "MODEL_CALL_UNATTRIBUTED"


@contextmanager
def for_org(org: str):
    """Model calls made inside are the org's."""
    token = _customer.set(org)
    try:
        yield
    finally:
        _customer.reset(token)


# The deployment's own calls (the calibration probe): not an org's, so no org's switch refuses them.
SYSTEM = "@system"


def system():
    """Model calls made inside are the deployment's own."""
    return for_org(SYSTEM)


def require() -> str:
    """The calling org, if its model calls may be made now; else raise."""
    org = _customer.get()
    if not org:
        raise Unattributed("a model call named no org")
    if org in switched_off_orgs():
        raise ModelCallsOff(f"model calls are switched off for org {org!r}")
    return org


class _Copy:
    def __init__(self):
        self.lock = threading.Lock()
        self.off: frozenset[str] = frozenset()
        self.read_at: float | None = None  # monotonic time of the last successful read
        self.changed_here = False

    def current(self) -> frozenset[str]:
        now = time.monotonic()
        fresh = self.read_at is not None and now - self.read_at < settings.LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS
        if fresh and not self.changed_here:
            return self.off
        with self.lock:
            try:
                self.off = frozenset(_read_off())
                self.read_at, self.changed_here = time.monotonic(), False
            except clickhouse.ClickHouseUnavailable as exc:
                log.error("could not read the model-call switches: %s", exc)
            if self.read_at is None or now - self.read_at > settings.LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS:
                raise SwitchUnread("the model-call switches could not be read recently enough to trust")
            return self.off


_copies: dict[str, _Copy] = {}  # per ClickHouse target: the switches live in its tables


def _copy() -> _Copy:
    return _copies.setdefault(clickhouse.target(), _Copy())


def switched_off_orgs() -> frozenset[str]:
    return _copy().current()


def _read_off() -> list[str]:
    rows = clickhouse.query_rows(
        "SELECT org FROM org_model_calls GROUP BY org HAVING NOT argMax(enabled, changed_at)"
    )
    return [row[0] for row in rows]


def set_model_calls(org: str, enabled: bool, reason: str, actor: str) -> dict:
    """Switch the org's model calls on or off; this process sees it on its next call."""
    clickhouse.insert(
        "org_model_calls",
        [{"org": org, "enabled": enabled, "reason": reason, "actor": actor, "changed_at": datetime.now(UTC)}],
    )
    _copy().changed_here = True
    return get_model_calls(org)


def get_model_calls(org: str, history: int = 50) -> dict:
    """The org's switch (on unless ever switched off) and its newest changes first."""
    rows = clickhouse.query(
        """
        SELECT enabled, reason, actor, changed_at FROM org_model_calls
        WHERE org = {org:String} ORDER BY changed_at DESC LIMIT {history:UInt32}
        """,
        {"org": org, "history": history},
    )
    return {"org": org, "enabled": rows[0]["enabled"] if rows else True, "history": rows}
