"""Whose a model call is, and whether that org's model calls are switched on.

Every sender calls `require()` first, before any cache or provider: the op's
org (set by the service layer with `for_org`) must name a customer, and that
customer's switch must be on. Each process keeps a copy of the switched-off
orgs, re-read at most every LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS and at once
after a change made here; a copy older than
LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS is not trusted and every call is
refused (`SwitchUnread`) until a read succeeds.
"""

import json
import logging
import re
import string
import threading
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from django.conf import settings
from django.dispatch import Signal

from retrieval.store import audit, clickhouse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attribution:
    """Whom a model call is for: the op's org, and what the gateway's identity headers may name."""

    org: str
    namespace: str = ""
    subject: str = ""
    feature: str = ""
    user_id: str = ""  # the request's, when it names one (a search's user_id)


_customer: ContextVar[Attribution | None] = ContextVar("loom_customer", default=None)


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


class GatewayRefused(ModelCallRefused):
    """The inference gateway refused this call's identity (an entry of the refusals table under `refused`)."""

    code = "MODEL_CALL_REFUSED"

    def __init__(self, message: str, gateway_status: int, gateway_code: str | None):
        super().__init__(message)
        self.gateway_status, self.gateway_code = gateway_status, gateway_code


class GatewayDeferred(ModelCallRefused):
    """The gateway asked this identity to wait (an entry under `wait`); Retry-After says how long."""

    code = "MODEL_CALL_DEFERRED"

    def __init__(self, message: str, gateway_status: int, gateway_code: str | None, retry_after: float):
        super().__init__(message)
        self.gateway_status, self.gateway_code, self.retry_after = gateway_status, gateway_code, retry_after


# Refusals a write answers with an embedding stub and a search with its model-free legs: the org's switch.
SWITCHED = (ModelCallsOff, SwitchUnread)
# Refusals a job holds on: the rows stay as they are, no attempt spent, the other orgs' work goes on.
HOLDS = (ModelCallsOff, SwitchUnread, GatewayRefused, GatewayDeferred)


@contextmanager
def for_org(org: str, namespace: str = "", subject: str = "", feature: str = "", user_id: str = ""):
    """Model calls made inside are the org's (for this namespace, subject and user, made by this feature)."""
    token = _customer.set(Attribution(org, namespace, subject, feature, user_id))
    try:
        yield
    finally:
        _customer.reset(token)


def one_user(users) -> str:
    """The user a call's texts are all for, if they are one's (the call may name it to the gateway), else ""."""
    users = set(users)
    return users.pop() if len(users) == 1 else ""


# The deployment's own calls (the calibration probe): not an org's, so no org's switch refuses them.
SYSTEM = "@system"


def system():
    """Model calls made inside are the deployment's own."""
    return for_org(SYSTEM)


def require() -> str:
    """The calling org, if its model calls may be made now; else raise."""
    attribution = _customer.get()
    org = attribution.org if attribution else ""
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
            except clickhouse.ClickHouseUnavailable:
                pass  # (logged as the outage begins and ends); the copy serves until it is too old to trust
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
        "SELECT org FROM org_model_calls GROUP BY org HAVING NOT argMax(enabled, changed_at)", every_org=True
    )
    return [row[0] for row in rows]


# Sent with `org` and `enabled` when this process switches an org's model calls: the embedding worker listens,
# so a provider module never calls up into the write pipeline.
model_calls_switched = Signal()


def set_model_calls(org: str, enabled: bool, reason: str, actor: str) -> dict:
    """Switch the org's model calls on or off; this process sees it on its next call."""
    clickhouse.insert(
        "org_model_calls",
        [{"org": org, "enabled": enabled, "reason": reason, "actor": actor, "changed_at": datetime.now(UTC)}],
    )
    _copy().changed_here = True
    audit.record(org, actor, "org.set_model_calls", detail={"enabled": enabled, "reason": reason})
    model_calls_switched.send(sender=set_model_calls, org=org, enabled=enabled)
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


