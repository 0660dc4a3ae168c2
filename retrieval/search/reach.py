"""Which rows a search reaches beyond its tenant: the read scope a token and a request allow, and the namespaces
an `all_mine` search fans out to."""

from django.conf import settings

from retrieval.errors import Refusal
from retrieval.search.plan import SearchRequest
from retrieval.store import namespaces
from tenancy.access import Scope

READ_SCOPE_ORDER = {"": 0, "own_user": 1, "own_session": 2}


def read_scope(scope: Scope, request: SearchRequest) -> tuple[str | None, str | None]:
    """The user and session filters in force: the token's read_scope is a ceiling a request only narrows."""
    claim, asked = scope.read_scope or "", request.read_scope or ""
    effective = max(claim, asked, key=READ_SCOPE_ORDER.__getitem__)
    user_id, session_id = request.user_id, request.session_id
    if effective in ("own_user", "own_session") and (not user_id or user_id == "-"):
        raise Refusal("MISSING_FIELD", f"read_scope {effective} needs the request's user_id", "user_id", 422)
    if effective == "own_session" and (not session_id or session_id == "-"):
        raise Refusal("MISSING_FIELD", "read_scope own_session needs the request's session_id", "session_id", 422)
    return user_id, session_id


def namespaces_searched(scope: Scope, request: SearchRequest) -> tuple[list[str], list[str]]:
    """The addressed namespace, plus (all_mine) the caller's others up to the fan-out cap."""
    wanted = request.namespace_scope or settings.LOOM_MEMORY_SEARCH_DEFAULT_NAMESPACE_SCOPE
    if wanted != "all_mine":
        return [scope.namespace], []
    if scope.namespaces is not None:
        others = sorted(scope.namespaces - {scope.namespace})
    else:
        others = [ns for ns in namespaces.names(scope.org) if ns != scope.namespace]
    cap = settings.LOOM_MEMORY_SEARCH_FANOUT_MAX_NAMESPACES
    return [scope.namespace] + others[:cap], others[cap:]
