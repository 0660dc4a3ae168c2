"""Cost accounting: every provider call adds its usage to the op's meter; one agent_events row per op."""

import uuid

import pytest

from retrieval.providers import costs, customer
from retrieval.store import clickhouse


def events(org: str) -> list[dict]:
    clickhouse.flush_later()  # the rows are written off the request path
    return clickhouse.query(
        "SELECT op, upstream_cost_usd, embedding_tokens, embedding_calls, llm_calls, model FROM agent_events "
        "WHERE org = {org:String} ORDER BY created_at",
        {"org": org},
    )


def org_of(agent) -> str:
    from tenancy.models import ApiToken

    return ApiToken.verify(agent.token).org.name


def test_each_op_that_reaches_the_provider_writes_one_row(backend, openai_embedder, model_server, agent):
    agent.set(
        {"memory_key": "a", "value": "the deploy window is tuesday"},
        {"memory_key": "b", "value": "backups run nightly"},
    )
    reported = sum(len(text.split()) for seen in model_server.embedding_requests() for text in seen.body["input"])
    agent.search("when is the deploy window")
    agent.search("when is the deploy window")  # the cached query vector reaches no provider
    agent.call("memory.get", {"memory_key": "a"}, agent.token)
    rows = events(org_of(agent))
    assert [row["op"] for row in rows] == ["memory.set", "memory.search"]
    write = rows[0]
    assert (write["embedding_tokens"], write["embedding_calls"], write["model"]) == (
        reported,
        1,
        "text-embedding-3-small",
    )
    assert write["upstream_cost_usd"] == pytest.approx(reported * 0.02 / 1_000_000)


def test_llm_calls_are_metered_with_their_price(backend, openai_llm, model_server, settings):
    settings.LOOM_LLM_MODEL = "gpt-4o-mini"
    openai_llm.cache_clear()
    with costs.metered() as meter, customer.for_org(f"meter-{uuid.uuid4().hex[:8]}"):
        result = openai_llm().complete("system", "how many moons does mars have")
    assert (meter.llm_calls, meter.input_tokens, meter.output_tokens) == (1, result.input_tokens, result.output_tokens)
    assert meter.cost_usd == pytest.approx((result.input_tokens * 0.15 + result.output_tokens * 0.60) / 1e6)
    assert meter.dominant_model() == "gpt-4o-mini"


def test_an_unlisted_model_bills_nothing_and_warns_once(caplog):
    with caplog.at_level("WARNING", logger="retrieval.providers.costs"):
        assert costs.price("gpt-unlisted-test", 1_000_000, 1_000_000) == 0.0
        assert costs.price("gpt-unlisted-test", 5, 5) == 0.0
        assert costs.price("local:minilm", 1_000, 0) == 0.0
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        "no price listed for gpt-unlisted-test: its calls bill $0 (retrieval/providers/costs.py PRICES)"
    ]
    assert costs.price("gpt-4o-mini", 1_000_000, 1_000_000) == 0.15 + 0.60


def test_a_prompts_cached_part_bills_at_the_cache_rate():
    per_million = 1_000_000
    assert costs.price("gpt-4.1", per_million, 0, cached_input=per_million) == pytest.approx(2.00 * 0.25)
    # Claude: a cache write costs 1.25 times input, a read 0.1 times; the rest of the prompt bills as input.
    assert costs.price(
        "claude-sonnet-4-20250514", 3 * per_million, per_million, cached_input=per_million, cache_write=per_million
    ) == pytest.approx(3.00 * (1 + 0.1 + 1.25) + 15.00)


def test_a_claude_call_bills_its_cache_write_through_the_sdk(backend, anthropic_llm, model_server, monkeypatch):
    monkeypatch.setitem(costs.PRICES, "claude-test", costs.Price(3.00, 15.00, cache_read=0.1, cache_write=1.25))
    with costs.metered() as meter, customer.for_org(f"meter-{uuid.uuid4().hex[:8]}"):
        result = anthropic_llm().complete("answer briefly", "what is the deploy window?")
    assert (result.input_tokens, result.cache_write_tokens) == (7, 2)  # 5 plain, 2 written to Claude's cache
    assert meter.input_tokens == 7
    assert meter.cost_usd == pytest.approx((5 * 3.00 + 2 * 3.00 * 1.25 + result.output_tokens * 15.00) / 1e6)


def test_a_worker_pass_is_metered_to_the_org_it_worked_for(backend, openai_embedder, model_server, agent):
    from django.core.management import call_command

    agent.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, agent.token)
    agent.set({"memory_key": "k", "value": "the offsite is in porto"})
    agent.call("session_summary.set", {"items": [{"session_id": "s-1", "summary": "Porto offsite"}]}, agent.token)
    agent.call("org.set_model_calls", {"enabled": True, "reason": "done"}, agent.token)
    call_command("embed_pending")
    passes = [event for event in events(org_of(agent)) if event["op"] == "embed_pending"]
    assert len(passes) == 2 and all(event["embedding_calls"] >= 1 for event in passes)  # the rows', the digests'
    assert all(event["model"] == "text-embedding-3-small" and event["upstream_cost_usd"] > 0 for event in passes)
