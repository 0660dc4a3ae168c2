"""POST /v1/memory.list."""

import pytest

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def test_list_is_newest_first_and_pages_by_cursor(backend, alice, call):
    token = alice.token("writer")
    for i in range(7):
        call("memory.set", {"memory_key": f"key.{i}", "value": f"v{i}"}, token)
    seen, cursor = [], None
    while True:
        body = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = call("memory.list", body, token).json
        seen += [item["memory_key"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"key.{i}" for i in reversed(range(7))]


def test_a_cursor_survives_new_writes(backend, alice, call):
    token = alice.token("writer")
    for i in range(4):
        call("memory.set", {"memory_key": f"key.{i}", "value": f"v{i}"}, token)
    first = call("memory.list", {"limit": 2}, token).json
    call("memory.set", {"memory_key": "key.new", "value": "written between pages"}, token)
    second = call("memory.list", {"limit": 2, "cursor": first["next_cursor"]}, token).json
    assert [i["memory_key"] for i in second["items"]] == ["key.1", "key.0"]


def test_list_by_score_orders_by_confidence(backend, alice, call):
    token = alice.token("writer")
    for key, confidence in (("low", 0.2), ("high", 0.9), ("mid", 0.5), ("mid2", 0.5)):
        call("memory.set", {"memory_key": key, "value": key, "confidence": confidence}, token)
    first = call("memory.list", {"order": "score", "limit": 2}, token).json
    rest = call("memory.list", {"order": "score", "limit": 2, "cursor": first["next_cursor"]}, token).json
    assert [i["memory_key"] for i in first["items"] + rest["items"]] == ["high", "mid", "mid2", "low"]


def test_list_filters_by_type_writer_and_prefix_and_hides_deleted(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "user.name", "value": "Ada", "memory_type": "fact"}, token)
    call("memory.set", {"memory_key": "user.likes", "value": "tea", "memory_type": "preference"}, token)
    call("memory.set", {"memory_key": "team.size", "value": "6", "agent": "hr-bot"}, token)
    call("memory.set", {"memory_key": "user.gone", "value": "x"}, token)
    call("memory.delete", {"memory_key": "user.gone"}, token)
    keys = lambda body: [i["memory_key"] for i in call("memory.list", body, token).json["items"]]  # noqa: E731
    assert keys({"key_prefix": "user."}) == ["user.likes", "user.name"]
    assert keys({"memory_type": "preference"}) == ["user.likes"]
    assert keys({"agent": "hr-bot"}) == ["team.size"]


def test_list_refuses_a_forged_cursor_and_an_oversize_limit(backend, alice, call):
    token = alice.token("viewer")
    forged = call("memory.list", {"cursor": "not-a-cursor"}, token)
    assert forged.status == 422 and forged.error == "INVALID_CURSOR" and forged.json["error"]["field"] == "cursor"
    big = call("memory.list", {"limit": 1001}, token)
    assert big.status == 422 and big.json["error"]["field"] == "limit"
