"""The OpenAI SDK as every OpenAI sender uses it: one client shape, one reading of its failures.

The SDK's own retries are off: the shared policy in `remote.py` decides which
answers are worth another attempt, so every provider behaves alike.
"""

import openai
from django.conf import settings

from retrieval.providers import customer, remote


def client(api_key: str, timeout) -> openai.OpenAI:
    """OPENAI_BASE_URL honoured; requests go through the gateway-aware HTTP client."""
    return openai.OpenAI(api_key=api_key, base_url=settings.OPENAI_BASE_URL or None, max_retries=0, timeout=timeout,
                         http_client=customer.gateway_http_client())  # fmt: skip


def failure(provider: str, exc: openai.APIError, retry_statuses) -> Exception:
    """What a failed SDK call is to the retry policy: Transient, a ProviderError (each caused by `exc`), or the
    gateway's refusal itself. Raise it as it is."""
    if isinstance(exc.__cause__, customer.ModelCallRefused):  # the gateway refused this identity (a response hook)
        return exc.__cause__
    if not isinstance(exc, openai.APIStatusError):
        found = remote.Transient(None, type(exc).__name__)
    elif exc.status_code in retry_statuses:
        found = remote.Transient(exc.status_code, f"HTTP {exc.status_code}")
    else:
        found = remote.ProviderError(provider, f"HTTP {exc.status_code}: {exc.message}", exc.status_code)
    found.__cause__ = exc
    return found
