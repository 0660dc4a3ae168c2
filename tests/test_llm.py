"""The LLM client through the real openai SDK against a provider on 127.0.0.1: retries, fallback, cache, switch."""

import uuid

import pytest

from retrieval.providers import customer, remote
from tests.model_server import Answer


@pytest.fixture
def org():
    """A fresh org name: cached answers are per org, so no test sees another's."""
    return f"acme-{uuid.uuid4().hex[:8]}"


def ask(get_llm, org, user="what is the deploy window?"):
    with customer.for_org(org):
        return get_llm().complete("answer briefly", user, max_tokens=64)


def test_a_completion_comes_back_with_its_usage(backend, openai_llm, model_server, org):
    result = ask(openai_llm, org)
    assert (result.text, result.model, result.provider) == (
        "gpt-test says: what is the deploy window?",
        "gpt-test-2024-08-06",  # the dated snapshot the provider reports, as the real APIs do
        "openai",
    )
    assert result.input_tokens == 5 and result.output_tokens > 0 and not result.from_cache
    sent = model_server.chat_requests()[0].body
    assert sent["model"] == "gpt-test" and sent["max_completion_tokens"] == 64
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]


def test_retryable_answers_are_retried(backend, openai_llm, model_server, org):
    model_server.script(Answer(429), Answer(529), Answer(503))
    assert ask(openai_llm, org).text.startswith("gpt-test says")
    assert len(model_server.chat_requests()) == 4


def test_the_fallback_model_answers_an_outage_and_is_not_cached(backend, openai_llm, model_server, org, settings):
    settings.LOOM_LLM_FALLBACK_MODEL = "gpt-fallback"
    openai_llm.cache_clear()
    model_server.script(*[Answer(503)] * 4)
    result = ask(openai_llm, org)
    assert (result.model, result.text) == ("gpt-fallback-2024-08-06", "gpt-fallback says: what is the deploy window?")
    assert result.fallback
    assert [seen.body["model"] for seen in model_server.chat_requests()] == ["gpt-test"] * 4 + ["gpt-fallback"]
    again = ask(openai_llm, org)  # the fallback's answer was not cached: the primary is asked again
    assert (again.model, again.from_cache, len(model_server.chat_requests())) == ("gpt-test-2024-08-06", False, 6)
    assert ask(openai_llm, org).from_cache  # and the primary's answer was


def test_a_401_is_neither_retried_nor_handed_to_the_fallback(backend, openai_llm, model_server, org, settings):
    settings.LOOM_LLM_FALLBACK_MODEL = "gpt-fallback"
    openai_llm.cache_clear()
    model_server.script(Answer(401))
    with pytest.raises(remote.ProviderError) as raised:
        ask(openai_llm, org)
    assert raised.value.status == 401 and len(model_server.chat_requests()) == 1


def test_a_field_the_model_refuses_is_learned_and_left_out(backend, openai_llm, model_server, org):
    model_server.script(Answer(400, param="temperature"))
    ask(openai_llm, org, user="first")
    ask(openai_llm, org, user="second")
    sent = [seen.body for seen in model_server.chat_requests()]
    assert "temperature" in sent[0] and all("temperature" not in body for body in sent[1:])
    assert len(sent) == 3


EFFORT_REFUSED = (
    "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
    "Supported values are: 'low', 'medium', and 'high'."
)


def test_a_call_asks_for_the_lowest_effort_and_settles_on_the_lowest_the_model_lists(
    backend, openai_llm, model_server, org
):
    model_server.script(Answer(400, param="reasoning_effort", code="unsupported_value", message=EFFORT_REFUSED))
    ask(openai_llm, org, user="first")
    ask(openai_llm, org, user="second")
    assert [seen.body["reasoning_effort"] for seen in model_server.chat_requests()] == ["none", "low", "low"]


def test_a_model_that_takes_no_effort_is_sent_none(backend, openai_llm, model_server, org):
    model_server.script(Answer(400, message="Unrecognized request argument supplied: reasoning_effort"))
    ask(openai_llm, org, user="first")
    ask(openai_llm, org, user="second")
    sent = [seen.body for seen in model_server.chat_requests()]
    assert sent[0]["reasoning_effort"] == "none" and all("reasoning_effort" not in body for body in sent[1:])


def test_an_effort_pinned_by_setting_is_sent(backend, openai_llm, model_server, org, settings):
    settings.LOOM_LLM_OPENAI_REASONING_EFFORT = "medium"
    ask(openai_llm, org)
    assert model_server.chat_requests()[0].body["reasoning_effort"] == "medium"


