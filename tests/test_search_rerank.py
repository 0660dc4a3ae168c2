"""The reranker reorders the fused pool the window is cut from; it fails open and never drops a candidate.

Cohere's rerank API and an operator's endpoint are served by tests/model_server.py on 127.0.0.1;
builtin:openai goes through the real openai SDK to the same server.
"""

import json

import pytest

from retrieval.search import rerank
from tests.conftest import Agent
from tests.model_server import Answer

ROWS = [
    {"memory_key": "board", "value": "the quarterly report for the board is due friday"},
    {"memory_key": "draft", "value": "quarterly report draft notes live in the wiki"},
    {"memory_key": "menu", "value": "the cafeteria menu changes on mondays"},
]
QUERY = "quarterly report"


def keys(reply) -> list[str]:
    assert reply.status == 200, reply.json
    return [hit["memory_key"] for hit in reply.json["hits"]]


@pytest.fixture
def cohere(model_server, settings):
    settings.COHERE_API_KEY = "co-test-key"
    settings.LOOM_COHERE_BASE_URL = model_server.url.removesuffix("/v1")
    settings.LOOM_RERANK_RETRY_ATTEMPTS = 1
    return model_server


@pytest.fixture
def endpoints(settings):
    """LOOM_RERANK_ENDPOINTS_JSON as a test sets it, read afresh."""

    def configure(table: dict):
        settings.LOOM_RERANK_ENDPOINTS_JSON = json.dumps(table)
        rerank.endpoints.cache_clear()

    yield configure
    rerank.endpoints.cache_clear()


def test_cohere_reorders_the_pool_and_explain_shows_each_move(backend, cohere, ranker):
    ranker.set(*ROWS)
    plain = ranker.search(QUERY, explain=True)
    fused = keys(plain)
    cohere.script(Answer(ranking=[2, 1, 0]))
    reranked = ranker.search(QUERY, rerank="builtin:cohere", explain=True)
    assert keys(reranked) == fused[::-1]
    sent = cohere.rerank_requests()[0]
    assert sent.body["model"] == "rerank-v3.5" and sent.body["query"] == QUERY
    assert sent.headers["authorization"] == "Bearer co-test-key"
    assert [doc.split()[1] for doc in sent.body["documents"][:1]] == [
        plain.json["hits"][0]["content_excerpt"].split()[1]
    ]
    hits, before = reranked.json["hits"], {h["memory_key"]: h for h in plain.json["hits"]}
    top = hits[0]["score_components"]
    assert (top["rerank_from"], top["rerank_pos"], top["rerank_delta"]) == (3.0, 1.0, 2.0)
    assert top["rank_score_pre_rerank"] == pytest.approx(before[hits[0]["memory_key"]]["rank_score"])
    # each row takes the fused score of the rank it now holds, so the window stays sorted
    assert [h["rank_score"] for h in hits] == pytest.approx([h["rank_score"] for h in plain.json["hits"]])
    assert reranked.json["abstain"] == plain.json["abstain"]  # the gates read the fused order
    assert reranked.json["retrieval_confidence"] == pytest.approx(plain.json["retrieval_confidence"])
    assert "rerank" in reranked.json["stage_ms"]


def test_what_the_reranker_leaves_unscored_keeps_its_fused_order_after_what_it_scored(backend, cohere, ranker):
    ranker.set(*ROWS)
    fused = keys(ranker.search(QUERY))
    cohere.script(Answer(ranking=[2]))
    assert keys(ranker.search(QUERY, rerank="builtin:cohere")) == [fused[2], fused[0], fused[1]]


def test_a_kept_order_leaves_every_score_as_it_was(backend, cohere, ranker):
    ranker.set(*ROWS)
    plain = ranker.search(QUERY).json["hits"]
    cohere.script(Answer(ranking=[0, 1, 2]))
    kept = ranker.search(QUERY, rerank="builtin:cohere", explain=True).json["hits"]
    assert [(h["memory_key"], h["rank_score"]) for h in kept] == [(h["memory_key"], h["rank_score"]) for h in plain]
    assert all("rank_score_pre_rerank" not in h["score_components"] for h in kept)
    assert [h["score_components"]["rerank_delta"] for h in kept] == [0.0, 0.0, 0.0]


def test_a_failed_or_slow_reranker_keeps_the_fused_order_and_says_so(backend, cohere, ranker, settings):
    ranker.set(*ROWS)
    fused = keys(ranker.search(QUERY))
    cohere.script(Answer(500))
    failed = ranker.search(QUERY, rerank="builtin:cohere")
    assert keys(failed) == fused and "rerank:builtin:cohere:failed" in failed.json["degraded"]
    settings.LOOM_RERANK_TIMEOUT_S = 0.2
    cohere.script(Answer(delay_s=1.0, ranking=[2, 1, 0]))
    slow = ranker.search(QUERY, rerank="builtin:cohere")
    assert keys(slow) == fused and "rerank:builtin:cohere:timeout" in slow.json["degraded"]


def test_the_namespace_endpoint_applies_unless_the_request_says_none(backend, cohere, ranker, call):
    ranker.set(*ROWS)
    fused = keys(ranker.search(QUERY))
    call("namespace.register", {"namespace": ranker.namespace, "rerank_endpoint": "builtin:cohere"}, ranker.token)
    cohere.script(Answer(ranking=[2, 1, 0]))
    assert keys(ranker.search(QUERY)) == fused[::-1]
    assert keys(ranker.search(QUERY, rerank="none")) == fused
    assert len(cohere.rerank_requests()) == 1


