"""What every network embedder shares: retries, the input and output guards, the query path's bound.

The spec's table: retry transport errors and 408, 409, 425, 429, 500, 502,
503, 504 up to LOOM_EMBEDDING_RETRY_ATTEMPTS, backing off 0.5 s x 2^n (capped
at LOOM_EMBEDDING_RETRY_MAX_WAIT_S); never retry another status (a 401 will
not heal); count tokens before sending and refuse an oversize input rather
than let the provider truncate it; refuse a vector that is empty, of the wrong
width, or not finite.
"""

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from django.conf import settings

from retrieval import metrics
from retrieval.providers import customer

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.5
BATCH = 100  # inputs per request, OpenAI's and Gemini's limit


class ProviderError(Exception):
    """A provider answered with an error that retrying did not (or cannot) fix."""

    def __init__(self, provider: str, message: str, status: int | None = None):
        super().__init__(f"{provider}: {message}")
        self.provider, self.status = provider, status


class MalformedEmbedding(ProviderError):
    """The provider's vector is empty, of the wrong width, or holds a non-finite value."""


class WidthMismatch(MalformedEmbedding):
    """The provider answered vectors of another width than the served one (LOOM_EMBEDDING_DIM)."""

    def __init__(self, provider: str, message: str, got: int):
        super().__init__(provider, message)
        self.got = got


class InputTooLong(ValueError):
    """An input over the provider's token limit: refused, never truncated."""


class EmbedTimeout(Exception):
    """The query path's bound ran out (503 EMBED_TIMEOUT)."""


class Transient(Exception):
    """A failure worth another attempt: a transport error or a retryable status."""

    def __init__(self, status: int | None, message: str):
        super().__init__(message)
        self.status = status


def sdk_failure(provider: str, exc: Exception, retry_statuses) -> Exception:
    """What a failed call of a provider SDK (openai, anthropic: the same error shapes) is to the retry policy:
    Transient, a ProviderError (each caused by `exc`), or the gateway's refusal itself. Raise it as it is."""
    if isinstance(exc.__cause__, customer.ModelCallRefused):  # the gateway refused this identity (a response hook)
        return exc.__cause__
    status = getattr(exc, "status_code", None)  # None: a transport error or a timeout
    if status is None:
        found = Transient(None, type(exc).__name__)
    elif status in retry_statuses:
        found = Transient(status, f"HTTP {status}")
    else:
        found = ProviderError(provider, f"HTTP {status}: {getattr(exc, 'message', exc)}", status)
    found.__cause__ = exc
    return found


# Each provider's last outcome, for /v1/health: a provider whose last call failed is `provider_failing:<name>`.
_failing: dict[str, str] = {}


def failing() -> list[str]:
    return sorted(_failing)


def with_retries(provider: str, send, attempts: int | None = None, max_wait_s: float | None = None):
    """Call `send()` until it returns, retrying a Transient with exponential backoff; the outcome goes to health."""
    try:
        result = _attempts(provider, send, attempts, max_wait_s)
    except ProviderError as exc:
        _failing[provider] = str(exc)
        metrics.provider_calls.labels(provider, "failed").inc()
        raise
    _failing.pop(provider, None)
    metrics.provider_calls.labels(provider, "ok").inc()
    return result


# A gateway that asks an identity to wait this long or less is waited out once, then asked again.
SHORT_WAIT_S = 2.0


def _attempts(provider: str, send, attempts: int | None, max_wait_s: float | None):
    try:
        return _retrying(provider, send, attempts, max_wait_s)
    except customer.GatewayDeferred as exc:
        if exc.retry_after > SHORT_WAIT_S:
            raise
        time.sleep(exc.retry_after)
        return _retrying(provider, send, attempts, max_wait_s)


def _retrying(provider: str, send, attempts: int | None, max_wait_s: float | None):
    attempts = attempts or settings.LOOM_EMBEDDING_RETRY_ATTEMPTS
    max_wait_s = settings.LOOM_EMBEDDING_RETRY_MAX_WAIT_S if max_wait_s is None else max_wait_s
    for attempt in range(attempts):
        try:
            return send()
        except Transient as exc:
            if attempt + 1 == attempts:
                raise ProviderError(provider, f"gave up after {attempts} attempts: {exc}", exc.status) from exc
            wait = min(BACKOFF_BASE_S * 2**attempt, max_wait_s)
            log.warning("%s embedding attempt %d failed (%s); retrying in %.1f s", provider, attempt + 1, exc, wait)
            time.sleep(wait)
    raise AssertionError("unreachable")


_last_chance: ContextVar[float | None] = ContextVar("loom_embed_last_chance", default=None)


@contextmanager
def last_chance(seconds: float):
    """Query embeds made inside get one attempt of `seconds` (a search's try after another embed timed out)."""
    token = _last_chance.set(seconds)
    try:
        yield
    finally:
        _last_chance.reset(token)


def bounded_query(provider: str, embed, text: str, timed_out: type[BaseException]) -> np.ndarray:
    """A query's embedding, the way every remote embedder makes it: whitespace-normalised, each attempt bounded by
    LOOM_MEMORY_SEARCH_EMBED_BOUND_S, 1 + LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES attempts (one attempt of the
    `last_chance` bound inside one); all of them timing out (`timed_out`: the SDK's timeout error) is EmbedTimeout
    (503 EMBED_TIMEOUT). `embed(texts, timeout, attempts)`."""
    bound = settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_S
    attempts = 1 + settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES
    if (chance := _last_chance.get()) is not None:
        bound, attempts = chance, 1
    try:
        return embed([" ".join(text.split())], bound, attempts)[0]
    except ProviderError as exc:
        if isinstance(exc.__cause__, Transient) and isinstance(exc.__cause__.__cause__, timed_out):
            raise EmbedTimeout(f"{provider}: no embedding within {attempts} x {bound} s") from exc
        raise


def estimated_tokens(text: str) -> int:
    """An upper estimate of a BPE token count, offline (no tokenizer download).

    Every token covers at least one byte, and English BPE averages ~4 bytes a
    token; a third of the UTF-8 length keeps a margin over that average.
    """
    return -(-len(text.encode()) // 3)


def guard_input(provider: str, texts: list[str], limit: int) -> None:
    for index, text in enumerate(texts):
        if (tokens := estimated_tokens(text)) > limit:
            raise InputTooLong(f"{provider}: input {index} is ~{tokens} tokens, over the model's {limit}")


def guard_output(provider: str, vectors: list, count: int, dim: int) -> np.ndarray:
    """The provider's vectors as float32 rows, L2-normalised, or MalformedEmbedding."""
    if len(vectors) != count:
        raise MalformedEmbedding(provider, f"{len(vectors)} vectors for {count} inputs")
    for index, vector in enumerate(vectors):
        if len(vector) == 0:
            raise MalformedEmbedding(provider, f"vector {index} is empty")
        if len(vector) != dim:
            raise WidthMismatch(provider, f"vector {index} has width {len(vector)}, not {dim}", len(vector))
    out = np.asarray(vectors, dtype=np.float32)
    if not np.isfinite(out).all():
        raise MalformedEmbedding(provider, "a vector holds a non-finite value")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    if (norms == 0).any():
        raise MalformedEmbedding(provider, "a vector is all zeros")
    return out / norms
