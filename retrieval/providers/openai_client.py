"""The OpenAI SDK as every OpenAI sender uses it: one client shape.

The SDK's own retries are off: the shared policy in `remote.py` decides which
answers are worth another attempt (`remote.sdk_failure`), so every provider behaves alike.
"""

import openai
from django.conf import settings

from retrieval.providers import customer


def client(api_key: str, timeout) -> openai.OpenAI:
    """OPENAI_BASE_URL honoured; requests go through the gateway-aware HTTP client."""
    return openai.OpenAI(
        api_key=api_key,
        base_url=settings.OPENAI_BASE_URL or None,
        max_retries=0,
        timeout=timeout,
        http_client=customer.gateway_http_client(),
    )