# --- headers toward an inference gateway --------------------------------------------


def gateway_http_client(client_class=None):
    """The HTTP client every model sender uses: it names the call's customer, only toward gateway hosts,
    and reads a gateway's refusal of that identity. `client_class`: the SDK's own (anthropic's is httpx2's, not
    httpx's); by default the openai SDK's."""
    if client_class is None:
        import openai

        client_class = openai.DefaultHttpxClient
    return client_class(event_hooks={"request": [_attribute], "response": [_answered]})


def _answered(response) -> None:
    """A gateway host's answer that the refusals table lists is the gateway refusing this identity, not an outage.
    It holds a job's next calls for the identity (`_held`); a success at the same path and model ends the hold."""
    if response.request.url.host not in settings.LOOM_INFERENCE_GATEWAY_HOSTS:
        return
    if response.status_code < 400:
        if _holds:  # most answers end no hold: parse no request body for them
            _holds.pop(_hold_key(response.request), None)
        return
    response.read()
    try:
        error = response.json().get("error") or {}
    except ValueError:
        return
    if not isinstance(error, dict):
        return
    table = json.loads(settings.LOOM_INFERENCE_IDENTITY_REFUSALS_JSON)
    for kind in ("refused", "wait"):
        for entry in table.get(kind, []):
            if entry.get("status") == response.status_code and all(
                error.get(name) == entry[name] for name in ("code", "type", "message") if name in entry
            ):
                message = f"the inference gateway answered {response.status_code} {error.get('code') or ''}".strip()
                if kind == "refused":
                    hold = settings.LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS
                    refusal = partial(
                        GatewayRefused, gateway_status=response.status_code, gateway_code=error.get("code")
                    )
                else:
                    wait = float(response.headers.get("retry-after") or 1)
                    hold, message = min(wait, MAX_DEFERRED_HOLD_S), message + f"; retry after {wait:g} s"
                    refusal = partial(
                        GatewayDeferred,
                        gateway_status=response.status_code,
                        gateway_code=error.get("code"),
                        retry_after=wait,
                    )
                _holds[_hold_key(response.request)] = (time.monotonic() + hold, message, refusal)
                raise refusal(message)


def _attribute(request) -> None:
    """Add the customer, feature and identity headers to a request for a gateway host; strip them otherwise.

    A hook on every request the client sends, a redirect hop included: a
    provider elsewhere never learns whom a call is for.
    """
    headers = gateway_headers()
    for name in _header_names():
        request.headers.pop(name, None)
    if request.url.host in settings.LOOM_INFERENCE_GATEWAY_HOSTS:
        request.headers.update(headers)
        if _holds and _in_job.get():
            _held(request)


def rendered(attribution: Attribution) -> tuple[tuple[str, str], ...]:
    """The identity a call for `attribution` carries to the gateway (its headers): a job makes one call per
    identity, so one call never carries two writers' texts."""
    return tuple(sorted(gateway_headers(attribution).items()))


def gateway_headers(attribution: Attribution | None = None) -> dict[str, str]:
    """The headers a call carries to a gateway (the current call's unless `attribution` names another); a header
    whose template renders empty is left out."""
    attribution = attribution or _customer.get()
    if attribution is None:
        return {}
    system = attribution.org == SYSTEM
    org = settings.LOOM_INFERENCE_SYSTEM_CUSTOMER if system else attribution.org
    headers = {}
    if settings.LOOM_INFERENCE_CUSTOMER_HEADER and org:
        headers[settings.LOOM_INFERENCE_CUSTOMER_HEADER] = settings.LOOM_INFERENCE_CUSTOMER_FORMAT.format(org=org)
    if settings.LOOM_INFERENCE_FEATURE_HEADER and attribution.feature:
        features = json.loads(settings.LOOM_INFERENCE_FEATURE_MAP_JSON or "{}")
        headers[settings.LOOM_INFERENCE_FEATURE_HEADER] = features.get(attribution.feature, attribution.feature)
    if not system:
        headers |= _identity_headers(attribution, org)
    return headers


