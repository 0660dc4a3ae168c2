"""The Gemini embedder over its HTTP API, against a provider on 127.0.0.1."""

import pytest

from retrieval.providers import embedders, remote
from tests.model_server import Answer


@pytest.fixture
def gemini(model_server, settings):
    settings.LOOM_EMBEDDING_MODEL = "gemini-embedding-001"
    settings.LOOM_EMBEDDING_DIM = 64
    settings.GEMINI_API_KEY = "gm-test-key"
    settings.LOOM_GEMINI_BASE_URL = model_server.url.removesuffix("/v1")
    settings.LOOM_EMBEDDING_RETRY_MAX_WAIT_S = 0
    settings.LOOM_ADAPTIVE_THRESHOLDS = False
    embedders.get_embedder.cache_clear()
    yield embedders.get_embedder().inner
    embedders.get_embedder.cache_clear()


def test_rows_are_embedded_through_gemini_and_found(backend, gemini, model_server, agent):
    agent.set(
        {"memory_key": "editor", "value": "Dana prefers a dark theme in the editor"},
        {"memory_key": "lunch", "value": "The cafeteria serves soup on fridays"},
    )
    assert agent.hits("which theme does Dana prefer in the editor")[0] == "editor"
    sent = model_server.embedding_requests()[0]
    assert sent.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert sent.headers["x-goog-api-key"] == "gm-test-key"
    assert sent.body["requests"][0]["outputDimensionality"] == 64


def test_gemini_retries_and_guards(gemini, model_server):
    model_server.script(Answer(503), Answer(429))
    assert gemini.embed_many(["a", "b"]).shape == (2, 64)
    model_server.script(Answer(403))
    with pytest.raises(remote.ProviderError):
        gemini.embed_many(["a"])
    model_server.script(Answer(vector=[0.5] * 10))
    with pytest.raises(remote.MalformedEmbedding):
        gemini.embed_many(["a"])
    with pytest.raises(remote.InputTooLong):
        gemini.embed_many(["word " * 3000])


def test_a_slow_query_embedding_answers_503_embed_timeout(backend, gemini, model_server, agent, settings):
    settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_S = 0.2
    model_server.script(Answer(delay_s=1.0), Answer(delay_s=1.0))
    reply = agent.search("anything")
    assert (reply.status, reply.error) == (503, "EMBED_TIMEOUT")
    assert len(model_server.embedding_requests()) == 2  # one attempt and LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES (1)
