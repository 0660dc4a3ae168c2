"""A multi-sentence value's vector is the mean of its sentences' (with the local embedder), on every write path."""

import numpy as np
import pytest

from retrieval.language import sentences
from retrieval.providers import customer
from retrieval.store import clickhouse

TURN = (
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful. "
    "Wow! My cat also learned to open the fridge door last week."
)


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            TURN,
            [
                "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
                "Caroline: My cat also learned to open the fridge door last week.",
            ],
        ),
        ("Deploys are frozen on Fridays after noon.", ["Deploys are frozen on Fridays after noon."]),
        (
            "See http://wiki/deploys for the rules. Ask the release manager first.",
            ["See http://wiki/deploys for the rules.", "Ask the release manager first."],
        ),
        ("Thanks! Great!", ["Thanks! Great!"]),  # no sentence of three words: the text itself
        (
            "Backups run nightly at two\nRestores are tested every month",
            ["Backups run nightly at two", "Restores are tested every month"],
        ),
    ],
)
def test_a_value_is_cut_into_its_sentences_each_keeping_the_speaker(text, expected):
    assert sentences.pieces(text) == expected


def test_at_most_eight_sentences_make_one_vector():
    assert len(sentences.pieces(" ".join(f"Sentence number {i} is here." for i in range(20)))) == 8


def stored_vector(org: str, key: str) -> np.ndarray:
    rows = clickhouse.query_rows(
        "SELECT value_vector FROM memory_embeddings FINAL WHERE org = {org:String} AND memory_key = {key:String} "
        "AND embedding_dim > 0",
        {"org": org, "key": key},
    )
    return np.asarray(rows[0][0], dtype=np.float32)


def test_the_local_embedder_stores_the_mean_of_the_sentences(local_embedder, alice, agent, call):
    agent.set({"memory_key": "turn", "value": TURN, "memory_type": "turn"})
    with customer.for_org(alice.name):
        whole = local_embedder.embed_many([TURN])[0]
        pooled = sentences.pooled(local_embedder.embed_many(sentences.pieces(TURN)))
    stored = stored_vector(alice.name, "turn")
    assert np.allclose(stored, pooled, atol=1e-5) and not np.allclose(stored, whole, atol=1e-2)
    # what the turn says second is found as well as what it says first
    cat = agent.search("what did Caroline's cat learn to do?", explain=True).json["hits"][0]
    assert cat["memory_key"] == "turn" and cat["similarity"] > 0.5


def test_embed_pending_pools_as_the_write_path_does(local_embedder, alice, agent, call):
    from retrieval.ingest.embed_pending import run_once

    call("org.set_model_calls", {"enabled": False, "reason": "test"}, agent.token)
    agent.set({"memory_key": "turn", "value": TURN, "memory_type": "turn"})
    call("org.set_model_calls", {"enabled": True, "reason": "test"}, agent.token)
    run_once(org=alice.name)
    with customer.for_org(alice.name):
        pooled = sentences.pooled(local_embedder.embed_many(sentences.pieces(TURN)))
    assert np.allclose(stored_vector(alice.name, "turn"), pooled, atol=1e-5)


def test_the_fake_embedder_embeds_a_value_whole(backend, alice, agent):
    from retrieval.providers.embedders import get_embedder

    agent.set({"memory_key": "turn", "value": TURN, "memory_type": "turn"})
    with customer.for_org(alice.name):
        whole = get_embedder().embed_many([TURN])[0]
    assert np.allclose(stored_vector(alice.name, "turn"), whole, atol=1e-5)
