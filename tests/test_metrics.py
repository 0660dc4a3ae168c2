"""GET /metrics: Prometheus metrics for a scraper holding LOOM_METRICS_TOKEN; off without one."""

from django.test import Client

from retrieval import metrics


def sample(name: str, **labels) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(token: str | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return Client().get("/metrics", **headers)


def test_metrics_are_off_without_a_token_and_refused_with_a_wrong_one(db, settings):
    assert scrape().status_code == 404
    settings.LOOM_METRICS_TOKEN = "scrape-me"
    assert scrape().status_code == 401 and scrape("guess").status_code == 401


def test_requests_statements_and_caches_are_counted(backend, alice, call, settings):
    settings.LOOM_METRICS_TOKEN = "scrape-me"
    token = alice.token("writer")
    sets, inserts = (
        sample("loom_requests_total", op="memory.set", status="201"),
        sample("loom_clickhouse_statement_seconds_count", kind="insert"),
    )
    unknown, hits = (
        sample("loom_requests_total", op="other", status="404"),
        sample("loom_cache_lookups_total", cache="embedding", result="hit"),
    )
    assert call("memory.set", {"memory_key": "k", "value": "the lighthouse is painted in May"}, token).status == 201
    for _ in range(2):  # the second embeds its query from the cache
        assert call("memory.search", {"query": "when is the lighthouse painted"}, token).status == 200
    assert call("no.such.op", {}, token).status == 404
    assert sample("loom_requests_total", op="memory.set", status="201") == sets + 1
    assert sample("loom_clickhouse_statement_seconds_count", kind="insert") > inserts
    assert sample("loom_requests_total", op="other", status="404") == unknown + 1  # no label per unknown path
    assert sample("loom_cache_lookups_total", cache="embedding", result="hit") >= hits + 1
    page = scrape("scrape-me")
    text = page.content.decode()
    assert page.status_code == 200 and page["Content-Type"].startswith("text/plain")
    assert 'loom_requests_total{op="memory.search",status="200"}' in text and "loom_vector_mirror_bytes" in text
    assert "no.such.op" not in text
