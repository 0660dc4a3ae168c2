"""POST /v1/memory.delete."""

import pytest

from retrieval.store import clickhouse

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def test_delete_tombstones_every_row_of_the_key(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "k", "value": "one", "agent": "a"}, token)
    call("memory.set", {"memory_key": "k", "value": "two", "agent": "b"}, token)
    call("memory.set", {"memory_key": "k", "value": "two, revised", "agent": "b"}, token)
    reply = call("memory.delete", {"memory_key": "k"}, token)
    assert reply.status == 200 and reply.json["deleted"] == 2
    assert call("memory.get", {"memory_key": "k"}, token).status == 404
    for table in ("memory_embeddings", "memory_terms"):
        live = clickhouse.query_value(
            f"SELECT count() FROM {table} FINAL WHERE org = {{org:String}} AND status = 'active'", {"org": alice.name}
        )
        assert live == 0, table
    docs = clickhouse.query_value(
        "SELECT sum(docs) FROM corpus_stats WHERE org = {org:String} AND field = 'value'", {"org": alice.name}
    )
    assert docs == 0
    history = call("memory.get", {"memory_key": "k", "history": True}, token)
    assert history.status == 404


def test_delete_narrowed_to_one_writer_keeps_the_others(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "k", "value": "one", "agent": "a"}, token)
    call("memory.set", {"memory_key": "k", "value": "two", "agent": "b"}, token)
    assert call("memory.delete", {"memory_key": "k", "agent": "a"}, token).json["deleted"] == 1
    assert call("memory.get", {"memory_key": "k"}, token).json["value"] == "two"


def test_delete_is_idempotent_and_a_key_can_be_written_again(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "k", "value": "first life", "pinned": True}, token)
    assert call("memory.delete", {"memory_key": "k"}, token).json["deleted"] == 1
    assert call("memory.delete", {"memory_key": "k"}, token).json["deleted"] == 0
    reply = call("memory.set", {"memory_key": "k", "value": "second life"}, token)
    assert reply.json["outcome"] == "created"
    assert call("memory.get", {"memory_key": "k"}, token).json["value"] == "second life"
