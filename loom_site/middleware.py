"""Middleware of the site as a whole."""

from retrieval.store import audit, clickhouse


def request_context(get_response):
    """Each request's ClickHouse statements share one budget (retrieval/store/clickhouse.py `budget`), and the
    changes it makes are audited as coming from its client's address."""

    def middleware(request):
        with clickhouse.budget(), audit.origin(f"http:{request.META.get('REMOTE_ADDR', '')}"):
            return get_response(request)

    return middleware


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
