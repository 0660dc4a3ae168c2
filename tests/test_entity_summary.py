"""entity_summary.set / .delete: an entity summarised in the words people use finds the rows that name it in
another ("the Berlin office" -> Office:BER), through the entity leg and the query-named-entity boost."""

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.conftest import Agent

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

STAFF = [
    {"memory_key": "staff.jonas", "value": "Jonas Berg works at BER", "entities": ["Office:BER"]},
    {"memory_key": "staff.lena", "value": "Lena Fischer works at MUC", "entities": ["Office:MUC"]},
]
BERLIN = {"entity": "Office:BER", "summary": "the Berlin office, where the company works in Berlin"}
QUESTION = "Who works at the Berlin office?"


def summarise(agent: Agent, *items: dict):
    return agent.call("entity_summary.set", {"namespace": agent.namespace, "items": list(items)}, agent.token)


def test_a_summary_is_stored_then_unchanged_then_updated(backend, agent):
    first = summarise(agent, BERLIN)
    assert first.status == 201 and first.json["items"][0]["entity"] == "office:ber", first.json
    assert first.json["items"][0]["outcome"] == "created" and first.json["items"][0]["embedding_pending"] is False
    assert summarise(agent, BERLIN).json["items"][0]["outcome"] == "unchanged"
    moved = summarise(agent, {**BERLIN, "summary": "the Berlin office, on Torstrasse"}).json["items"][0]
    assert moved["outcome"] == "updated" and moved["version"] > first.json["items"][0]["version"]


def test_a_question_naming_the_entity_in_other_words_finds_its_rows(backend, ranker):
    ranker.set(*STAFF)
    before = ranker.search(QUESTION).json
    assert before["abstain_code"] == "entity_absent"  # no row says "Berlin"
    summarise(ranker, BERLIN, {"entity": "Office:MUC", "summary": "the Munich office"})
    after = ranker.search(QUESTION, explain=True).json
    assert not after["abstain"] and "office:ber" in after["query_entities"]
    top = after["hits"][0]
    assert top["memory_key"] == "staff.jonas" and top["score_components"]["query_entity_boost"] > 0
    assert after["retrieval_work"]["names_found"] == ["office:ber"]


def test_a_deleted_summary_no_longer_names_its_entity(backend, ranker):
    ranker.set(*STAFF)
    summarise(ranker, BERLIN)
    assert "office:ber" in ranker.search(QUESTION).json["query_entities"]
    gone = ranker.call("entity_summary.delete", {"entity": "office:BER"}, ranker.token)
    assert gone.json == {"entity": "office:ber", "deleted": 1}
    assert ranker.search(QUESTION).json["abstain_code"] == "entity_absent"


def test_another_orgs_summary_names_nothing_here(backend, alice, bob, call):
    alices, bobs = Agent(call, alice.token("writer")), Agent(call, bob.token("writer"))
    summarise(alices, BERLIN)
    bobs.set(*STAFF)
    assert bobs.search(QUESTION).json["abstain_code"] == "entity_absent"


def test_a_summary_waits_unembedded_while_the_orgs_calls_are_off(backend, ranker):
    ranker.set(*STAFF)
    ranker.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, ranker.token)
    assert summarise(ranker, BERLIN).json["items"][0]["embedding_pending"] is True
    ranker.call("org.set_model_calls", {"enabled": True, "reason": "done"}, ranker.token)
    assert ranker.search(QUESTION).json["abstain_code"] == "entity_absent"
    call_command("embed_pending")
    assert "office:ber" in ranker.search(QUESTION).json["query_entities"]


def test_a_summary_holding_a_secret_is_never_embedded(backend, agent):
    item = {"entity": "vault", "summary": "the vault; its API key is sk-test-abcdefghijklmnop1234"}
    stored = summarise(agent, item).json["items"][0]
    assert (stored["sensitivity"], stored["embedding_pending"]) == ("high", False)


@pytest.mark.parametrize(
    "body,code,field",
    [
        ({"items": [{"summary": "x"}]}, "MISSING_FIELD", "items[0].entity"),
        ({"items": [{"entity": "e"}]}, "MISSING_FIELD", "items[0].summary"),
        ({"items": []}, "INVALID_VALUE", "items"),
    ],
)
def test_a_bad_summary_is_refused_naming_its_field(backend, agent, body, code, field):
    reply = agent.call("entity_summary.set", {"namespace": "default", **body}, agent.token)
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (422, code, field), reply.json


def test_the_documented_example_runs(backend, agent):
    section = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text().split("## entity_summary.set")[1]
    bodies = [json.loads(body) for body in re.findall(r"-d '(\{.*?\})'", section.split("\n## ")[0], re.S)]
    created = agent.call("entity_summary.set", bodies[0], agent.token)
    assert created.status == 201 and created.json["items"][0]["entity"] == "office:ber"
    assert agent.call("entity_summary.delete", bodies[1], agent.token).json == {"entity": "office:ber", "deleted": 1}