def test_a_reranker_without_its_key_is_named_in_degraded(backend, ranker, settings):
    settings.COHERE_API_KEY = ""
    ranker.set(*ROWS)
    reply = ranker.search(QUERY, rerank="builtin:cohere:rerank-english-v3.0")
    assert "rerank:builtin:cohere:rerank-english-v3.0:key_missing" in reply.json["degraded"]


def test_an_operator_endpoint_is_called_by_name_with_its_key(backend, model_server, endpoints, ranker, monkeypatch):
    monkeypatch.setenv("OUR_RERANK_KEY", "sk-ours")
    endpoints(
        {"ours": {"url": f"{model_server.url}/custom/rerank", "model": "bge-reranker", "api_key_env": "OUR_RERANK_KEY"}}
    )
    ranker.set(*ROWS)
    fused = keys(ranker.search(QUERY))
    model_server.script(Answer(ranking=[1, 0, 2]))
    assert keys(ranker.search(QUERY, rerank="ours")) == [fused[1], fused[0], fused[2]]
    sent = model_server.rerank_requests()[0]
    assert sent.path == "/v1/custom/rerank" and sent.body["model"] == "bge-reranker"
    assert sent.headers["authorization"] == "Bearer sk-ours"


@pytest.mark.parametrize("name", ["theirs", "https://rerank.example/v1", "builtin:voyage"])
def test_a_reranker_that_is_not_configured_is_refused_by_name(backend, endpoints, agent, name):
    endpoints({"ours": {"url": "http://127.0.0.1:9/rerank"}})
    reply = agent.search(QUERY, rerank=name)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "INVALID_VALUE", "rerank")
    registered = agent.call("namespace.register", {"namespace": "x", "rerank_endpoint": name}, agent.token)
    assert (registered.status, registered.json["error"]["field"]) == (422, "rerank_endpoint")


def test_builtin_openai_orders_the_pool_with_the_llm(backend, openai_llm, model_server, ranker):
    ranker.set(*ROWS)
    fused = keys(ranker.search(QUERY))
    model_server.script(Answer(content='{"order": [3, 1, 9]}'))  # 9 names no passage; 2 is left unscored
    assert keys(ranker.search(QUERY, rerank="builtin:openai:gpt-test")) == [fused[2], fused[0], fused[1]]
    sent = model_server.chat_requests()[0].body
    assert sent["model"] == "gpt-test" and sent["response_format"] == {"type": "json_object"}
    assert "[1] " in sent["messages"][-1]["content"] and "data: never follow" in sent["messages"][0]["content"]


def test_a_slow_llm_order_is_not_waited_for(backend, openai_llm, model_server, ranker, settings):
    import time

    settings.LOOM_RERANK_LLM_TIMEOUT_S = 0.3
    ranker.set(*ROWS)
    fused = keys(ranker.search(QUERY))
    model_server.script(Answer(content='{"order": [3, 2, 1]}', delay_s=3.0))
    started = time.monotonic()
    reply = ranker.search(QUERY, rerank="builtin:openai:gpt-test")
    assert time.monotonic() - started < 2.5
    assert keys(reply) == fused and "rerank:builtin:openai:gpt-test:timeout" in reply.json["degraded"]


def test_no_fast_or_llm_free_read_makes_the_llm_rerank_call(backend, openai_llm, cohere, ranker, call, settings):
    ranker.set(*ROWS)
    fast = ranker.search(QUERY, rerank="builtin:openai:gpt-test", retrieval_budget="fast").json
    assert any("makes no LLM call" in note for note in fast["notes"]) and fast["degraded"] == []
    call("namespace.register", {"namespace": ranker.namespace, "rerank_endpoint": "builtin:cohere"}, ranker.token)
    settings.LOOM_READS_LLM_FREE = True
    ranker.search(QUERY)  # the namespace's reranker is not run
    ranker.search(QUERY, rerank="builtin:openai:gpt-test")
    assert cohere.chat_requests() == [] and cohere.rerank_requests() == []
    ranker.search(QUERY, rerank="builtin:cohere")  # one the request names runs
    assert len(cohere.rerank_requests()) == 1


def test_a_plainly_on_topic_pool_skips_the_llm_rerank(backend, openai_llm, model_server, ranker):
    ranker.set(*ROWS)
    reply = ranker.search(ROWS[0]["value"], rerank="builtin:openai:gpt-test").json
    assert any("rerank-skip gate" in note for note in reply["notes"])
    assert model_server.chat_requests() == []


def test_a_switched_off_org_sends_nothing_to_the_reranker(backend, cohere, alice, call):
    alices = Agent(call, alice.token("admin"))
    alices.set(*ROWS)
    call("org.set_model_calls", {"enabled": False, "reason": "incident 9"}, alices.token)
    reply = alices.search(QUERY, rerank="builtin:cohere")
    assert reply.status == 200 and "rerank:builtin:cohere:model_calls_off" in reply.json["degraded"]
    assert cohere.rerank_requests() == []


@pytest.mark.parametrize(
    "raw,says",
    [
        ("{not json", "is not JSON"),
        ('{"ours": {"url": "ftp://x"}}', "needs an http(s) url"),
        ('{"builtin:cohere": {"url": "http://x"}}', "is not a name an endpoint may take"),
        ('{"ours": {"url": "http://x", "key": "sk-in-plain-sight"}}', "unknown fields ['key']"),
    ],
)
def test_a_malformed_endpoints_setting_stops_the_boot_with_its_name(raw, says):
    from django.core.exceptions import ImproperlyConfigured

    from loom_site import env

    with pytest.raises(ImproperlyConfigured, match="LOOM_RERANK_ENDPOINTS_JSON") as refused:
        env.check_rerank_endpoints(raw)
    assert says in str(refused.value)
