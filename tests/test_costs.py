"""Cost accounting: every provider call adds its usage to the op's meter; one agent_events row per op."""

import uuid

import pytest

from retrieval.health import meaning
from retrieval.providers import costs, customer
from retrieval.search import rerank
from retrieval.store import clickhouse
from tests.model_server import Answer


def events(org: str) -> list[dict]:
    clickhouse.flush_later()  # the rows are written off the request path
    return clickhouse.query(
        "SELECT op, upstream_cost_usd, embedding_tokens, embedding_calls, llm_calls, rerank_calls, model "
        "FROM agent_events "
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
    assert meter.dominant_model() == "gpt-4o-mini-2024-08-06"  # the id the provider reported, priced by its family


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


@pytest.mark.parametrize(
    ("model", "reported", "price"),
    [("gpt-4o", "gpt-4o-2024-08-06", (2.50, 10.00)), ("gpt-4.1-mini", "gpt-4.1-mini-2024-08-06", (0.40, 1.60))],
)
def test_a_snapshot_bills_at_its_familys_price_and_the_row_keeps_the_id_reported(
    backend, openai_llm, model_server, settings, model, reported, price
):
    settings.LOOM_LLM_MODEL = model
    openai_llm.cache_clear()
    org = f"meter-{uuid.uuid4().hex[:8]}"
    with costs.accounted(org, "default", "memory.ask", "test"), customer.for_org(org):
        result = openai_llm().complete("system", "how many moons does mars have")
    assert result.model == reported  # the provider answers with a dated snapshot, as the real API does
    (row,) = events(org)
    assert row["model"] == reported
    expected = (result.input_tokens * price[0] + result.output_tokens * price[1]) / 1e6
    assert row["upstream_cost_usd"] == pytest.approx(expected) and expected > 0


def test_a_claude_snapshot_bills_at_its_familys_price(backend, anthropic_llm, model_server, settings):
    settings.LOOM_LLM_MODEL = "claude-haiku-4-5"
    anthropic_llm.cache_clear()
    with costs.metered() as meter, customer.for_org(f"meter-{uuid.uuid4().hex[:8]}"):
        result = anthropic_llm().complete("answer briefly", "what is the deploy window?")
    assert result.model == "claude-haiku-4-5-20251001"
    plain, written = result.input_tokens - result.cache_write_tokens, result.cache_write_tokens
    assert meter.cost_usd == pytest.approx((plain * 1.00 + written * 1.25 + result.output_tokens * 5.00) / 1e6)


def test_a_cached_answer_saves_what_the_model_asked_for_costs(backend, openai_llm, model_server, settings):
    settings.LOOM_LLM_MODEL = "gpt-4o"
    openai_llm.cache_clear()
    with customer.for_org(f"meter-{uuid.uuid4().hex[:8]}"):
        openai_llm().complete("system", "how many moons does mars have")
        with costs.metered() as meter:
            again = openai_llm().complete("system", "how many moons does mars have")
    assert again.from_cache and len(model_server.chat_requests()) == 1
    assert meter.cost_usd == 0 and meter.cache_saved_usd == pytest.approx(again.saved_usd) and again.saved_usd > 0


ROWS = [
    {"memory_key": "board", "value": "the quarterly report for the board is due friday"},
    {"memory_key": "menu", "value": "the cafeteria menu changes on mondays"},
]


def test_a_cohere_rerank_bills_its_search_units_on_the_searchs_row(backend, model_server, ranker, settings):
    settings.COHERE_API_KEY = "co-test-key"
    settings.LOOM_COHERE_BASE_URL = model_server.url.removesuffix("/v1")
    ranker.set(*ROWS)
    assert ranker.search("quarterly report", rerank="builtin:cohere").status == 200
    assert model_server.rerank_requests()
    (row,) = [row for row in events(org_of(ranker)) if row["op"] == "memory.search"]
    assert (row["rerank_calls"], row["model"]) == (1, "rerank-v3.5")
    assert row["upstream_cost_usd"] == pytest.approx(2.00 / 1000)  # one search unit (tests/model_server.py)


def test_an_operator_endpoints_rerank_is_a_call_on_the_row_at_no_listed_price(
    backend, model_server, ranker, settings, caplog
):
    settings.LOOM_RERANK_ENDPOINTS_JSON = f'{{"ours": {{"url": "{model_server.url}/custom/rerank"}}}}'
    rerank.endpoints.cache_clear()
    ranker.set(*ROWS)
    with caplog.at_level("WARNING", logger="retrieval.providers.costs"):
        assert ranker.search("quarterly report", rerank="ours").status == 200
    rerank.endpoints.cache_clear()
    (row,) = [row for row in events(org_of(ranker)) if row["op"] == "memory.search"]
    assert (row["rerank_calls"], row["upstream_cost_usd"]) == (1, 0.0)
    assert not caplog.records  # the operator's own hardware: no price to list, nothing to warn of


def test_an_llm_rerank_is_an_llm_call_on_the_searchs_row(backend, openai_llm, model_server, ranker, settings):
    settings.LOOM_LLM_MODEL = "gpt-4o-mini"
    ranker.set(*ROWS)
    model_server.script(Answer(content='{"order": [2, 1]}'))
    assert ranker.search("quarterly report", rerank="builtin:openai:gpt-4o-mini").status == 200
    (row,) = [row for row in events(org_of(ranker)) if row["op"] == "memory.search"]
    assert (row["llm_calls"], row["rerank_calls"], row["model"]) == (1, 0, "gpt-4o-mini-2024-08-06")
    assert row["upstream_cost_usd"] > 0


def test_health_names_each_configured_model_without_a_verified_price(health, settings, model_server):
    settings.OPENAI_API_KEY = "sk-test-key"
    settings.OPENAI_BASE_URL = model_server.url
    settings.LOOM_LLM_MODEL = "gpt-6-luna"  # the spec's default: no price published that we could verify
    settings.LOOM_LLM_FALLBACK_MODEL = "gpt-4o-mini-2024-07-18"  # a snapshot of a listed family
    settings.LOOM_RERANK_OPENAI_MODEL = "gpt-6-luna"
    settings.COHERE_API_KEY = "co-test-key"
    found = health()
    unpriced = [p for p in found["problems"] if p.startswith("model_unpriced:")]
    assert unpriced == ["model_unpriced:gpt-6-luna", "model_unpriced:gpt-6.1-sol"]  # the conflict resolver's too
    assert found["status"] == "ok"
    settings.LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED = False  # a model no call can reach bills nothing
    assert "model_unpriced:gpt-6.1-sol" not in health()["problems"]
    assert "bill $0" in meaning("model_unpriced:gpt-6-luna")
