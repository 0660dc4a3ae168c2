"""search.query (the MCP tool loom_search): the rows' window with the other planes ranked in, each hit naming its
plane: an entity's summary where its cosine falls, a record that answers outright first."""

import pytest

pytestmark = pytest.mark.cluster

BERLIN = {"entity": "office:ber", "summary": "The Berlin office: Acme's EU hub on Torstrasse, 40 engineers"}
ACME = {"record_key": "customer:acme", "record_type": "customer", "fields": {"plan": "Enterprise", "region": "EU"}}


def query(agent, text: str, **fields):
    reply = agent.call("search.query", {"namespace": agent.namespace, "query": text, **fields}, agent.token)
    assert reply.status == 200, reply.json
    return reply.json


def test_an_entity_summary_stands_among_the_rows_by_its_cosine(backend, agent, call):
    agent.set(
        {"memory_key": "office.move", "value": "The Berlin office moves to a new floor on Torstrasse in May"},
        {"memory_key": "lunch", "value": "Friday lunch is pizza"},
    )
    assert call("entity_summary.set", {"items": [BERLIN]}, agent.token).status == 201
    found = query(agent, "Acme Berlin office EU hub engineers", top_k=5)
    planes = {hit["memory_key"]: hit["plane"] for hit in found["hits"]}
    assert planes["entity:office:ber"] == "entity" and planes.get("office.move") == "memory"
    similarities = [hit["similarity"] for hit in found["hits"] if hit["plane"] in ("memory", "entity")]
    entity = next(hit for hit in found["hits"] if hit["plane"] == "entity")
    assert entity["content_excerpt"] == f"office:ber: {BERLIN['summary']}" and entity["entities"] == ["office:ber"]
    at = found["hits"].index(entity)
    assert all(s >= entity["similarity"] for s in similarities[:at])  # (the rows above it are nearer)
    rows_only = query(agent, "Acme Berlin office EU hub engineers", top_k=5, planes=["memory", "session"])
    assert {hit["plane"] for hit in rows_only["hits"]} == {"memory"}
    assert [h["memory_key"] for h in rows_only["hits"]] == [h["memory_key"] for h in found["hits"] if h is not entity]


def test_a_record_that_answers_outright_leads(backend, agent, call):
    agent.set({"memory_key": "acme.note", "value": "Acme renewed last spring after a long negotiation"})
    assert call("record.set", {"items": [ACME]}, agent.token).status == 201
    found = query(agent, "What plan is Acme on?")
    assert found["abstain"] is False and found["retrieval_risk"] == "low"  # (the rows alone abstain, as below)
    first = found["hits"][0]
    assert (first["plane"], first["memory_key"], first["memory_type"]) == ("record", "customer:acme", "customer")
    assert first["score_components"] == {"record_match": 1.0, "record_answers": 1.0}
    assert "plan: Enterprise" in first["content_excerpt"] and first["created_at"] is None
    # memory.search serves the rows alone, the record beside them
    searched = agent.search("What plan is Acme on?").json
    assert searched["abstain"] is True and {hit["plane"] for hit in searched["hits"]} <= {"memory", "session"}
    assert searched["records"][0]["record_key"] == "customer:acme"


def test_an_abstained_search_serves_no_other_plane(backend, agent, call):
    assert call("entity_summary.set", {"items": [BERLIN]}, agent.token).status == 201
    found = query(agent, "What is the capital of Peru?")
    assert found["abstain"] is True and all(hit["plane"] != "entity" for hit in found["hits"])


def test_an_unknown_plane_is_refused_naming_it(backend, agent):
    reply = agent.call("search.query", {"query": "x", "planes": ["memory", "knowledge"]}, agent.token)
    assert (reply.status, reply.json["error"]["field"]) == (422, "planes[1]")
    assert "memory, session, entity, record" in reply.json["error"]["message"]
