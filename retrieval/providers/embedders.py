"""Embedders: one protocol, chosen once per process from settings.

`embed` serves the query path, `embed_many` the write path. Vectors come
back as float32 rows, L2-normalised, so a dot product is a cosine.
"""

import re
from functools import cache
from typing import Protocol

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class Embedder(Protocol):
    provider: str
    model_name: str
    dim: int

    def embed(self, text: str) -> np.ndarray: ...

    def embed_many(self, texts: list[str]) -> np.ndarray: ...


class FakeEmbedder:
    """Hashed character trigrams, L2-normalised: deterministic, keyless, offline.

    Each trigram lands in one of `dim` buckets with a hashed sign, so unrelated
    texts score near 0 and shared wording scores high. It knows spelling, not
    meaning: recall on it is not evidence of quality.
    """

    provider = "fake"

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
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


_FAKE = re.compile(r"^fake-ngram-(\d+)$")


def build(model: str) -> Embedder:
    match = _FAKE.match(model)
    if match:
        dim = int(match.group(1))
        if not 8 <= dim <= 4096:
            raise ImproperlyConfigured(f"LOOM_EMBEDDING_MODEL={model!r}: the fake's width must be 8..4096")
        return FakeEmbedder(dim)
    raise ImproperlyConfigured(f"unknown embedding model {model!r} (LOOM_EMBEDDING_MODEL)")


@cache
def get_embedder() -> Embedder:
    """The process's one embedder."""
    return build(settings.LOOM_EMBEDDING_MODEL)