# An agent's subject: sa:<trust>:<agent>.
_AGENT_SUBJECT = re.compile(r"^sa:[^:]+:(?P<agent>.+)$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# The placeholders naming the agent: the headers using them go together or not at all.
_WHOLE_AGENT = ("agent", "tenant")


def _identity_headers(attribution: Attribution, org: str) -> dict[str, str]:
    """LOOM_INFERENCE_IDENTITY_HEADERS_JSON rendered for this call. A header whose template renders empty is left
    out; the headers naming {agent} or {tenant} go together or not at all (the gateway then applies its default
    identity rather than refusing half of one). {tenant} names a trust's tenant: this build has no trusts, so it
    renders empty."""
    subject = attribution.subject
    agent = match.group("agent") if (match := _AGENT_SUBJECT.match(subject)) else ""
    values = defaultdict(
        str,
        org=org,
        namespace=attribution.namespace,
        subject=subject,
        agent=agent,
        tenant="",
        email=subject if _EMAIL.match(subject) else "",
        user_id=attribution.user_id if attribution.user_id not in ("", "-") else subject,
    )
    rendered, agent_whole = {}, True
    for name, template in json.loads(settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON or "{}").items():
        names = {field for _, field, _, _ in string.Formatter().parse(template) if field}
        if names & set(_WHOLE_AGENT) and not all(values[field] for field in names):
            agent_whole = False
        rendered[name] = (_header_safe(template.format_map(values).strip()), bool(names & set(_WHOLE_AGENT)))
    return {name: value for name, (value, whole) in rendered.items() if value and (agent_whole or not whole)}


def _header_safe(value: str) -> str:
    """Percent-encoded only where a header cannot carry it: a space, %, anything outside printable ASCII."""
    return "".join(c if "!" <= c <= "~" and c != "%" else urllib.parse.quote(c, safe="") for c in value)


def _header_names() -> set[str]:
    names = {settings.LOOM_INFERENCE_CUSTOMER_HEADER, settings.LOOM_INFERENCE_FEATURE_HEADER}
    names |= set(json.loads(settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON or "{}"))
    return {name for name in names if name}


# --- a job's hold on an identity the gateway refused ----------------------------------

# A deferral holds a job no longer than this, whatever Retry-After says.
MAX_DEFERRED_HOLD_S = 300.0
# (identity headers, origin, path, model) -> (monotonic time the hold ends, the answer, its refusal's maker).
_holds: dict[tuple, tuple[float, str, Callable[[str], ModelCallRefused]]] = {}
_in_job: ContextVar[bool] = ContextVar("loom_in_job", default=False)


@contextmanager
def job():
    """Model calls made inside are a background job's. After the gateway refuses an identity (or asks it to wait),
    a job's calls for that identity to the same origin, path and model are refused here with nothing sent, for
    LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS (or the Retry-After, at most 5 minutes): a pass would only be refused
    again, and its batch goes to other identities' work. A request always asks the gateway, which may take the
    identity back at any time; a success from either ends the hold."""
    token = _in_job.set(True)
    try:
        yield
    finally:
        _in_job.reset(token)


def _hold_key(request) -> tuple:
    try:
        model = json.loads(request.content or b"{}").get("model", "") if request.content[:1] == b"{" else ""
    except ValueError:
        model = ""
    identity = tuple(sorted((name, request.headers[name]) for name in _header_names() if name in request.headers))
    return identity, f"{request.url.scheme}://{request.url.netloc.decode()}", request.url.path, model


def _held(request) -> None:
    key = _hold_key(request)
    until, message, refusal = _holds.get(key, (0.0, "", None))
    if refusal is None:
        return
    if time.monotonic() >= until:
        _holds.pop(key, None)  # another thread may have ended it first
        return
    raise refusal(f"held, nothing sent: {message}")


def forget_holds() -> None:
    """Tests: start with no identity held."""
    _holds.clear()
