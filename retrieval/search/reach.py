"""Which rows a search reaches beyond its tenant: the read scope a token and a request allow, and the namespaces
an `all_mine` search fans out to."""

from django.conf import settings

from retrieval.search.plan import SearchRequest
from retrieval.store import namespaces
from tenancy.access import Scope


def read_scope(scope: Scope, request: SearchRequest) -> tuple[str | None, str | None]:
    """The user and session filters in force (Scope.reading: the token's read_scope is a ceiling a request only
    narrows)."""
    scope.reading(request.read_scope, request.user_id, request.session_id)
    return request.user_id, request.session_id


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
