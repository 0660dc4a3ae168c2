"""OpenAI embeddings through the official SDK (openai_client.py)."""

import numpy as np
import openai
from django.conf import settings

from retrieval.providers import costs, openai_client, remote

TOKEN_LIMIT = 8191


class OpenAIEmbedder:
    provider = "openai"
    pools_sentences = False  # reads long text whole; pooling not measured for it

    def __init__(self, model: str, api_key: str, dim: int):
        self.model_name, self.dim = model, dim
        self._client = openai_client.client(
            api_key,
            openai.Timeout(settings.LOOM_HTTP_CLIENT_TIMEOUT_S, connect=settings.LOOM_HTTP_CLIENT_CONNECT_TIMEOUT_S),
        )

    def embed(self, text: str) -> np.ndarray:
        """The query path (remote.bounded_query): bounded per attempt, then EmbedTimeout (503 EMBED_TIMEOUT)."""
        return remote.bounded_query("openai", self._embed, text, openai.APITimeoutError)

    def embed_many(self, texts: list[str]) -> np.ndarray:
        """The write path: raw text, in batches of 100."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._embed(texts[at : at + remote.BATCH]) for at in range(0, len(texts), remote.BATCH)]
        return np.concatenate(parts)

    def _embed(self, texts: list[str], timeout: float | None = None, attempts: int | None = None) -> np.ndarray:
        remote.guard_input(self.provider, texts, TOKEN_LIMIT)

        def send():
            try:
                answer = self._client.embeddings.create(
                    model=self.model_name,
                    input=texts,
                    dimensions=self.dim,
                    encoding_format="float",
                    **({"timeout": timeout} if timeout else {}),
                )
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                raise remote.sdk_failure(self.provider, exc, remote.RETRY_STATUSES)  # noqa: B904 (caused by exc)
            costs.add_embedding(self.model_name, answer.usage.prompt_tokens if answer.usage else 0)
            ordered = sorted(answer.data, key=lambda item: item.index)
            return remote.guard_output(self.provider, [item.embedding for item in ordered], len(texts), self.dim)

        return remote.with_retries(self.provider, send, attempts)
