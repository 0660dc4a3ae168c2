"""GET /v1/health."""

import pytest

from retrieval.store import clickhouse


@pytest.mark.cluster
def test_health_reports_clickhouse_providers_and_problems(backend, call, settings):
    reply = call("health", method="get")
    assert reply.status == 200
    assert reply.json["status"] == "ok"
    assert reply.json["clickhouse"]["ok"] is True and reply.json["clickhouse"]["backend"] == backend
    assert reply.json["clickhouse"]["version"].startswith("26.")
    assert reply.json["embedder"] == {"provider": "fake", "model": "fake-ngram-384", "dim": 384}
    assert reply.json["llm"]["provider"] == "fake"
    assert reply.json["problems"] == ["fake_embedder", "fake_llm"]

    settings.LOOM_REQUIRE_REAL_PROVIDERS = True
    strict = call("health", method="get")
    assert strict.status == 200 and strict.json["status"] == "degraded"


def test_health_is_503_when_clickhouse_is_unreachable(db, call):
    from tests.chserver import free_port

    previous = clickhouse.use(f"http://127.0.0.1:{free_port()}")
    try:
        reply = call("health", method="get")
    finally:
        clickhouse.use(previous)
    assert reply.status == 503
    assert reply.error == "CLICKHOUSE_UNAVAILABLE"
    assert reply.json["status"] == "unavailable" and reply.json["clickhouse"]["ok"] is False


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
