"""context.pack: the best evidence for a task as one block within a token budget, the verdict at the top, each line
cited by key; never a model call."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.language.text import token_count
from tests.conftest import Agent

pytestmark = pytest.mark.cluster

FACTS = [
    {
        "memory_key": "deploy.window",
        "value": "Production deploys run Tuesdays at 10:00 UTC",
        "valid_at": "2026-03-02T00:00:00Z",
    },
    {"memory_key": "deploy.freeze", "value": "No production deploys on Fridays after noon"},
    {"memory_key": "oncall.lead", "value": "Dana Reyes leads the on-call rotation this quarter"},
]


def pack(agent: Agent, query: str, **fields):
    return agent.call("context.pack", {"namespace": agent.namespace, "query": query, **fields}, agent.token)


def test_the_block_leads_with_the_verdict_and_cites_each_line_by_key(backend, agent):
    agent.set(*FACTS)
    reply = pack(agent, "When can I deploy to production?", max_tokens=200)
    assert reply.status == 200, reply.json
    body = reply.json
    first, verdict, *lines = body["context"].splitlines()
    assert first == "Memory for: When can I deploy to production?"
    assert verdict.startswith("Verdict: ") and "best first" in verdict and body["abstain"] is False
    search = agent.search("When can I deploy to production?", top_k=20, retrieval_budget="fast").json
    assert body["memory_keys"] == [hit["memory_key"] for hit in search["hits"]][: len(lines)]
    assert lines[0].startswith(f"[{body['memory_keys'][0]}] ")
    assert "[deploy.window] 2026-03-02 Production deploys run Tuesdays at 10:00 UTC" in lines
    assert body["tokens"] == token_count(body["context"]) <= 200 and body["max_tokens"] == 200


def test_an_abstained_search_packs_the_verdict_alone(backend, agent):
    agent.set(*FACTS)
    body = pack(agent, "What is the capital of Peru?").json
    assert body["abstain"] is True and body["memory_keys"] == [] and body["lines"] == []
    assert body["context"].splitlines()[1].startswith(f"Verdict: memory does not know this ({body['abstain_code']})")


def test_a_tight_budget_cuts_the_top_line_and_leaves_the_rest_out(backend, agent):
    agent.set(*FACTS)
    body = pack(agent, "deploys", max_tokens=32).json
    assert body["tokens"] <= 32 and len(body["lines"]) == 1 and body["lines"][0]["truncated"] is True
    assert body["context"].endswith("…") and body["left_out"] >= 1


def test_a_superseded_value_and_a_duplicate_stay_out(backend, agent):
    agent.set(*FACTS)
    agent.set({"memory_key": "deploy.window", "value": "Production deploys run Wednesdays at 09:00 UTC"})
    agent.set({"memory_key": "deploy.window.copy", "value": "Production deploys run Wednesdays at 09:00 UTC"})
    body = pack(agent, "Which day do production deploys run?", max_tokens=400).json
    assert "Tuesdays" not in body["context"]
    assert body["context"].count("Production deploys run Wednesdays at 09:00 UTC") == 1


def test_it_never_calls_a_model(backend, agent, openai_llm, model_server):
    agent.set(*FACTS)
    assert pack(agent, "when is the deploy window?", max_tokens=300, search_mode="hybrid").status == 200
    assert model_server.chat_requests() == []


def test_what_a_pack_cannot_take_is_refused_naming_the_field(backend, agent):
    for body, field in (({"max_tokens": 10}, "max_tokens"), ({"hyde": True}, "hyde"), ({}, "query")):
        reply = agent.call("context.pack", {"query": "deploys", **body} if field != "query" else body, agent.token)
        assert reply.status == 422 and reply.json["error"]["field"] == field, reply.json


WORDS = ["deploy", "freeze", "oncall", "rotation", "budget", "renewal", "Acme", "Dana", "Porto", "offsite", "invoice"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=60).map(" ".join), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    max_tokens=st.integers(32, 600),
)
def test_a_pack_never_exceeds_its_budget_and_keeps_the_top_hit_first(backend, alice, call, values, query, max_tokens):
    agent = Agent(call, alice.token("writer"), f"pack-{uuid.uuid4().hex[:8]}")
    agent.set(*[{"memory_key": f"m{i}", "value": value} for i, value in enumerate(values)])
    body = pack(agent, query, max_tokens=max_tokens).json
    assert body["tokens"] == token_count(body["context"]) <= max_tokens
    search = agent.search(query, top_k=20, retrieval_budget="fast").json
    if body["lines"]:
        assert body["memory_keys"][0] == search["hits"][0]["memory_key"]
    elif not body["abstain"] and search["hits"] and max_tokens >= 150:
        raise AssertionError("a budget with room left no line for the top hit")
