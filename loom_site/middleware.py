"""Middleware of the site as a whole."""

from retrieval.store import clickhouse


def clickhouse_budget(get_response):
    """Each request's ClickHouse statements share one budget (retrieval/store/clickhouse.py `budget`)."""

    def middleware(request):
        with clickhouse.budget():
            return get_response(request)

    return middleware
