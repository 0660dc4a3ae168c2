"""record.set / .delete, the records leg (`records` beside the hits) and memory.ask answering from a record."""

import json
import re
from pathlib import Path

import pytest

from retrieval.store import clickhouse
from tests.conftest import Agent

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

ACME = {"record_key": "customer:acme", "record_type": "customer", "fields": {"plan": "Enterprise", "seats": "40"}}
NORTHWIND = {"record_key": "customer:northwind", "record_type": "customer", "fields": {"plan": "Starter"}}
FRIDAY = {
    "record_key": "decision:friday-deploys",
    "record_type": "precedent",
    "fields": {
        "situation": "a hotfix was ready on a Friday afternoon",
        "decision": "Deploy hotfixes on Friday only with the on-call lead's sign-off",
        "rationale": "weekend incidents outweigh the wait",
    },
}


def store(agent: Agent, *items: dict):
    return agent.call("record.set", {"namespace": agent.namespace, "items": list(items)}, agent.token)


def test_a_record_is_stored_then_unchanged_then_updated(backend, agent):
    first = store(agent, ACME)
    assert first.status == 201 and first.json["items"][0]["outcome"] == "created", first.json
    assert store(agent, ACME).json["items"][0]["outcome"] == "unchanged"
    moved = store(agent, {**ACME, "fields": {"plan": "Growth", "seats": "40"}}).json["items"][0]
    assert moved["outcome"] == "updated" and moved["version"] > first.json["items"][0]["version"]


def test_the_records_leg_serves_the_records_that_share_the_questions_words(backend, agent):
    store(agent, ACME, NORTHWIND)
    found = agent.search("Which plan is Acme on?").json["records"]
    assert [record["record_key"] for record in found] == ["customer:acme", "customer:northwind"]
    assert found[0]["fields"] == {"plan": "Enterprise", "seats": "40"} and found[0]["matched"] > found[1]["matched"]
    assert found[0]["text"] == "customer customer:acme: plan: Enterprise; seats: 40"
    assert agent.search("Which plan is Acme on?", memory_type="fact").json["records"] == []  # a filter: no records


def test_memory_ask_answers_from_a_record_that_names_what_is_asked(backend, openai_llm, model_server, agent):
    store(agent, ACME, NORTHWIND)
    reply = agent.call("memory.ask", {"query": "Which plan is Acme on?"}, agent.token).json
    assert (reply["source"], reply["answer"], reply["memory_keys"]) == ("record", "Enterprise", ["customer:acme"])
    assert model_server.chat_requests() == []  # answered without a model call
    vague = agent.call("memory.ask", {"query": "Tell me about Acme"}, agent.token).json
    assert vague["source"] != "record"  # no field named: evidence, not an answer


def test_memory_ask_answers_from_a_recorded_decision(backend, openai_llm, model_server, agent):
    store(agent, FRIDAY)
    reply = agent.call("memory.ask", {"query": "May we deploy a hotfix on Friday afternoon?"}, agent.token).json
    assert reply["source"] == "precedent" and reply["memory_keys"] == ["decision:friday-deploys"]
    assert reply["answer"].startswith("Deploy hotfixes on Friday only with the on-call lead's sign-off")


def test_a_deleted_record_is_no_longer_served(backend, agent):
    store(agent, ACME)
    gone = agent.call("record.delete", {"namespace": "default", "record_key": "customer:acme"}, agent.token)
    assert gone.json == {"record_key": "customer:acme", "deleted": 1}
    assert agent.search("Which plan is Acme on?").json["records"] == []


def test_another_org_never_sees_a_record(backend, alice, bob, call):
    store(Agent(call, alice.token("writer")), ACME)
    assert Agent(call, bob.token("writer")).search("Which plan is Acme on?").json["records"] == []


def test_a_record_holding_a_secret_is_stored_high_and_never_served(backend, agent):
    secret = {"record_key": "vault", "record_type": "credential", "fields": {"key": "sk-test-abcdefghijklmnop1234"}}
    assert store(agent, secret).json["items"][0]["sensitivity"] == "high"
    assert agent.search("the vault credential key").json["records"] == []


@pytest.mark.parametrize(
    "item,code,field",
    [
        ({"record_type": "customer", "fields": {"plan": "x"}}, "MISSING_FIELD", "items[0].record_key"),
        ({"record_key": "k", "fields": {"plan": "x"}}, "MISSING_FIELD", "items[0].record_type"),
        ({"record_key": "k", "record_type": "customer"}, "MISSING_FIELD", "items[0].fields"),
        ({"record_key": "k", "record_type": "customer", "fields": {}}, "INVALID_VALUE", "items[0].fields"),
        ({"record_key": "k", "record_type": "customer", "fields": {"plan": 3}}, "INVALID_TYPE", "items[0].fields.plan"),
        (
            {"record_key": "k", "record_type": "customer", "fields": {"plan": " "}},
            "INVALID_VALUE",
            "items[0].fields.plan",
        ),
        ({"record_key": "k", "record_type": "customer", "fields": {" ": "x"}}, "INVALID_VALUE", "items[0].fields"),
    ],
)
def test_a_bad_record_is_refused_naming_its_field(backend, agent, item, code, field):
    reply = agent.call("record.set", {"namespace": "default", "items": [item]}, agent.token)
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (422, code, field), reply.json


def test_the_documented_example_runs(backend, openai_llm, agent):
    section = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text().split("## record.set")[1]
    bodies = [json.loads(body) for body in re.findall(r"-d '(\{.*?\})'", section.split("\n## ")[0], re.S)]
    assert agent.call("record.set", bodies[0], agent.token).status == 201
    asked = agent.call("memory.ask", bodies[1], agent.token).json
    assert (asked["answer"], asked["source"], asked["memory_keys"]) == ("Enterprise", "record", ["customer:acme"])


def test_an_unreadable_records_table_fails_open(backend, agent):
    store(agent, ACME)
    clickhouse.command("RENAME TABLE memory_records TO memory_records_away")
    try:
        reply = agent.search("Which plan is Acme on?")
    finally:
        clickhouse.command("RENAME TABLE memory_records_away TO memory_records")
    assert reply.status == 200 and reply.json["records"] == []
    # Named as the records read, or as the check of which side tables the namespace holds (one statement for all).
    assert {"records", "side_tables"} & set(reply.json["degraded"])
