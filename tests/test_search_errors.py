"""memory.search: every bad field is a 422 that names it."""

import pytest

from memories import inputs
from retrieval.errors import STATUS

CASES = [
    ({}, "MISSING_FIELD", "query"),
    ({"query": ""}, "INVALID_VALUE", "query"),
    ({"query": 5}, "INVALID_TYPE", "query"),
    ({"query": "q", "top_k": 0}, "INVALID_VALUE", "top_k"),
    ({"query": "q", "top_k": 501}, "INVALID_VALUE", "top_k"),
    ({"query": "q", "top_k": "5"}, "INVALID_TYPE", "top_k"),
    ({"query": "q", "top_k": 2.5}, "INVALID_TYPE", "top_k"),
    ({"query": "q", "search_mode": "vibes"}, "INVALID_VALUE", "search_mode"),
    ({"query": "q", "recipe": "spicy"}, "INVALID_VALUE", "recipe"),
    ({"query": "q", "retrieval_budget": "huge"}, "INVALID_VALUE", "retrieval_budget"),
    ({"query": "q", "alpha": 2}, "INVALID_VALUE", "alpha"),
    ({"query": "q", "min_similarity": -0.1}, "INVALID_VALUE", "min_similarity"),
    ({"query": "q", "floor_mode": "hide"}, "INVALID_VALUE", "floor_mode"),
    ({"query": "q", "bodies": "all"}, "INVALID_VALUE", "bodies"),
    ({"query": "q", "memory_type": "dream"}, "INVALID_VALUE", "memory_type"),
    ({"query": "q", "tags": "a"}, "INVALID_TYPE", "tags"),
    ({"query": "q", "entity_filter": [1]}, "INVALID_TYPE", "entity_filter[0]"),
    ({"query": "q", "exclude_keys": ["k"] * 201}, "TOO_MANY_ITEMS", "exclude_keys"),
    ({"query": "q", "read_scope": "everyone"}, "INVALID_VALUE", "read_scope"),
    ({"query": "q", "namespace_scope": "all"}, "INVALID_VALUE", "namespace_scope"),
    ({"query": "q", "as_of": "last tuesday"}, "INVALID_VALUE", "as_of"),
    ({"query": "q", "as_of": "0058-06-02T20:54:59Z"}, "INVALID_VALUE", "as_of"),  # before ClickHouse's years
    ({"query": "q", "as_of": "2300-01-01T00:00:00Z"}, "INVALID_VALUE", "as_of"),
    ({"query": "q", "as_of_basis": "wall_clock"}, "INVALID_VALUE", "as_of_basis"),
    ({"query": "q", "observation_date": "2024-13-01"}, "INVALID_VALUE", "observation_date"),
    ({"query": "q", "observation_date": "1899-12-31"}, "INVALID_VALUE", "observation_date"),
    ({"query": "q", "personalization": "off"}, "INVALID_VALUE", "personalization"),
    ({"query": "q", "explain": "yes"}, "INVALID_TYPE", "explain"),
    ({"query": "q", "rerank": "https://rerank.example/v1"}, "INVALID_VALUE", "rerank"),
    ({"query": "q", "body_budget_tokens": 0}, "INVALID_VALUE", "body_budget_tokens"),
    ({"query": "q", "colour": "red"}, "UNKNOWN_FIELD", "colour"),
    ({"query": "q", "read_scope": "own_user"}, "MISSING_FIELD", "user_id"),
    ({"query": "q", "read_scope": "own_session", "user_id": "u"}, "MISSING_FIELD", "session_id"),
    # A page of a parked result too (the fuzz run found it answered 200 without the user).
    ({"page": "p", "read_scope": "own_session"}, "MISSING_FIELD", "user_id"),
]


@pytest.mark.parametrize("body,code,field", CASES, ids=[c[2] + "-" + c[1] for c in CASES])
def test_bad_search_fields(backend, agent, call, body, code, field):
    reply = call("memory.search", body, agent.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (STATUS[code], code, field)
    assert STATUS[code] == 422  # a list over its maxItems too: a validation failure, as the schema says


def test_a_whole_number_written_with_a_point_is_an_integer(backend, agent):
    # JSON has one number type; a client (or a JSON Schema validator) may well write top_k 3 as 3.0.
    agent.set(*({"memory_key": f"k{n}", "value": f"deploys are frozen on day {n}"} for n in range(4)))
    assert len(agent.search("deploys", top_k=3.0).json["hits"]) == 3


def test_bad_outcome_and_trace_log_fields(backend, agent, call):
    bad = call("memory.outcome", {"memory_keys": ["k"], "outcome": "meh"}, agent.token)
    assert (bad.status, bad.json["error"]["field"]) == (422, "outcome")
    too_many = call("memory.outcome", {"memory_keys": ["k"] * 1001, "outcome": "harm"}, agent.token)
    assert (too_many.status, too_many.error) == (422, "TOO_MANY_ITEMS")
    log = call("memory.search_trace_log", {"limit": 0}, agent.token)
    assert (log.status, log.json["error"]["field"]) == (422, "limit")


def test_each_request_validates_with_fields_of_its_own():
    # A request's serializer copies the declared fields (memories/inputs/base.py, Strict.get_fields): fields shared
    # between two requests would be bound to whichever bound them last, reading its data and context.
    first, second = inputs.MemorySearch(data={"query": "a"}), inputs.MemorySearch(data={"query": "b"})
    assert all(field.parent is first for field in first.fields.values())
    assert all(field.parent is second for field in second.fields.values())
    assert first.is_valid() and second.is_valid()
    assert (first.validated_data["query"], second.validated_data["query"]) == ("a", "b")
