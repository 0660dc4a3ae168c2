"""POST /v1/memory.set on both ClickHouse backends."""

import pytest

from retrieval.ingest import write, write_gates
from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def rows(org, key, table="memories"):
    return clickhouse.query(
        f"SELECT * FROM {table} FINAL WHERE org = {{org:String}} AND memory_key = {{key:String}} ORDER BY version",
        {"org": org, "key": key},
    )


def test_set_then_get_returns_the_value_at_once(backend, alice, call):
    token = alice.token("writer")
    reply = call(
        "memory.set",
        {
            "namespace": "ops",
            "memory_key": "deploy.window",
            "value": "Deploys run Tuesdays 10:00 UTC",
            "tags": ["deploy"],
            "entities": ["prod"],
            "confidence": 0.8,
        },
        token,
    )
    assert reply.status == 201, reply.json
    assert reply.json["outcome"] == "created"
    assert reply.json["embedding_model"] == "fake-ngram-384"

    got = call("memory.get", {"namespace": "ops", "memory_key": "deploy.window"}, token)
    assert got.status == 200
    assert got.json["value"] == "Deploys run Tuesdays 10:00 UTC"
    assert got.json["tags"] == ["deploy"] and got.json["entities"] == ["prod"]
    assert got.json["confidence"] == 0.8
    assert got.json["status"] == "active" and got.json["version"] == reply.json["version"]


def test_a_new_value_supersedes_the_old_version(backend, alice, call):
    token = alice.token("writer")
    first = call("memory.set", {"memory_key": "k", "value": "old value"}, token)
    second = call("memory.set", {"memory_key": "k", "value": "new value"}, token)
    assert second.status == 200 and second.json["outcome"] == "updated"
    assert second.json["superseded_version"] == first.json["version"]

    got = call("memory.get", {"memory_key": "k", "history": True}, token)
    assert got.json["value"] == "new value"
    old = got.json["history"][1]
    assert (old["value"], old["status"], old["superseded_by"]) == ("old value", "superseded", second.json["version"])
    # The old version's vector leaves the searchable set with it.
    statuses = {(r["version"], r["status"]) for r in rows(alice.name, "k", "memory_embeddings")}
    assert statuses == {(first.json["version"], "superseded"), (second.json["version"], "active")}


def test_the_same_value_again_is_unchanged_and_adds_no_version(backend, alice, call):
    token = alice.token("writer")
    first = call("memory.set", {"memory_key": "k", "value": "same", "tags": ["a"]}, token)
    again = call("memory.set", {"memory_key": "k", "value": "same", "tags": ["a"]}, token)
    assert again.status == 200
    assert again.json["outcome"] == "unchanged" and again.json["version"] == first.json["version"]
    assert len(rows(alice.name, "k")) == 1


def test_one_row_per_writer_and_session(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "k", "value": "from bot a", "agent": "bot-a"}, token)
    call("memory.set", {"memory_key": "k", "value": "from bot b", "agent": "bot-b"}, token)
    call("memory.set", {"memory_key": "k", "value": "bot a, session 2", "agent": "bot-a", "session_id": "s2"}, token)
    active = [r for r in rows(alice.name, "k") if r["status"] == "active"]
    assert sorted((r["agent"], r["session_id"]) for r in active) == [("bot-a", ""), ("bot-a", "s2"), ("bot-b", "")]
    got = call("memory.get", {"memory_key": "k", "agent": "bot-b"}, token)
    assert got.json["value"] == "from bot b"
    assert call("memory.get", {"memory_key": "k"}, token).json["row_count"] == 3


def test_a_pinned_row_is_not_overwritten(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "k", "value": "pinned truth", "pinned": True}, token)
    refused = call("memory.set", {"memory_key": "k", "value": "an overwrite"}, token)
    assert refused.status == 409
    assert refused.error == "MEMORY_PINNED" and refused.json["error"]["field"] == "memory_key"
    assert call("memory.get", {"memory_key": "k"}, token).json["value"] == "pinned truth"

    forced = call("memory.set", {"memory_key": "k", "value": "an overwrite", "overwrite_pinned": True}, token)
    assert forced.status == 200 and forced.json["outcome"] == "updated"


