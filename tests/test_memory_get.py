"""POST /v1/memory.get and /v1/memory.bulk_get."""

import pytest

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def test_get_a_missing_key_is_404_naming_the_field(backend, alice, call):
    reply = call("memory.get", {"memory_key": "nope"}, alice.token("viewer"))
    assert reply.status == 404
    assert reply.error == "MEMORY_NOT_FOUND" and reply.json["error"]["field"] == "memory_key"


def test_get_serves_the_newest_row_and_narrows_by_session(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "k", "value": "session one", "session_id": "s1"}, token)
    call("memory.set", {"memory_key": "k", "value": "session two", "session_id": "s2"}, token)
    assert call("memory.get", {"memory_key": "k"}, token).json["value"] == "session two"
    assert call("memory.get", {"memory_key": "k", "session_id": "s1"}, token).json["value"] == "session one"
    assert call("memory.get", {"memory_key": "k", "session_id": "s3"}, token).status == 404


def test_reads_are_namespaced(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"namespace": "a", "memory_key": "k", "value": "in a"}, token)
    assert call("memory.get", {"namespace": "b", "memory_key": "k"}, token).status == 404
    assert call("memory.get", {"namespace": "a", "memory_key": "k"}, token).json["value"] == "in a"


def test_bulk_get_returns_found_in_request_order_and_lists_misses(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"items": [{"memory_key": "b", "value": "B"}, {"memory_key": "a", "value": "A"}]}, token)
    reply = call("memory.bulk_get", {"memory_keys": ["a", "zz", "b", "a"]}, alice.token("viewer"))
    assert reply.status == 200
    assert [m["memory_key"] for m in reply.json["memories"]] == ["a", "b"]
    assert reply.json["missing"] == ["zz"]


def test_bulk_get_takes_up_to_1000_keys(backend, alice, call):
    token = alice.token("viewer")
    ok = call("memory.bulk_get", {"memory_keys": [f"k{i}" for i in range(1000)]}, token)
    assert ok.status == 200 and len(ok.json["missing"]) == 1000
    too_many = call("memory.bulk_get", {"memory_keys": [f"k{i}" for i in range(1001)]}, token)
    assert too_many.status == 422
    assert too_many.error == "TOO_MANY_ITEMS" and too_many.json["error"]["field"] == "memory_keys"


def test_bulk_get_names_a_bad_key(backend, alice, call):
    reply = call("memory.bulk_get", {"memory_keys": ["fine", "bad\x07key"]}, alice.token("viewer"))
    assert reply.status == 422
    assert reply.error == "INVALID_KEY" and reply.json["error"]["field"] == "memory_keys[1]"


SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"  # a Stripe live key: stored high, never embedded


def sensitive_reads(alice, call) -> list[dict]:
    entries = call("audit.list", {"limit": 100}, alice.token("admin")).json["entries"]
    return [entry for entry in entries if entry["action"] == "memory.read_sensitive"]


def test_reading_a_high_row_or_a_chunk_key_by_key_is_audited(backend, alice, call):
    writer = alice.token("writer")
    stored = call(
        "memory.set",
        {
            "items": [
                {"memory_key": "ops.aws", "value": f"the deploy box has {SECRET}"},
                {"memory_key": "chunk:handbook:3", "value": "page three of the handbook"},
                {"memory_key": "plain", "value": "backups run nightly"},
            ]
        },
        writer,
    )
    assert [item["sensitivity"] for item in stored.json["items"]][0] == "high"
    reader = alice.token("viewer")
    assert call("memory.get", {"memory_key": "plain"}, reader).status == 200
    assert sensitive_reads(alice, call) == []  # an ordinary read leaves no entry

    assert call("memory.get", {"memory_key": "ops.aws"}, reader).status == 200
    bulk = call("memory.bulk_get", {"memory_keys": ["plain", "chunk:handbook:3", "ops.aws"]}, reader)
    assert bulk.status == 200
    entries = sensitive_reads(alice, call)
    assert sorted((e["detail"]["op"], e["detail"]["memory_key"], tuple(e["detail"]["reason"])) for e in entries) == [
        ("memory.bulk_get", "chunk:handbook:3", ("chunk",)),
        ("memory.bulk_get", "ops.aws", ("high",)),
        ("memory.get", "ops.aws", ("high",)),
    ]
    assert {(e["target"], e["actor"].split(":")[0]) for e in entries} == {("default", "token")}


def test_bulk_get_answers_each_row_without_the_gates_verdict(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "a", "value": "the offsite is in porto"}, token)
    one = call("memory.get", {"memory_key": "a"}, token).json
    (many,) = call("memory.bulk_get", {"memory_keys": ["a"]}, token).json["memories"]
    assert "conflict_verdict" in one
    assert set(one) - set(many) == {"conflict_verdict", "row_count"}  # as the spec's table says: no verdict, no code
    assert "code" not in many
