"""A gateway's refusal of one identity is not an outage: 403 MODEL_CALL_REFUSED / 503 MODEL_CALL_DEFERRED."""

import pytest

from retrieval.providers import customer
from tests.model_server import Answer


@pytest.fixture
def gateway(settings, openai_embedder, openai_llm):
    settings.LOOM_INFERENCE_CUSTOMER_HEADER = "X-Loom-Customer"
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    settings.LOOM_LLM_FALLBACK_MODEL = "gpt-fallback"
    openai_llm.cache_clear()
    return openai_llm


def test_a_refused_identity_answers_403_with_the_gateways_status(backend, gateway, model_server, agent, call):
    model_server.script(Answer(403, code="agent_denied"))
    reply = agent.call("memory.set", {"memory_key": "k", "value": "v"}, agent.token)
    assert (reply.status, reply.error) == (403, "MODEL_CALL_REFUSED")
    assert (reply.json["error"]["gateway_status"], reply.json["error"]["gateway_code"]) == (403, "agent_denied")
    assert len(model_server.embedding_requests()) == 1  # never retried
    assert not [p for p in call("health", method="get").json["problems"] if p.startswith("provider_failing")]


def test_a_long_wait_answers_503_with_retry_after_and_no_fallback(backend, gateway, model_server, agent):
    model_server.script(Answer(429, code="agent_request_limit", retry_after="30"))
    with pytest.raises(customer.GatewayDeferred) as deferred, customer.for_org("acme-wait-" + backend):
        gateway().complete("s", "u")
    assert deferred.value.retry_after == 30
    assert [seen.body["model"] for seen in model_server.chat_requests()] == ["gpt-test"]  # no fallback, no retry
    model_server.script(Answer(429, code="agent_request_limit", retry_after="30"))
    reply = agent.call("memory.set", {"memory_key": "k", "value": "v"}, agent.token)
    assert (reply.status, reply.error) == (503, "MODEL_CALL_DEFERRED")


def test_a_short_wait_is_waited_out_once(backend, gateway, model_server, agent):
    model_server.script(Answer(429, code="agent_request_limit", retry_after="0.1"))
    assert agent.call("memory.set", {"memory_key": "k", "value": "v"}, agent.token).status == 201
    assert len(model_server.embedding_requests()) == 2


def test_an_unlisted_answer_from_the_gateway_is_the_providers(backend, gateway, model_server, agent):
    model_server.script(Answer(403, code="token_unavailable"))  # the gateway's own failure: health must see it
    reply = agent.call("memory.set", {"memory_key": "k", "value": "v"}, agent.token)
    assert (reply.status, reply.error) == (503, "EMBEDDER_UNAVAILABLE")
