"""Claude through the real anthropic SDK against a provider on 127.0.0.1: the request, JSON mode, retries, traits."""

import json
import uuid

import pytest

from retrieval.providers import customer, llm, remote
from tests.model_server import Answer


def ask(get_llm, user="what is the deploy window?", **kwargs):
    with customer.for_org(f"acme-{uuid.uuid4().hex[:8]}"):  # a fresh org: no cached answer
        return get_llm().complete("answer briefly", user, **kwargs)


def test_a_completion_comes_back_with_its_usage_and_a_cacheable_system_block(backend, anthropic_llm, model_server):
    result = ask(anthropic_llm, max_tokens=64)
    assert (result.text, result.provider, result.model) == (
        "claude-test says: what is the deploy window?",
        "anthropic",
        "claude-test-20251001",  # the dated snapshot the provider reports, as the real API does
    )
    # The whole prompt: Anthropic counts the 2 tokens of system block it wrote to its cache apart from the 5 others.
    assert result.input_tokens == 7 and result.output_tokens > 0
    assert (result.cached_input_tokens, result.cache_write_tokens) == (0, 2)
    seen = model_server.chat_requests()[0]
    assert seen.path == "/v1/messages" and seen.headers["authorization"] == "Bearer sk-ant-test-key"
    assert seen.body["max_tokens"] == 64 and seen.body["temperature"] == 0
    assert seen.body["system"] == [{"type": "text", "text": "answer briefly", "cache_control": {"type": "ephemeral"}}]


def test_json_mode_is_a_directive_and_the_fence_comes_off(backend, anthropic_llm, model_server):
    model_server.script(Answer(content='```json\n{"answer": "Tuesdays"}\n```'))
    result = ask(anthropic_llm, response_format={"type": "json_object"})
    assert json.loads(result.text) == {"answer": "Tuesdays"}
    sent = model_server.chat_requests()[0].body
    assert sent["system"][0]["text"].endswith(llm.AnthropicLLM.JSON_DIRECTIVE) and "response_format" not in sent


def test_overloaded_answers_are_retried_and_a_401_is_not(backend, anthropic_llm, model_server):
    model_server.script(Answer(529), Answer(500))
    assert ask(anthropic_llm).text.startswith("claude-test says")
    assert len(model_server.chat_requests()) == 3
    model_server.script(Answer(401))
    with pytest.raises(remote.ProviderError) as raised:
        ask(anthropic_llm)
    assert raised.value.status == 401 and len(model_server.chat_requests()) == 4


def test_the_output_limit_a_400_names_clamps_every_later_cap(backend, anthropic_llm, model_server):
    limit = "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-test"
    model_server.script(Answer(400, message=limit))
    assert ask(anthropic_llm, max_tokens=100000).text.startswith("claude-test says")
    ask(anthropic_llm, max_tokens=100000)
    assert [seen.body["max_tokens"] for seen in model_server.chat_requests()] == [100000, 64000, 64000]
    ask(anthropic_llm, max_tokens=500)  # a cap under the limit goes as asked
    assert model_server.chat_requests()[-1].body["max_tokens"] == 500


def test_an_effort_the_model_refuses_is_learned_and_left_out(backend, anthropic_llm, model_server, settings):
    settings.LOOM_LLM_ANTHROPIC_EFFORT = "low"
    model_server.script(Answer(400, message="output_config: Extra inputs are not permitted"))
    ask(anthropic_llm)
    ask(anthropic_llm)
    sent = [seen.body for seen in model_server.chat_requests()]
    assert sent[0]["output_config"] == {"effort": "low"} and "output_config" not in sent[1] | sent[2]


def test_an_anthropic_key_alone_serves_claude_haiku(settings):
    settings.LOOM_LLM_MODEL, settings.OPENAI_API_KEY, settings.ANTHROPIC_API_KEY = "", "", "sk-ant-test-key"
    client = llm.build("")
    assert (client.provider, client.model) == ("anthropic", "claude-haiku-4-5")
    settings.OPENAI_API_KEY = "sk-test-key"  # OpenAI's key first
    assert llm.build("").provider == "openai"


def test_a_claude_model_without_its_key_is_the_fake_and_health_says_so(call, settings, health):
    settings.LOOM_LLM_MODEL, settings.ANTHROPIC_API_KEY = "claude-sonnet-9", ""
    llm.forget()
    try:
        assert llm.get_llm().inner.key_missing_for == "claude-sonnet-9"
        assert "llm_key_missing" in health()["problems"]
    finally:
        llm.forget()


def test_a_switched_off_org_reaches_no_claude(backend, anthropic_llm, model_server, alice):
    customer.set_model_calls(alice.name, False, "pause", "test")
    with pytest.raises(customer.ModelCallsOff), customer.for_org(alice.name):
        anthropic_llm().complete("answer briefly", "anything")
    assert model_server.chat_requests() == []


@pytest.mark.parametrize("gateway, expected", [("127.0.0.1", True), ("gateway.example", False)])
def test_customer_headers_go_to_claude_only_through_a_gateway(
    backend, anthropic_llm, model_server, settings, gateway, expected
):
    settings.LOOM_INFERENCE_CUSTOMER_HEADER = "X-Loom-Customer"
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = [gateway]
    with customer.for_org("acme-gw"):
        anthropic_llm().complete("s", f"u {uuid.uuid4()}")
    assert ("x-loom-customer" in model_server.chat_requests()[0].headers) is expected


def test_a_gateway_refusal_of_the_identity_is_not_retried(backend, anthropic_llm, model_server, settings):
    settings.LOOM_INFERENCE_CUSTOMER_HEADER = "X-Loom-Customer"
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    model_server.script(Answer(403, code="agent_denied"))
    with pytest.raises(customer.ModelCallRefused):
        ask(anthropic_llm)
    assert len(model_server.chat_requests()) == 1
