"""reembed: after the embedding model changes, old rows become searchable again, resumable, old vectors dropped."""

import pytest
from django.core.management import CommandError, call_command

from retrieval.providers import embedders
from retrieval.store import clickhouse, cluster

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


@pytest.fixture
def switch_model(settings):
    def switch(model: str):
        settings.LOOM_EMBEDDING_MODEL = model
        embedders.get_embedder.cache_clear()

    yield switch
    embedders.get_embedder.cache_clear()


def models_of(org: str) -> dict[str, int]:
    rows = clickhouse.query_rows(
        "SELECT embedding_model, count() FROM memory_embeddings WHERE org = {org:String} GROUP BY embedding_model",
        {"org": org},
    )
    return dict(rows)


def test_rows_of_the_old_model_are_reembedded_and_found_again(backend, agent, switch_model, capsys, settings):
    from tenancy.models import ApiToken

    org = ApiToken.verify(agent.token).org.name
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS = 200
    settings.LOOM_MEMORY_CHUNK_CHARS = 150
    filler = " ".join(f"routine paragraph {i} about office plants." for i in range(12))
    agent.set(
        {"memory_key": "deploy", "value": "production deploys run on tuesdays"},
        {"memory_key": "soup", "value": "the cafeteria serves soup on fridays"},
        {"memory_key": "runbook", "value": filler + " To roll back run kubectl rollout undo."},
    )
    switch_model("fake-ngram-256")
    assert agent.hits("when do production deploys run") == []  # the old vectors are another model's

    call_command("reembed", "--dry-run", "--org", org)
    assert "3 rows to re-embed with fake-ngram-256" in capsys.readouterr().out
    call_command("reembed", "--org", org, "--batch-size", "2")
    out = capsys.readouterr().out
    assert out.count("resume: ") == 2 and "re-embedded 3 rows" in out
    assert agent.hits("when do production deploys run")[0] == "deploy"
    hit = agent.search("roll back kubectl rollout undo").json["hits"][0]
    assert (hit["memory_key"], hit["source"]) == ("runbook", "chunk")  # chunks re-embedded too

    assert models_of(org) == {"fake-ngram-384": 3, "fake-ngram-256": 3}  # old and new coexist until --delete-old
    call_command("reembed", "--delete-old", "--org", org)
    assert models_of(org) == {"fake-ngram-256": 3}


def test_resume_continues_after_the_named_batch(backend, agent, switch_model, capsys):
    from tenancy.models import ApiToken

    org = ApiToken.verify(agent.token).org.name
    agent.set(*[{"memory_key": f"k{i}", "value": f"note number {i}"} for i in range(5)])
    switch_model("fake-ngram-256")
    call_command("reembed", "--org", org, "--batch-size", "2")
    first = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("resume:")][0]
    cluster.run(
        "ALTER TABLE memory_embeddings DELETE WHERE org = {org:String} AND embedding_model = 'fake-ngram-256' "
        "AND memory_key NOT IN ('k0', 'k1') SETTINGS mutations_sync = 1",
        {"org": org},
    )
    call_command("reembed", "--org", org, "--resume", first)
    assert "re-embedded 3 rows" in capsys.readouterr().out  # k2..k4: the first batch (k0, k1) is not redone


def test_delete_old_is_refused_while_rows_lack_a_served_vector(backend, agent, switch_model):
    agent.set({"memory_key": "k", "value": "v"})
    switch_model("fake-ngram-256")
    with pytest.raises(CommandError, match="run reembed first"):
        call_command("reembed", "--delete-old")


@pytest.mark.parametrize("mirror", [False, True])
def test_key_only_redoes_the_key_vectors_and_keeps_the_values(backend, agent, capsys, settings, mirror):
    from tenancy.models import ApiToken
    from tests.test_vector_mirror import wait_for_mirror

    settings.LOOM_VECTOR_MIRROR = False  # the vectors as ClickHouse holds them
    settings.LOOM_MEMORY_SEARCH_KEY_AXIS = "on"
    org = ApiToken.verify(agent.token).org.name
    agent.set({"memory_key": "user.preferredEditor", "value": "vim, with a dark theme"})

    def similarity():  # the query matches the key, hardly the value
        return agent.search("preferred editor", explain=True, min_similarity=0).json["hits"][0]["score_components"][
            "similarity"
        ]

    by_key = similarity()
    cluster.run(  # key vectors as an older way of embedding keys left them
        "ALTER TABLE memory_embeddings UPDATE key_vector = arrayMap(x -> toFloat32(0), key_vector) "
        "WHERE org = {org:String} SETTINGS mutations_sync = 1",
        {"org": org},
    )
    if mirror:  # searches now read a mirror loaded with the old key vectors, which the run must replace
        settings.LOOM_VECTOR_MIRROR = True
        wait_for_mirror(agent)
    assert similarity() < by_key - 0.3
    call_command("reembed", "--key-only", "--dry-run", "--org", org)
    assert "1 rows to re-embed with fake-ngram-384 (keys only)" in capsys.readouterr().out
    value_before = clickhouse.query_rows(
        "SELECT value_vector FROM memory_embeddings FINAL WHERE org = {org:String}", {"org": org}
    )
    call_command("reembed", "--key-only", "--org", org)
    assert "re-embedded 1 rows" in capsys.readouterr().out
    assert similarity() == by_key
    assert (
        clickhouse.query_rows("SELECT value_vector FROM memory_embeddings FINAL WHERE org = {org:String}", {"org": org})
        == value_before
    )


def test_key_only_and_delete_old_are_refused_together(db):
    with pytest.raises(CommandError, match="run them apart"):
        call_command("reembed", "--key-only", "--delete-old")


def test_session_and_entity_summaries_are_reembedded_with_the_rows(backend, ranker, switch_model, capsys):
    from tenancy.models import ApiToken

    org = ApiToken.verify(ranker.token).org.name
    ranker.set({"memory_key": "staff.jonas", "value": "Jonas Berg works at BER", "entities": ["Office:BER"]})
    body = {"items": [{"entity": "Office:BER", "summary": "the Berlin office, where the company works in Berlin"}]}
    ranker.call("entity_summary.set", body, ranker.token)
    ranker.call(
        "session_summary.set", {"items": [{"session_id": "s-1", "summary": "The Berlin office move"}]}, ranker.token
    )
    switch_model("fake-ngram-256")
    assert "office:ber" not in ranker.search("Who works at the Berlin office?").json["query_entities"]
    call_command("reembed", "--org", org)
    assert "re-embedded 2 session and entity summaries with fake-ngram-256" in capsys.readouterr().out
    assert "office:ber" in ranker.search("Who works at the Berlin office?").json["query_entities"]
    digest = ranker.search("what did we discuss about the Berlin office move").json["hits"]
    assert "summary:s-1" in [hit["memory_key"] for hit in digest]
