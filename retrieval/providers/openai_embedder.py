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
        """The query path: whitespace-normalised, bounded per attempt, then EmbedTimeout (503 EMBED_TIMEOUT)."""
        normalised = " ".join(text.split())
        bound = settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_S
        attempts = 1 + settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES
        try:
            return self._embed([normalised], timeout=bound, attempts=attempts)[0]
        except remote.ProviderError as exc:
            if isinstance(exc.__cause__, remote.Transient) and isinstance(
                exc.__cause__.__cause__, openai.APITimeoutError
            ):
                raise remote.EmbedTimeout(f"openai: no embedding within {attempts} x {bound} s") from exc
            raise

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
