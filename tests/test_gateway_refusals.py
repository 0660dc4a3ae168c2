"""A gateway's refusal of one identity is not an outage: 403 MODEL_CALL_REFUSED / 503 MODEL_CALL_DEFERRED."""

import time

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


def test_a_refused_identity_answers_403_with_the_gateways_status(backend, gateway, model_server, agent, call, health):
    model_server.script(Answer(403, code="agent_denied"))
    reply = agent.call("memory.set", {"memory_key": "k", "value": "v"}, agent.token)
    assert (reply.status, reply.error) == (403, "MODEL_CALL_REFUSED")
    assert (reply.json["error"]["gateway_status"], reply.json["error"]["gateway_code"]) == (403, "agent_denied")
    assert len(model_server.embedding_requests()) == 1  # never retried
    assert not [p for p in health()["problems"] if p.startswith("provider_failing")]


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


def summarize(org) -> None:
    from retrieval.ingest import digests

    digests.summarize_sessions(org.name)


def test_a_jobs_calls_for_a_refused_identity_are_held_for_the_cooldown(
    backend, gateway, model_server, alice, agent, settings
):
    agent.set({"memory_key": "standup", "value": "the standup moved to 9:30", "session_id": "s1"})
    settings.LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS = 0.5
    model_server.script(Answer(402, code="budget_exceeded"))
    summarize(alice)
    summarize(alice)  # held: refused here, nothing sent
    assert len(model_server.chat_requests()) == 1
    deadline = time.monotonic() + 5
    while not model_server.chat_requests()[1:] and time.monotonic() < deadline:  # the cooldown ends: asked again
        time.sleep(0.1)
        summarize(alice)
    assert len(model_server.chat_requests()) == 2


def test_a_wait_holds_a_job_for_the_retry_after_and_a_request_still_asks(
    backend, gateway, model_server, alice, agent, settings
):
    agent.set({"memory_key": "standup", "value": "the standup moved to 9:30", "session_id": "s1"})
    model_server.script(Answer(429, code="agent_request_limit", retry_after="60"))
    summarize(alice)
    summarize(alice)
    assert len(model_server.chat_requests()) == 1  # held for the Retry-After
    with customer.for_org(alice.name, "default", feature="hyde"):
        gateway().complete("s", "u")  # a request asks, and its success ends the hold
    summarize(alice)
    assert len(model_server.chat_requests()) == 3


def test_a_hold_is_one_identitys(backend, gateway, model_server):
    """Another org's job goes on while one is held."""
    model_server.script(Answer(402, code="budget_exceeded"))
    with pytest.raises(customer.GatewayRefused), customer.job(), customer.for_org("acme-held"):
        gateway().complete("s", "u")
    with customer.job(), customer.for_org("acme-held"), pytest.raises(customer.GatewayRefused, match="held, nothing"):
        gateway().complete("s", "u")
    with customer.job(), customer.for_org("acme-other"):
        gateway().complete("s", "u")
    assert [seen.headers["x-loom-customer"] for seen in model_server.chat_requests()] == ["acme-held", "acme-other"]


def test_feature_names_are_mapped_to_the_gateways(backend, gateway, model_server, settings):
    settings.LOOM_INFERENCE_FEATURE_HEADER = "X-Feature"
    settings.LOOM_INFERENCE_FEATURE_MAP_JSON = '{"memory.ask": "loom-answers"}'
    for feature in ("memory.ask", "hyde"):
        with customer.for_org("acme-features", feature=feature):
            gateway().complete("s", f"u {feature}")
    assert [seen.headers["x-feature"] for seen in model_server.chat_requests()] == ["loom-answers", "hyde"]


@pytest.mark.parametrize(
    ("check", "args", "says"),
    [
        ("check_customer_required", (True, ""), "LOOM_INFERENCE_CUSTOMER_HEADER must be too"),
        ("check_feature_map", ("[1]",), "LOOM_INFERENCE_FEATURE_MAP_JSON must map"),
        ("check_feature_map", ('{"hyde": ""}',), "LOOM_INFERENCE_FEATURE_MAP_JSON must map"),
        ("check_feature_map", ("{not json",), "LOOM_INFERENCE_FEATURE_MAP_JSON is not JSON"),
    ],
)
def test_a_gateway_setting_that_cannot_work_stops_the_boot(check, args, says):
    from django.core.exceptions import ImproperlyConfigured

    from loom_site import env

    with pytest.raises(ImproperlyConfigured, match=says):
        getattr(env, check)(*args)
    env.check_customer_required(True, "X-Loom-Customer")  # with the header it starts
