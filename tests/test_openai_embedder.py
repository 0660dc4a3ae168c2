"""The OpenAI embedder through the real openai SDK, against a provider on 127.0.0.1."""

import numpy as np
import pytest

from retrieval.providers import remote
from tests.model_server import NAN, Answer


def test_rows_are_embedded_and_found_through_the_provider(backend, openai_embedder, model_server, agent):
    agent.set(
        {"memory_key": "editor", "value": "Dana prefers a dark theme in the editor"},
        {"memory_key": "lunch", "value": "The cafeteria serves soup on fridays"},
    )
    assert agent.hits("which theme does Dana prefer in the editor")[0] == "editor"
    sent = model_server.embedding_requests()
    assert sent[0].body["model"] == "text-embedding-3-small" and sent[0].body["dimensions"] == 64
    assert sent[0].headers["authorization"] == "Bearer sk-test-key"
    assert len(sent) == 2  # one request for the batch's values and keys, one for the query


def test_retryable_answers_are_retried_then_succeed(openai_embedder, model_server, settings):
    settings.LOOM_EMBEDDING_RETRY_ATTEMPTS = 4
    model_server.script(Answer(429), Answer(500), Answer(503))
    vectors = openai_embedder.embed_many(["the first", "the second"])
    assert vectors.shape == (2, 64) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert len(model_server.embedding_requests()) == 4


def test_attempts_are_capped(openai_embedder, model_server):
    model_server.script(*[Answer(503)] * 5)
    with pytest.raises(remote.ProviderError, match="gave up after 3 attempts"):
        openai_embedder.embed_many(["text"])
    assert len(model_server.embedding_requests()) == 3


def test_a_401_is_not_retried(openai_embedder, model_server):
    model_server.script(Answer(401))
    with pytest.raises(remote.ProviderError) as raised:
        openai_embedder.embed_many(["text"])
    assert raised.value.status == 401 and len(model_server.embedding_requests()) == 1


def test_a_provider_failure_on_write_is_a_503_and_stores_nothing(backend, openai_embedder, model_server, agent):
    model_server.script(Answer(401))
    reply = agent.call("memory.set", {"namespace": "default", "memory_key": "k", "value": "v"}, agent.token)
    assert (reply.status, reply.error) == (503, "EMBEDDER_UNAVAILABLE")
    assert "sk-test-key" not in str(reply.json)
    assert agent.call("memory.get", {"namespace": "default", "memory_key": "k"}, agent.token).status == 404


def test_a_slow_query_embedding_answers_503_embed_timeout(backend, openai_embedder, model_server, agent, settings):
    settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_S = 0.2
    model_server.script(Answer(delay_s=1.0), Answer(delay_s=1.0))
    reply = agent.search("anything")
    assert (reply.status, reply.error) == (503, "EMBED_TIMEOUT")
    assert len(model_server.embedding_requests()) == 2  # one attempt and LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES (1)


@pytest.mark.parametrize("vector,problem", [([], "empty"), ([0.1] * 12, "width 12"), ([NAN] * 64, "non-finite")])
def test_a_malformed_vector_raises(openai_embedder, model_server, vector, problem):
    model_server.script(Answer(vector=vector))
    with pytest.raises(remote.MalformedEmbedding, match=problem):
        openai_embedder.embed_many(["text"])


def test_an_oversize_input_is_refused_before_anything_is_sent(openai_embedder, model_server):
    with pytest.raises(remote.InputTooLong, match="input 1"):
        openai_embedder.embed_many(["short", "word " * 9000])
    assert model_server.embedding_requests() == []


def test_more_than_a_hundred_inputs_go_in_batches_of_a_hundred(openai_embedder, model_server):
    vectors = openai_embedder.embed_many([f"text {i}" for i in range(250)])
    assert vectors.shape == (250, 64)
    assert [len(seen.body["input"]) for seen in model_server.embedding_requests()] == [100, 100, 50]


def test_a_missing_key_falls_back_to_the_fake_and_health_says_so(settings, call, health):
    from retrieval.providers import embedders

    settings.LOOM_EMBEDDING_MODEL, settings.OPENAI_API_KEY = "text-embedding-3-small", ""
    embedders.get_embedder.cache_clear()
    try:
        assert embedders.get_embedder().provider == "fake"
        assert "embedder_key_missing" in health()["problems"]
    finally:
        embedders.get_embedder.cache_clear()


def test_health_names_a_failing_provider_until_it_answers_again(openai_embedder, model_server, call, health):
    model_server.script(*[Answer(503)] * 3)
    with pytest.raises(remote.ProviderError):
        openai_embedder.embed_many(["text"])
    assert "provider_failing:openai" in health()["problems"]
    openai_embedder.embed_many(["text"])
    assert not any(p.startswith("provider_failing") for p in health()["problems"])


def test_the_boot_probe_names_a_provider_that_answers_another_width(openai_embedder, model_server, call, health):
    from retrieval.providers import embedders

    model_server.script(Answer(vector=[0.5] * 32))  # a model that ignores `dimensions`
    embedders.probe_width()
    probe = model_server.embedding_requests()[-1]
    assert probe.body["input"] == ["width probe"] and probe.body["dimensions"] == openai_embedder.dim
    assert "embedding_dim_mismatch" in health()["problems"]
    embedders.probe_width()  # the provider answers the served width again (a fixed configuration, a restart)
    assert "embedding_dim_mismatch" not in health()["problems"]