@pytest.mark.parametrize(
    ("configured", "said"),
    [
        ({"LOOM_LLM_MODEL": "gpt-4o"}, "openai for gpt-4o (from the model's name)"),
        ({"LOOM_LLM_MODEL": "gpt-4o", "LOOM_LLM_PROVIDER": "openai"}, "openai for gpt-4o (from LOOM_LLM_PROVIDER)"),
        ({"LOOM_LLM_MODEL": ""}, "openai for gpt-6-luna (from the key present, OPENAI_API_KEY)"),
    ],
)
def test_the_provider_chosen_is_logged_once_with_where_it_came_from(
    openai_llm, settings, caplog, monkeypatch, configured, said
):
    from retrieval.providers import llm

    monkeypatch.setattr(llm, "_announced", set())  # as a new process: earlier tests built these clients too
    for name, value in configured.items():
        setattr(settings, name, value)
    llm.forget()
    with caplog.at_level("INFO", logger="retrieval.providers.llm"):
        llm.get_llm()
        llm.forget()
        llm.get_llm()
    assert [r.getMessage() for r in caplog.records if "LLM provider" in r.getMessage()] == [f"LLM provider {said}"]


def test_the_output_limit_a_400_names_clamps_every_later_cap(backend, openai_llm, model_server, org):
    model_server.script(
        Answer(
            400,
            param="max_completion_tokens",
            message="max_tokens is too large: 100000. This "
            "model supports at most 16384 completion tokens, whereas you provided 100000.",
        )
    )
    with customer.for_org(org):
        openai_llm().complete("s", "first", max_tokens=100000)
        openai_llm().complete("s", "second", max_tokens=100000)
    assert [seen.body["max_completion_tokens"] for seen in model_server.chat_requests()] == [100000, 16384, 16384]


def test_answers_are_cached_per_org_and_never_past_the_switch(backend, openai_llm, model_server, alice, org):
    ask(openai_llm, alice.name)
    assert ask(openai_llm, alice.name).from_cache
    ask(openai_llm, org)  # one org is never served another's answer
    assert len(model_server.chat_requests()) == 2
    customer.set_model_calls(alice.name, False, "pause", "test")
    with pytest.raises(customer.ModelCallsOff):
        ask(openai_llm, alice.name)
    assert len(model_server.chat_requests()) == 2


def test_a_call_that_names_no_org_is_refused_before_anything_is_sent(openai_llm, model_server):
    with pytest.raises(customer.Unattributed):
        openai_llm().complete("s", "u")
    assert model_server.requests == []


@pytest.mark.parametrize("gateway,expected", [("127.0.0.1", True), ("gateway.example", False)])
def test_customer_headers_go_only_to_gateway_hosts(
    backend, openai_llm, openai_embedder, model_server, org, agent, settings, gateway, expected
):
    settings.LOOM_INFERENCE_CUSTOMER_HEADER = "X-Loom-Customer"
    settings.LOOM_INFERENCE_FEATURE_HEADER = "X-Loom-Feature"
    settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON = '{"X-Agent": "{subject}", "X-Space": "ns-{namespace}"}'
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = [gateway]
    agent.set({"memory_key": "k", "value": "the deploy window is tuesday"})
    ask(openai_llm, org)
    embedding, chat = model_server.embedding_requests()[0].headers, model_server.chat_requests()[0].headers
    if expected:
        assert embedding["x-loom-customer"].startswith("alice-") and embedding["x-loom-feature"] == "memory.set"
        assert embedding["x-space"] == "ns-default" and embedding["x-agent"].startswith("token:")
        assert chat["x-loom-customer"] == org and "x-agent" not in chat  # an empty template is left out
    else:
        assert not {"x-loom-customer", "x-loom-feature", "x-agent", "x-space"} & (embedding.keys() | chat.keys())


def test_health_names_the_fake_llm_and_a_missing_key(call, settings, health):
    from retrieval.providers import llm

    llm.forget()
    try:
        assert "fake_llm" in health()["problems"]
        settings.LOOM_LLM_MODEL, settings.OPENAI_API_KEY = "gpt-test", ""
        llm.forget()
        body = health()
        assert "llm_key_missing" in body["problems"] and body["llm"]["provider"] == "fake"
    finally:
        llm.forget()


def test_hidden_reasoning_is_reserved_on_top_of_the_cap_and_an_empty_capped_reply_is_sent_again(
    backend, openai_llm, model_server, org, settings
):
    settings.LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX = 1000
    model_server.script(Answer(reasoning_tokens=300))
    with customer.for_org(org):
        openai_llm().complete("s", "first", max_tokens=64)
        openai_llm().complete("s", "second", max_tokens=64)  # twice the reasoning seen, on top of the caller's 64
    model_server.script(Answer(content="", finish_reason="length"))  # reasoning ate the whole cap: no text
    with customer.for_org(org):
        result = openai_llm().complete("s", "third", max_tokens=64)
    caps = [seen.body["max_completion_tokens"] for seen in model_server.chat_requests()]
    assert caps == [64, 664, 664, 1064] and result.text == "gpt-test says: third"
