"""Gemini embeddings over its HTTP API (batchEmbedContents), with the shared retry policy and guards."""

import numpy as np
from django.conf import settings

from retrieval.providers import costs, customer, remote

TOKEN_LIMIT = 2048


class GeminiEmbedder:
    provider = "gemini"
    pools_sentences = False  # reads long text whole; pooling not measured for it

    def __init__(self, model: str, api_key: str, dim: int):
        self.model_name, self.dim, self._key = model, dim, api_key
        self._client = customer.gateway_http_client()
        self._url = f"{settings.LOOM_GEMINI_BASE_URL.rstrip('/')}/v1beta/models/{model}:batchEmbedContents"

    def embed(self, text: str) -> np.ndarray:
        """The query path (remote.bounded_query): bounded per attempt, then EmbedTimeout (503 EMBED_TIMEOUT)."""
        import httpx2

        return remote.bounded_query("gemini", self._embed, text, httpx2.TimeoutException)

    def embed_many(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([self._embed(texts[at : at + remote.BATCH]) for at in range(0, len(texts), remote.BATCH)])

    def _embed(self, texts: list[str], timeout: float | None = None, attempts: int | None = None) -> np.ndarray:
        import httpx2

        remote.guard_input(self.provider, texts, TOKEN_LIMIT)
        body = {
            "requests": [
                {
                    "model": f"models/{self.model_name}",
                    "content": {"parts": [{"text": text}]},
                    "outputDimensionality": self.dim,
                }
                for text in texts
            ]
        }

        def send():
            try:
                answer = self._client.post(
                    self._url,
                    json=body,
                    headers={"x-goog-api-key": self._key},
                    timeout=timeout or settings.LOOM_HTTP_CLIENT_TIMEOUT_S,
                )
            except httpx2.TransportError as exc:
                raise remote.Transient(None, type(exc).__name__) from exc
            if answer.status_code in remote.RETRY_STATUSES:
                raise remote.Transient(answer.status_code, f"HTTP {answer.status_code}")
            if answer.status_code != 200:
                raise remote.ProviderError(self.provider, f"HTTP {answer.status_code}", answer.status_code)
            vectors = [item.get("values", []) for item in answer.json().get("embeddings", [])]
            costs.add_embedding(self.model_name, sum(remote.estimated_tokens(text) for text in texts))
            return remote.guard_output(self.provider, vectors, len(texts), self.dim)

        return remote.with_retries(self.provider, send, attempts)
