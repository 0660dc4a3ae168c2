"""OpenAI embeddings through the official SDK (OPENAI_BASE_URL honoured).

The SDK's own retries are off: the shared policy in `remote.py` decides which
answers are worth another attempt, so every network embedder behaves alike.
"""

import numpy as np
import openai
from django.conf import settings

from retrieval import costs
from retrieval.providers import customer, remote

TOKEN_LIMIT = 8191


class OpenAIEmbedder:
    provider = "openai"

    def __init__(self, model: str, api_key: str, dim: int):
        self.model_name, self.dim = model, dim
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=settings.OPENAI_BASE_URL or None,
            max_retries=0,
            timeout=openai.Timeout(settings.LOOM_HTTP_CLIENT_TIMEOUT_S, connect=settings.LOOM_HTTP_CLIENT_CONNECT_TIMEOUT_S),
            http_client=customer.gateway_http_client(),
        )

    def embed(self, text: str) -> np.ndarray:
        """The query path: whitespace-normalised, bounded per attempt, then EmbedTimeout (503 EMBED_TIMEOUT)."""
        normalised = " ".join(text.split())
        bound = settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_S
        attempts = 1 + settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES
        try:
            return self._embed([normalised], timeout=bound, attempts=attempts)[0]
        except remote.ProviderError as exc:
            if isinstance(exc.__cause__, remote.Transient) and isinstance(exc.__cause__.__cause__, openai.APITimeoutError):
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
                    model=self.model_name, input=texts, dimensions=self.dim, encoding_format="float",
                    **({"timeout": timeout} if timeout else {}),
                )  # fmt: skip
            except openai.APIStatusError as exc:
                if exc.status_code in remote.RETRY_STATUSES:
                    raise remote.Transient(exc.status_code, f"HTTP {exc.status_code}") from exc
                raise remote.ProviderError(self.provider, f"HTTP {exc.status_code}: {exc.message}", exc.status_code)
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                if isinstance(exc.__cause__, customer.ModelCallRefused):  # the gateway refused this identity
                    raise exc.__cause__ from None
                raise remote.Transient(None, type(exc).__name__) from exc
            costs.add_embedding(self.model_name, answer.usage.prompt_tokens if answer.usage else 0)
            ordered = sorted(answer.data, key=lambda item: item.index)
            return remote.guard_output(self.provider, [item.embedding for item in ordered], len(texts), self.dim)

        return remote.with_retries(self.provider, send, attempts)
