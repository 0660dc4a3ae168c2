"""LLM clients: one `complete()` for every provider, behind the model-call switch and a response cache.

`get_llm()` resolves the provider as the spec says: LOOM_LLM_PROVIDER when set;
else from LOOM_LLM_MODEL's name (gpt*, o1*, o3*, o4*, chatgpt* -> openai,
claude* -> anthropic, fake* -> fake); else from the key present; else the fake
(a deterministic echo). A missing key serves the fake, logged at WARNING.
"""

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval import clickhouse, costs
from retrieval.providers import customer, openai_client, remote

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
FALLBACK_STATUSES = frozenset({400, 413, 422})  # a rejected request may suit the other model; 401/403/404 do not


@dataclass
class LLMResult:
    text: str
    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    from_cache: bool = False


class FakeLLM:
    """Deterministic echo: keyless, offline; health names it (fake_llm)."""

    provider = "fake"

    def __init__(self, model: str = "fake-echo-1", key_missing_for: str = ""):
        self.model = model
        self.key_missing_for = key_missing_for  # the real model this fake stands in for

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None) -> LLMResult:
        text = json.dumps({"echo": user}) if response_format else f"echo: {user}"
        return LLMResult(text, self.provider, self.model, len(user.split()), len(text.split()))


class OpenAILLM:
    """Chat completions through the official SDK; the retry policy is ours (the SDK's is off)."""

    provider = "openai"

    def __init__(self, model: str, api_key: str):
        self.model = model
        self._client = openai_client.client(api_key, settings.LOOM_LLM_REQUEST_TIMEOUT_S)
        self._refused: set[str] = set()  # request fields this model answered 400 to: learned, left out

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None) -> LLMResult:
        def send():
            wanted = {"max_completion_tokens": max_tokens, "temperature": 0}
            if response_format:
                wanted["response_format"] = response_format
            fields = {name: value for name, value in wanted.items() if name not in self._refused}
            try:
                answer = self._client.chat.completions.create(
                    model=self.model, messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    **fields,
                )  # fmt: skip
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                if (param := _refused_field(exc, fields)) is not None:
                    log.info("%s does not take %s: leaving it out from now on", self.model, param)
                    self._refused.add(param)
                    raise remote.Transient(400, f"{self.model} refused {param}") from exc
                raise openai_client.failure(self.provider, exc, RETRY_STATUSES)  # noqa: B904 (caused by exc)
            usage = answer.usage
            return LLMResult(answer.choices[0].message.content or "", self.provider, answer.model or self.model,
                             usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)  # fmt: skip

        return remote.with_retries(self.provider, send, settings.LOOM_LLM_RETRY_ATTEMPTS,
                                   settings.LOOM_LLM_RETRY_MAX_WAIT_S)  # fmt: skip


def _refused_field(exc: openai.APIError, fields: dict) -> str | None:
    """The request field a 400 names, when the call sent it and it may be left out (not the asked-for format)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code != 400 or not isinstance(exc.body, dict):
        return None
    param = exc.body.get("param")
    return param if param in fields and param != "response_format" else None


class FallbackLLM:
    """Hands a call to LOOM_LLM_FALLBACK_MODEL on an outage or a rejected request; fallbacks do not chain."""

    def __init__(self, primary, fallback):
        self.primary, self.fallback = primary, fallback
        self.provider, self.model = primary.provider, primary.model

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None) -> LLMResult:
        try:
            return self.primary.complete(system, user, max_tokens, response_format)
        except remote.ProviderError as exc:
            if exc.status is not None and exc.status not in RETRY_STATUSES | FALLBACK_STATUSES:
                raise
            log.warning("%s failed (%s); %s answers instead", self.primary.model, exc, self.fallback.model)
            return self.fallback.complete(system, user, max_tokens, response_format)


class Served:
    """The process's client as ops call it: the switch first, then the response cache, then the provider."""

    def __init__(self, inner):
        self.inner = inner
        self.provider, self.model = inner.provider, inner.model

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None,
                 window_keys: tuple[str, ...] = ()) -> LLMResult:  # fmt: skip
        org = customer.require()
        digest = hashlib.sha256(
            json.dumps([org, self.model, system, user, max_tokens, response_format], sort_keys=True).encode()
        ).hexdigest()
        cached = _cache_get(digest)
        if cached is not None:
            return LLMResult(cached, self.provider, self.model, from_cache=True)
        result = self.inner.complete(system, user, max_tokens, response_format)
        costs.add_llm(result.model, result.input_tokens, result.output_tokens)
        if result.text and result.model == self.model:  # a fallback's answer is never cached
            _cache_put(digest, org, self.model, result.text, window_keys)
        return result


def _cache_get(digest: str) -> str | None:
    try:
        rows = clickhouse.query_rows(
            "SELECT text FROM llm_response_cache WHERE key = {key:String} LIMIT 1", {"key": digest}
        )
    except Exception as exc:  # noqa: BLE001 -- a cache that fails is a miss
        log.warning("llm response cache read failed: %s", exc)
        return None
    return rows[0][0] if rows else None


def _cache_put(digest: str, org: str, model: str, text: str, window_keys) -> None:
    try:
        clickhouse.insert("llm_response_cache", [{"key": digest, "org": org, "model": model, "text": text,
                                                  "window_keys": list(window_keys),
                                                  "created_at": datetime.now(UTC)}])  # fmt: skip
    except Exception as exc:  # noqa: BLE001 -- the answer is in hand
        log.warning("llm response cache write failed: %s", exc)


def provider_for(model: str) -> str:
    if settings.LOOM_LLM_PROVIDER:
        return settings.LOOM_LLM_PROVIDER
    if model.startswith("claude"):
        return "anthropic"
    if model.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if model.startswith("fake"):
        return "fake"
    raise ImproperlyConfigured(f"unknown LLM model {model!r} (LOOM_LLM_MODEL)")


def build(model: str) -> object:
    provider = provider_for(model) if model else ("openai" if settings.OPENAI_API_KEY else "fake")
    model = model or {"openai": "gpt-6-luna", "fake": "fake-echo-1"}.get(provider, "")
    if provider == "fake":
        return FakeLLM(model)
    if provider == "openai":
        if not settings.OPENAI_API_KEY:
            log.warning("LOOM_LLM_MODEL=%s needs OPENAI_API_KEY; the fake LLM answers instead", model)
            return FakeLLM(key_missing_for=model)
        return OpenAILLM(model, settings.OPENAI_API_KEY)
    raise ImproperlyConfigured(f"the {provider} LLM client is not in this build")


@cache
def get_llm() -> Served:
    """The process's LLM client, with LOOM_LLM_FALLBACK_MODEL behind it when set."""
    primary = build(settings.LOOM_LLM_MODEL)
    if settings.LOOM_LLM_FALLBACK_MODEL and primary.provider != "fake":
        primary = FallbackLLM(primary, build(settings.LOOM_LLM_FALLBACK_MODEL))
    return Served(primary)