def test_a_batch_is_all_or_nothing(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "locked", "value": "keep", "pinned": True}, token)
    reply = call(
        "memory.set",
        {"items": [{"memory_key": "fresh", "value": "new row"}, {"memory_key": "locked", "value": "try to overwrite"}]},
        token,
    )
    assert reply.status == 409 and reply.json["error"]["field"] == "items[1].memory_key"
    assert call("memory.get", {"memory_key": "fresh"}, token).status == 404
    assert rows(alice.name, "fresh", "memory_embeddings") == []


@pytest.mark.parametrize("backend", ["embedded", "server"], indirect=True)
def test_a_batch_whose_chunks_fail_to_store_is_refused_and_nothing_of_it_is_served(backend, alice, call, settings):
    """A side table's insert failing fails the batch before its `memories` rows, the commit point, are written: the
    row is neither read nor searched (what vectors it left are no live row's), and the mirror never holds it."""
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS = 200
    token = alice.token("writer")
    call("memory.set", {"memory_key": "seed", "value": "the quarterly migration plan is on track"}, token)
    long = " ".join(f"sentence {i} about the quarterly migration plan." for i in range(30))
    clickhouse.command("RENAME TABLE memory_chunks TO memory_chunks_away")
    try:
        reply = call("memory.set", {"items": [{"memory_key": "doc", "value": long}]}, token)
    finally:
        clickhouse.command("RENAME TABLE memory_chunks_away TO memory_chunks")
    assert (reply.status, reply.error) == (500, "INTERNAL_ERROR")
    assert call("memory.get", {"memory_key": "doc"}, token).status == 404
    for mirrored in (True, False):  # the mirror's answer, and ClickHouse's
        settings.LOOM_VECTOR_MIRROR = mirrored
        hits = call("memory.search", {"query": "quarterly migration plan", "min_similarity": 0}, token).json["hits"]
        assert [hit["memory_key"] for hit in hits] == ["seed"], mirrored
    # The table back, the same write stores its chunks: nothing of the failure is remembered.
    again = call("memory.set", {"memory_key": "doc", "value": long}, token)
    assert again.status == 201 and again.json["chunks"] > 1, again.json


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_a_batch_whose_gates_fail_is_refused_though_its_terms_were_stored_beside_them(
    backend, alice, call, settings, monkeypatch
):
    """The new versions' terms are stored while the gates judge: a judgement that fails leaves them, but no row
    (`memories` is written last), so neither search reads the value; the gates' error is the one raised."""
    token = alice.token("writer")
    call("memory.set", {"memory_key": "seed", "value": "the quarterly migration plan is on track"}, token)

    def broken(scope, plans):
        raise RuntimeError("the gates failed")

    monkeypatch.setattr(write_gates, "judge", broken)
    with pytest.raises(RuntimeError, match="the gates failed"):
        write.set_memories(
            Scope(org=alice.name, namespace="default", role=Role.WRITER, subject="test"),
            [write.MemoryInput(memory_key="doc", value="the zeppelin migration plan is late")],
        )
    assert {row["field"] for row in rows(alice.name, "doc", "memory_terms")} == {"key", "value"}
    assert call("memory.get", {"memory_key": "doc"}, token).status == 404
    for mirrored in (True, False):
        settings.LOOM_VECTOR_MIRROR = mirrored
        hits = call("memory.search", {"query": "zeppelin migration plan", "min_similarity": 0}, token).json["hits"]
        assert [hit["memory_key"] for hit in hits] == ["seed"], mirrored


def test_a_batch_stores_every_item(backend, alice, call):
    token = alice.token("writer")
    items = [{"memory_key": f"item.{i}", "value": f"value number {i}"} for i in range(50)]
    reply = call("memory.set", {"items": items}, token)
    assert reply.status == 201 and reply.json["count"] == 50
    found = call("memory.bulk_get", {"memory_keys": [f"item.{i}" for i in range(50)]}, token)
    assert [m["value"] for m in found.json["memories"]] == [f"value number {i}" for i in range(50)]


