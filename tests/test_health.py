"""GET /v1/health."""

import pytest

from retrieval.store import clickhouse
from tests.conftest import Reply


@pytest.mark.cluster
def test_an_admin_sees_clickhouse_providers_and_problems(backend, alice, call, settings):
    admin = alice.token("admin")
    reply = call("health", token=admin, method="get")
    assert reply.status == 200
    assert reply.json["status"] == "ok"
    assert reply.json["clickhouse"]["ok"] is True and reply.json["clickhouse"]["backend"] == backend
    assert reply.json["clickhouse"]["version"].startswith("26.")
    assert reply.json["embedder"] == {"provider": "fake", "model": "fake-ngram-384", "dim": 384}
    assert reply.json["llm"]["provider"] == "fake"
    assert reply.json["problems"] == ["fake_embedder", "fake_llm"]

    settings.LOOM_REQUIRE_REAL_PROVIDERS = True
    strict = call("health", token=admin, method="get")
    assert strict.status == 200 and strict.json["status"] == "degraded"


def test_anyone_else_learns_only_the_status(alice, call, settings):
    assert call("health", method="get") == Reply(200, {"status": "ok"})
    assert call("health", token=alice.token("writer"), method="get") == Reply(200, {"status": "ok"})
    settings.LOOM_REQUIRE_REAL_PROVIDERS = True
    assert call("health", method="get") == Reply(200, {"status": "degraded"})
    assert call("health", token="loom_nope", method="get").error == "INVALID_TOKEN"


def test_health_is_503_when_clickhouse_is_unreachable_and_only_an_admin_learns_where(alice, call):
    from tests.chserver import free_port

    port = free_port()
    admin = alice.token("admin")
    previous = clickhouse.use(f"http://127.0.0.1:{port}")
    try:
        public, detailed = call("health", method="get"), call("health", token=admin, method="get")
    finally:
        clickhouse.use(previous)
    assert public == Reply(
        503,
        {
            "status": "unavailable",
            "error": {"code": "CLICKHOUSE_UNAVAILABLE", "message": "ClickHouse is unavailable; retry shortly"},
        },
    )
    assert detailed.status == 503 and detailed.error == "CLICKHOUSE_UNAVAILABLE"
    assert detailed.json["clickhouse"]["ok"] is False and str(port) in detailed.json["error"]["message"]


def test_an_op_is_503_when_clickhouse_is_unreachable(alice, call):
    from tests.chserver import free_port

    token = alice.token("writer")
    previous = clickhouse.use(f"http://127.0.0.1:{free_port()}")
    try:
        reply = call("memory.set", {"memory_key": "k", "value": "v"}, token)
    finally:
        clickhouse.use(previous)
    assert reply.status == 503 and reply.error == "CLICKHOUSE_UNAVAILABLE"
    assert "Traceback" not in str(reply.json)


def test_an_outages_503_says_when_to_retry_and_is_not_logged_again_per_request(alice, caplog):
    from django.test import Client

    from tests.chserver import free_port

    token = alice.token("writer")
    previous = clickhouse.use(f"http://127.0.0.1:{free_port()}")
    try:
        with caplog.at_level("INFO", logger="django.request"):
            answered = [
                Client().post(
                    "/v1/memory.search",
                    data='{"query": "q"}',
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {token}",
                )
                for _ in range(3)
            ]
            health = Client().get("/v1/health")
    finally:
        clickhouse.use(previous)
    assert [(r.status_code, r["Retry-After"]) for r in answered] == [(503, "5")] * 3
    assert (health.status_code, health["Retry-After"]) == (503, "5")
    assert [r.getMessage() for r in caplog.records if r.name == "django.request"] == []  # the outage logs itself
