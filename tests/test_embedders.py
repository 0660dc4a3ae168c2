"""Embedder selection and the local embedder, run for real and offline."""

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.providers import embedders


@pytest.fixture(scope="module")
def local():
    return embedders.LocalEmbedder.minilm()


def test_the_local_embedder_knows_meaning_offline(local):
    assert (local.model_name, local.dim, local.provider) == ("local:minilm", 384, "local")
    paraphrase = local.embed_many(["The user prefers a dark theme in the editor", "The user likes dark mode"])
    unrelated = local.embed_many(["The user prefers a dark theme in the editor", "Quarterly revenue grew ten percent"])
    assert np.allclose(np.linalg.norm(paraphrase, axis=1), 1, atol=1e-5)
    assert paraphrase[0] @ paraphrase[1] > 0.6 and unrelated[0] @ unrelated[1] < 0.2
    assert np.allclose(local.embed("The user likes dark mode"), paraphrase[1], atol=1e-5)


def test_a_model_file_that_is_not_the_pinned_one_is_refused(tmp_path, local, settings):
    for name in ("model.onnx", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((settings.VAR_DIR / "models" / "minilm" / name).read_bytes())
    (tmp_path / "model.onnx").write_bytes((tmp_path / "model.onnx").read_bytes() + b"tampered")
    with pytest.raises(ImproperlyConfigured, match="sha256"):
        embedders.LocalEmbedder("local:minilm", tmp_path, embedders.LocalEmbedder.MINILM_SHA256)


def test_loading_the_local_embedder_writes_nothing_outside_its_model_directory(local, tmp_path, monkeypatch, settings):
    monkeypatch.delenv("FASTEMBED_CACHE_PATH", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where fastembed would make its download cache
    directory = settings.VAR_DIR / "models" / "minilm"
    before = sorted(directory.iterdir())
    assert embedders.LocalEmbedder("local:minilm", directory, embedders.LocalEmbedder.MINILM_SHA256).dim == 384
    assert list(tmp_path.iterdir()) == [] and sorted(directory.iterdir()) == before


@pytest.mark.parametrize(
    "model,provider",
    [
        ("fake-ngram-64", "fake"),
        ("local", "local"),
        ("local:minilm", "local"),
        ("text-embedding-3-small", "openai"),
        ("gemini-embedding-001", "gemini"),
    ],
)
def test_the_provider_is_inferred_from_the_model_name(model, provider):
    assert embedders.provider_for(model) == provider


def test_an_explicit_provider_wins_and_an_unknown_model_raises(settings):
    with pytest.raises(ImproperlyConfigured, match="unknown embedding model"):
        embedders.provider_for("word2vec")
    settings.LOOM_EMBEDDING_PROVIDER = "local"
    assert embedders.provider_for("whatever") == "local"
    with pytest.raises(ImproperlyConfigured, match="ships local:minilm"):
        embedders.build("local:bge-base")