def test_a_batch_naming_a_memory_twice_stores_the_later_item_once(backend, alice, call):
    token = alice.token("writer")
    items = [
        {"memory_key": "plan", "value": "the offsite is in Lisbon"},
        {"memory_key": "menu", "value": "the cafeteria menu changes on mondays"},
        {"memory_key": "plan", "value": "the offsite moved to Porto"},
        {"memory_key": "plan", "value": "the offsite is in Lisbon", "session_id": "s-1"},  # another row: kept
    ]
    reply = call("memory.set", {"items": items}, token)
    assert reply.status == 201, reply.json
    assert [(i["memory_key"], i["session_id"]) for i in reply.json["items"]] == [
        ("plan", ""),
        ("menu", ""),
        ("plan", "s-1"),
    ]
    got = call("memory.get", {"memory_key": "plan", "session_id": ""}, token).json
    assert got["value"] == "the offsite moved to Porto"
    got = call("memory.get", {"memory_key": "plan", "history": True}, token).json  # every session's versions
    assert sorted((h["session_id"], h["value"]) for h in got["history"]) == [  # Lisbon never stored unsessioned
        ("", "the offsite moved to Porto"),
        ("s-1", "the offsite is in Lisbon"),
    ]


def test_a_long_value_is_chunked_and_only_its_head_is_embedded_on_the_row(backend, alice, call, settings):
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS = 200
    settings.LOOM_MEMORY_CHUNK_CHARS = 120
    token = alice.token("writer")
    value = " ".join(f"sentence {i} about the quarterly migration plan." for i in range(30))
    reply = call("memory.set", {"memory_key": "doc", "value": value}, token)
    assert reply.json["chunks"] > 5
    chunks = rows(alice.name, "doc", "memory_chunks")
    assert len(chunks) == reply.json["chunks"]
    assert all(c["embedding_model"] == "fake-ngram-384" and len(c["vector"]) == 384 for c in chunks)
    assert chunks[-1]["text"].endswith("migration plan.")  # the tail is reachable through a chunk
    assert value[chunks[3]["start_char"] :].startswith(chunks[3]["text"])
    import numpy as np

    from retrieval.providers.embedders import get_embedder

    stored = np.array(rows(alice.name, "doc", "memory_embeddings")[0]["value_vector"])
    assert np.allclose(stored, get_embedder().inner.embed(value[:200]), atol=1e-6)


def test_value_and_key_are_embedded_with_the_model_name(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "user.timezone", "value": "Europe/Berlin"}, token)
    [row] = rows(alice.name, "user.timezone", "memory_embeddings")
    import numpy as np

    from retrieval.providers.embedders import get_embedder

    embedder = get_embedder().inner  # the model itself, outside any org
    assert row["embedding_model"] == embedder.model_name and row["embedding_dim"] == 384
    assert np.allclose(row["value_vector"], embedder.embed("Europe/Berlin"), atol=1e-6)
    assert np.allclose(row["key_vector"], embedder.embed("user.timezone"), atol=1e-6)


def document_frequencies(org):
    """Active documents per value term: what BM25 counts from the postings."""
    return dict(
        clickhouse.query_rows(
            "SELECT term, countIf(status = 'active') FROM memory_terms FINAL"
            " WHERE org = {org:String} AND field = 'value' GROUP BY term",
            {"org": org},
        )
    )


def test_stemmed_terms_and_bm25_statistics_are_stored(backend, alice, call):
    token = alice.token("writer")
    call("memory.set", {"memory_key": "runningShoes", "value": "She was running in new shoes; running daily"}, token)
    call("memory.set", {"memory_key": "other", "value": "Shoes are red"}, token)
    terms = {(r["field"], r["term"]): r["tf"] for r in rows(alice.name, "runningShoes", "memory_terms")}
    assert terms[("value", "run")] == 2 and terms[("value", "shoe")] == 1
    assert terms[("key", "run")] == 1 and terms[("key", "shoe")] == 1
    assert document_frequencies(alice.name)["shoe"] == 2 and document_frequencies(alice.name)["run"] == 1
    docs = clickhouse.query_rows(
        "SELECT sum(docs), sum(total_len) FROM corpus_stats WHERE org = {org:String} AND field = 'value'",
        {"org": alice.name},
    )
    assert docs == [(2, 8 + 3)]
    assert document_frequencies(alice.name)["red"] == 1
    # Superseding a row takes its terms out of the statistics.
    call("memory.set", {"memory_key": "other", "value": "Hats are blue"}, token)
    df = document_frequencies(alice.name)
    assert df["shoe"] == 1 and df["hat"] == 1 and df["red"] == 0


