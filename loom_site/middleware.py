"""Middleware of the site as a whole."""

from retrieval.store import audit, clickhouse


def request_context(get_response):
    """Each request's ClickHouse statements share one budget (retrieval/store/clickhouse.py `budget`), and the
    changes it makes are audited as coming from its client's address."""

    def middleware(request):
        with clickhouse.budget(), audit.origin(f"http:{request.META.get('REMOTE_ADDR', '')}"):
            return get_response(request)

    return middleware
