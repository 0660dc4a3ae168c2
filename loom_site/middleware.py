"""Middleware of the site as a whole."""

import time

from memories.views.base import MCP_TOOL
from retrieval import metrics
from retrieval.store import audit, clickhouse


def request_context(get_response):
    """Each request's ClickHouse statements share one budget (retrieval/store/clickhouse.py `budget`), the changes
    it makes are audited as coming from its client's address (and MCP tool: `mcp:<tool>@<address>`), and an API
    request is counted and timed by op."""

    def middleware(request):
        started = time.perf_counter()
        address, tool = request.META.get("REMOTE_ADDR", ""), request.META.get(MCP_TOOL)
        with clickhouse.budget(), audit.origin(f"mcp:{tool}@{address}" if tool else f"http:{address}"):
            response = get_response(request)
        if request.path.startswith("/v1/"):
            op = _op(request)
            metrics.requests.labels(op, str(response.status_code)).inc()
            metrics.request_seconds.labels(op).observe(time.perf_counter() - started)
        return response

    return middleware


def _op(request) -> str:
    """The op a request named, if it is one (a label per unknown path would let any caller grow the metrics)."""
    view = getattr(getattr(request, "resolver_match", None), "func", None)
    op = getattr(getattr(view, "view_class", None), "op", None)
    if op:
        return op
    return "health" if request.path == "/v1/health" else "other"


# The Lab's pages load scripts and styles from this server only (htmx, plotly and lab.js are static files; a figure's
# data rides in a JSON block, which no policy blocks). Inline styles stay allowed: plotly and htmx set them.
LAB_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


def lab_security_headers(get_response):
    """A Content-Security-Policy on the Recall Lab's pages (Django's own middleware sets nosniff, the referrer
    policy, and X-Frame-Options)."""

    def middleware(request):
        response = get_response(request)
        if request.path.startswith("/recall"):
            response.setdefault("Content-Security-Policy", LAB_CSP)
        return response

    return middleware