def test_high_sensitivity_is_stored_but_never_embedded_nor_chunked(backend, alice, call, settings):
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS = 100
    token = alice.token("writer")
    value = "The staging database password: hunter2-Xy9! " + "padding text " * 20
    reply = call("memory.set", {"memory_key": "db.creds", "value": value}, token)
    assert reply.json["sensitivity"] == "high" and reply.json["sensitivity_reason"] == "credential"
    assert reply.json["embedding_model"] == "" and reply.json["chunks"] == 0
    for table in ("memory_embeddings", "memory_chunks", "memory_terms"):
        assert rows(alice.name, "db.creds", table) == []
    got = call("memory.get", {"memory_key": "db.creds"}, token)
    assert got.json["value"] == value and got.json["sensitivity"] == "high"

    declared = call("memory.set", {"memory_key": "note", "value": "plain words", "sensitivity": "high"}, token)
    assert declared.json["embedding_model"] == "" and rows(alice.name, "note", "memory_embeddings") == []


def test_every_optional_field_round_trips(backend, alice, call):
    token = alice.token("writer")
    body = {
        "memory_key": "trip",
        "value": "Flight to Lisbon",
        "memory_type": "event",
        "tags": ["travel", "q3"],
        "category": "plans",
        "entities": ["Lisbon"],
        "confidence": 0.25,
        "source_class": "observed",
        "valid_at": "2026-07-01T08:00:00Z",
        "user_id": "u-1",
        "session_id": "s-9",
        "run_id": "r-3",
        "sensitivity": "medium",
        "pinned": True,
        "agent": "planner",
    }
    call("memory.set", body, token)
    got = call("memory.get", {"memory_key": "trip"}, token).json
    for field in (
        "memory_type",
        "tags",
        "category",
        "entities",
        "confidence",
        "source_class",
        "user_id",
        "session_id",
        "run_id",
        "sensitivity",
        "pinned",
        "agent",
    ):
        assert got[field] == body[field], field
    assert got["valid_at"] == "2026-07-01T08:00:00Z"


def test_entities_and_triples_feed_the_graph_tables_and_leave_with_the_row(backend, alice, call):
    token = alice.token("writer")
    body = {
        "memory_key": "acme.ceo",
        "value": "Dana Reyes runs Acme",
        "entities": ["Acme", "Dana Reyes"],
        "triples": [{"subject": "Dana Reyes", "relation": "is CEO of", "object": "Acme"}],
    }
    first = call("memory.set", body, token)
    assert call("memory.get", {"memory_key": "acme.ceo"}, token).json["triples"] == body["triples"]
    mentions = {r["entity"] for r in rows(alice.name, "acme.ceo", "entity_mentions")}
    assert mentions == {"acme", "dana reyes"}
    edges = {(r["src"], r["dst"], r["relation"]) for r in rows(alice.name, "acme.ceo", "entity_edges")}
    assert ("dana reyes", "acme", "is CEO of") in edges and ("acme", "dana reyes", "co_mention") in edges
    [triple] = rows(alice.name, "acme.ceo", "entity_triples")
    assert (triple["subject"], triple["object"], triple["relation_terms"]) == (
        "dana reyes",
        "acme",
        ["is", "ceo", "of"],
    )

    call("memory.set", {**body, "value": "Dana Reyes ran Acme until 2025", "triples": []}, token)
    live = [r for r in rows(alice.name, "acme.ceo", "entity_triples") if r["status"] == "active"]
    assert live == []
    old = [r for r in rows(alice.name, "acme.ceo", "entity_edges") if r["version"] == first.json["version"]]
    assert {r["status"] for r in old} == {"superseded"}


def test_a_malformed_triple_names_its_part(backend, alice, call):
    token = alice.token("writer")
    missing = call(
        "memory.set", {"memory_key": "k", "value": "v", "triples": [{"subject": "a", "relation": "b"}]}, token
    )
    assert (missing.status, missing.error, missing.json["error"]["field"]) == (
        422,
        "MISSING_FIELD",
        "triples[0].object",
    )
    wrong = call(
        "memory.set",
        {"memory_key": "k", "value": "v", "triples": [{"subject": "a", "relation": "b", "object": 1}]},
        token,
    )
    assert (wrong.error, wrong.json["error"]["field"]) == ("INVALID_TYPE", "triples[0].object")
