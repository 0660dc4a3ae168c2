"""POST /v1/memory.timeline and /v1/memory.related."""

import pytest

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def keys(reply):
    assert reply.status == 200, reply.json
    return [row["memory_key"] for row in reply.json["results"]]


def seed(agent):
    agent.set(
        {
            "memory_key": "jan",
            "value": "Acme signed",
            "entities": ["Acme", "Dana"],
            "valid_at": "2024-01-10T00:00:00Z",
            "tags": ["sales"],
        },
        {"memory_key": "mar", "value": "Acme renewed", "entities": ["acme"], "valid_at": "2024-03-10T00:00:00Z"},
        {
            "memory_key": "feb",
            "value": "Globex met Dana",
            "entities": ["Globex", "Dana"],
            "valid_at": "2024-02-10T00:00:00Z",
            "tags": ["sales"],
        },
        {"memory_key": "acme.secret", "value": "Acme api key: sk-abcdefghijklmnopqrstuvwxyz", "entities": ["Acme"]},
        {"memory_key": "none", "value": "no entities here"},
    )


def test_timeline_by_entity_tags_or_prefix_in_time_order(backend, agent, call):
    seed(agent)
    t = agent.token
    assert keys(call("memory.timeline", {"entity": "ACME"}, t)) == ["mar", "jan"]  # the secret is read by key only
    assert keys(call("memory.timeline", {"entity": "acme", "order": "asc"}, t)) == ["jan", "mar"]
    assert keys(call("memory.timeline", {"tags": ["sales"]}, t)) == ["feb", "jan"]
    assert keys(call("memory.timeline", {"memory_key_prefix": "ma"}, t)) == ["mar"]
    windowed = call("memory.timeline", {"entity": "dana", "since": "2024-02-01T00:00:00Z"}, t)
    assert keys(windowed) == ["feb"]
    page = call("memory.timeline", {"entity": "acme", "top_k": 1}, t).json
    assert len(page["results"]) == 1 and page["total_matching"] == 2
    # The edges of what ClickHouse stores: an offset that reaches past 1900 is held at it, not refused.
    edge = call("memory.timeline", {"entity": "acme", "since": "1900-01-01T05:00:00+06:00"}, t)
    assert keys(edge) == ["mar", "jan"]


def test_a_time_outside_the_stored_years_is_refused_by_name(backend, agent, call):
    # Found by the fuzz run: year 85 reached ClickHouse, which refused the parameter, and the caller got a 500.
    body = {"memory_key_prefix": "x", "until": "0085-10-10T03:16:30.666094+10:52"}
    reply = call("memory.timeline", body, agent.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "INVALID_VALUE", "until")
    assert "1900 to 2299" in reply.json["error"]["message"]


def test_timeline_needs_something_to_follow(backend, agent, call):
    reply = call("memory.timeline", {}, agent.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "MISSING_FIELD", "entity")


def test_related_ranks_rows_by_entities_shared(backend, agent, call):
    seed(agent)
    reply = call("memory.related", {"memory_key": "jan"}, agent.token).json
    assert [(r["memory_key"], r["overlap"], r["shared"]) for r in reply["results"]] == [
        ("mar", 1, ["acme"]),
        ("feb", 1, ["dana"]),
    ]
    assert reply["reason"] is None
    assert call("memory.related", {"memory_key": "jan", "min_overlap": 2}, agent.token).json["results"] == []
    none = call("memory.related", {"memory_key": "none"}, agent.token).json
    assert (none["results"], none["reason"]) == ([], "source_has_no_entities")
    missing = call("memory.related", {"memory_key": "nope"}, agent.token).json
    assert missing["reason"] == "source_not_found"
