"""LLM clients: one `complete()` for every provider, behind the model-call switch and a response cache.

`get_llm()` resolves the provider as the spec says: LOOM_LLM_PROVIDER when set;
else from LOOM_LLM_MODEL's name (gpt*, o1*, o3*, o4*, chatgpt* -> openai,
claude* -> anthropic, fake* -> fake); else from the key present; else the fake
(a deterministic echo). A missing key serves the fake, logged at WARNING.
"""

import contextvars
import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval import metrics
from retrieval.providers import costs, customer, openai_client, remote
from retrieval.providers.traits import EFFORTS, Traits
from retrieval.store import clickhouse, cluster

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
FALLBACK_STATUSES = frozenset({400, 413, 422})  # a rejected request may suit the other model; 401/403/404 do not


@dataclass
class LLMResult:
    text: str
    provider: str
    model: str  # as the provider reports it: a dated snapshot of the model asked for (gpt-4o-2024-08-06)
    input_tokens: int = 0  # all of the prompt, the two below included (providers count it differently)
    output_tokens: int = 0
    cached_input_tokens: int = 0  # of it, what the provider served from its prompt cache
    cache_write_tokens: int = 0  # of it, what it wrote to that cache (Anthropic's cacheable system block)
    from_cache: bool = False  # our response cache answered: no provider call
    saved_usd: float = 0.0  # what that call would have cost (estimated from the prompt's and answer's length)
    fallback: bool = False  # LOOM_LLM_FALLBACK_MODEL answered, not the model asked for
    cut_short: bool = False  # the answer stopped at the token cap (max_tokens), not where the model ended it


class TimedOut(Exception):
    """A bounded call (`within`) ran past its bound; the caller went on without it."""


# Calls a request waits for a bounded time (HyDE, query rewrite, the LLM reranker): past the bound the request goes
# on and the call finishes here, its usage still metered.
_bounded = ThreadPoolExecutor(max_workers=8, thread_name_prefix="loom-llm-bounded")


def within(seconds: float, client, system: str, user: str, **fields) -> LLMResult:
    """`client.complete(system, user, **fields)`, waited for at most `seconds` (else TimedOut).

    The client's own timeout (LOOM_LLM_REQUEST_TIMEOUT_S, 300 s) only catches a hung connection, and its retries
    multiply it: a caller inside a search bounds the wait here instead. The call runs in the caller's context, so
    its org, its switch check and the op's cost meter go with it.
    """
    asked = _bounded.submit(contextvars.copy_context().run, client.complete, system, user, **fields)
    try:
        return asked.result(timeout=max(0.0, seconds))
    except FutureTimeout:
        raise TimedOut(f"no answer within {seconds:.1f} s") from None


# What the fake answers a structured call, by its JSON schema's name: a feature's deterministic stand-in (extraction's
# statements, retrieval/ingest/extraction.py), so CI runs that feature's production path. Any other call: the echo.
FAKE_ANSWERS: dict[str, Callable[[str], str]] = {}


class FakeLLM:
    """Deterministic echo: keyless, offline; health names it (fake_llm)."""

    provider = "fake"

    def __init__(self, model: str = "fake-echo-1", key_missing_for: str = ""):
        self.model = model
        self.key_missing_for = key_missing_for  # the real model this fake stands in for

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None) -> LLMResult:
        named = (response_format or {}).get("json_schema", {}).get("name")
        if named in FAKE_ANSWERS:
            text = FAKE_ANSWERS[named](user)
        else:
            text = json.dumps({"echo": user}) if response_format else f"echo: {user}"
        return LLMResult(text, self.provider, self.model, len(user.split()), len(text.split()))


class OpenAILLM:
    """Chat completions through the official SDK; the retry policy is ours (the SDK's is off)."""

    provider = "openai"

    def __init__(self, model: str, api_key: str):
        self.model = model
        self._client = openai_client.client(api_key, settings.LOOM_LLM_REQUEST_TIMEOUT_S)
        self.traits = Traits(model, cap_field="max_completion_tokens")

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None) -> LLMResult:
        def send(reserve: int | None = None):
            wanted = {
                "max_completion_tokens": max_tokens,
                "temperature": 0,
                "reasoning_effort": settings.LOOM_LLM_OPENAI_REASONING_EFFORT or EFFORTS[0],
            }
            if response_format:
                wanted["response_format"] = response_format
            fields = self.traits.shape(wanted, reserve)
            try:
                answer = self._client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    **fields,
                )
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                raise _learned(self, exc, fields)  # noqa: B904 (caused by exc)
            details = getattr(answer.usage, "completion_tokens_details", None)
            if hidden := getattr(details, "reasoning_tokens", 0) or 0:
                self.traits.reasoned(hidden)
            return answer

        def attempt(reserve: int | None = None):
            return remote.with_retries(
                self.provider,
                lambda: send(reserve),
                settings.LOOM_LLM_RETRY_ATTEMPTS,
                settings.LOOM_LLM_RETRY_MAX_WAIT_S,
            )

        answer = attempt()
        choice = answer.choices[0]
        if choice.finish_reason == "length" and not choice.message.content:  # reasoning ate the whole cap
            answer = attempt(settings.LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX)
        usage = answer.usage
        details = getattr(usage, "prompt_tokens_details", None)
        return LLMResult(
            answer.choices[0].message.content or "",
            self.provider,
            answer.model or self.model,
            usage.prompt_tokens if usage else 0,
            usage.completion_tokens if usage else 0,
            cached_input_tokens=getattr(details, "cached_tokens", 0) or 0,
            cut_short=answer.choices[0].finish_reason == "length",
        )


class AnthropicLLM:
    """Claude through the official `anthropic` SDK (an optional extra: requirements-anthropic.txt).

    It has no JSON mode: asked for JSON, it appends a directive to the system
    prompt and strips a code fence from the answer. The system block is marked
    cacheable. LOOM_LLM_ANTHROPIC_EFFORT sends a thinking effort.
    """

    provider = "anthropic"
    JSON_DIRECTIVE = "\n\nAnswer with one JSON object and nothing else: no prose, no code fence."

    def __init__(self, model: str, api_key: str):
        try:
            import anthropic
        except ImportError:
            raise ImproperlyConfigured(
                f"LOOM_LLM_MODEL={model} needs the anthropic SDK: pip install -r requirements-anthropic.txt"
            ) from None
        self._errors = (anthropic.APIStatusError, anthropic.APIConnectionError)
        self.model = model
        self._client = anthropic.Anthropic(
            api_key=api_key,
            base_url=settings.ANTHROPIC_BASE_URL or None,
            max_retries=0,
            timeout=settings.LOOM_LLM_REQUEST_TIMEOUT_S,
            http_client=customer.gateway_http_client(anthropic.DefaultHttpxClient),
        )
        self.traits = Traits(model, cap_field="max_tokens")

    def complete(self, system: str, user: str, max_tokens: int = 1024, response_format=None) -> LLMResult:
        if response_format:
            system += self.JSON_DIRECTIVE

        def send():
            wanted = {"max_tokens": max_tokens, "temperature": 0}
            if settings.LOOM_LLM_ANTHROPIC_EFFORT:
                wanted["output_config"] = {"effort": settings.LOOM_LLM_ANTHROPIC_EFFORT}
            fields = self.traits.shape(wanted)
            optional = {name: value for name, value in fields.items() if name != "max_tokens"}  # as the body has it:
            try:  # the SDK's signature changes across releases; the API takes what a 400 has not refused
                answer = self._client.messages.create(
                    model=self.model,
                    max_tokens=fields["max_tokens"],
                    messages=[{"role": "user", "content": user}],
                    system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                    extra_body=optional,
                )
            except self._errors as exc:
                raise _learned(self, exc, fields)  # noqa: B904 (caused by exc)
            text = "".join(block.text for block in answer.content if block.type == "text")
            usage = answer.usage
            read = getattr(usage, "cache_read_input_tokens", 0) or 0
            written = getattr(usage, "cache_creation_input_tokens", 0) or 0
            return LLMResult(
                unfenced(text) if response_format else text,
                self.provider,
                answer.model or self.model,
                usage.input_tokens + read + written,  # Anthropic counts the cached parts apart; OpenAI within
                usage.output_tokens,
                cached_input_tokens=read,
                cache_write_tokens=written,
                cut_short=answer.stop_reason == "max_tokens",
            )

        return remote.with_retries(
            self.provider, send, settings.LOOM_LLM_RETRY_ATTEMPTS, settings.LOOM_LLM_RETRY_MAX_WAIT_S
        )


def _learned(client, exc: Exception, sent: dict) -> Exception:
    """A failed call as the retry policy reads it; a 400 that taught the client something is sent again at once."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else {}
    error = error if isinstance(error, dict) else {}
    message = error.get("message") or getattr(exc, "message", "") or ""
    if client.traits.learn(getattr(exc, "status_code", None), message, error.get("param"), sent):
        return remote.Transient(400, f"{client.model}: request reshaped ({message})")
    return remote.sdk_failure(client.provider, exc, RETRY_STATUSES)


def unfenced(text: str) -> str:
    """The JSON inside a ```json fence, when the model wrapped it in one."""
    match = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text, re.DOTALL)
    return match.group(1) if match else text.strip()


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
            answer = self.fallback.complete(system, user, max_tokens, response_format)
            return dataclasses.replace(answer, fallback=True)


class Served:
    """The process's client as ops call it: the switch first, then the response cache, then the provider."""

    def __init__(self, inner):
        self.inner = inner
        self.provider, self.model = inner.provider, inner.model

    def complete(
        self,
        system: str,
        user: str,
        max_tokens: int = 1024,
        response_format=None,
        window_keys: tuple[str, ...] = (),
        cache: bool = True,
    ) -> LLMResult:
        """`cache=False` neither reads nor writes the response cache (memory.ask's llm_cache).

        The cache is keyed by the model asked for: a provider reports a dated snapshot of it, which changes under
        the same name. A fallback model's answer is never cached."""
        org = customer.require()
        digest = hashlib.sha256(
            json.dumps([org, self.model, system, user, max_tokens, response_format], sort_keys=True).encode()
        ).hexdigest()
        cached = _cache_get(digest, org) if cache else None
        if cache:
            metrics.cache_lookups.labels("llm", "miss" if cached is None else "hit").inc()
        if cached is not None:
            saved = costs.add_cache_saving(
                self.model, remote.estimated_tokens(system + user), remote.estimated_tokens(cached)
            )
            return LLMResult(cached, self.provider, self.model, from_cache=True, saved_usd=saved)
        result = self.inner.complete(system, user, max_tokens, response_format)
        costs.add_llm(result)
        if cache and result.text and not result.fallback:
            _cache_put(digest, org, self.model, result.text, window_keys)
        return result


def _cache_get(digest: str, org: str) -> str | None:
    try:
        rows = clickhouse.query_rows(
            "SELECT text FROM llm_response_cache WHERE key = {key:String} AND org = {org:String} LIMIT 1",
            {"key": digest, "org": org},
        )
    except Exception as exc:  # a cache that fails is a miss
        log.warning("llm response cache read failed: %s", exc)
        return None
    return rows[0][0] if rows else None


def _cache_put(digest: str, org: str, model: str, text: str, window_keys) -> None:
    try:
        clickhouse.insert(
            "llm_response_cache",
            [
                {
                    "key": digest,
                    "org": org,
                    "model": model,
                    "text": text,
                    "window_keys": list(window_keys),
                    "created_at": datetime.now(UTC),
                }
            ],
        )
    except Exception as exc:  # the answer is in hand
        log.warning("llm response cache write failed: %s", exc)


def forget_answers(org: str, memory_keys: list[str]) -> int:
    """Delete the org's cached answers whose prompt carried any of these memories (their `window_keys`), so a
    deleted memory cannot come back through an answer that quoted it; how many there were. The cache rows name
    keys, not namespaces: a key deleted in one namespace drops the org's answers quoting that key in any (a miss,
    never a leak). Waited for (`mutations_sync`): the next read must not find them."""
    params = {"org": org, "keys": sorted(set(memory_keys))}
    found = clickhouse.query_value(f"SELECT count() FROM llm_response_cache WHERE {_QUOTING}", params)
    if found:
        cluster.run(f"ALTER TABLE llm_response_cache DELETE WHERE {_QUOTING} SETTINGS mutations_sync = 1", params)
    return found


_QUOTING = "org = {org:String} AND hasAny(window_keys, {keys:Array(String)})"  # the org's answers quoting the keys


def provider_for(model: str) -> str:
    return _provider_and_source(model)[0]


def _provider_and_source(model: str) -> tuple[str, str]:
    """The provider that serves `model`, and what said so (logged once a process, `build`)."""
    if settings.LOOM_LLM_PROVIDER:
        return settings.LOOM_LLM_PROVIDER, "LOOM_LLM_PROVIDER"
    for provider, prefixes in (("anthropic", ("claude",)), ("openai", _OPENAI_NAMES), ("fake", ("fake",))):
        if model.startswith(prefixes):
            return provider, "the model's name"
    raise ImproperlyConfigured(f"unknown LLM model {model!r} (LOOM_LLM_MODEL)")


_OPENAI_NAMES = ("gpt", "o1", "o3", "o4", "chatgpt")
_announced: set[tuple[str, str, str]] = set()


# Each real provider: its client, its key's setting, the model it serves when only its key is set.
_PROVIDERS = {
    "openai": (OpenAILLM, "OPENAI_API_KEY", "gpt-6-luna"),
    "anthropic": (AnthropicLLM, "ANTHROPIC_API_KEY", "claude-haiku-4-5"),
}


def build(model: str) -> object:
    if model:
        provider, source = _provider_and_source(model)
    else:  # from the key present, OpenAI's first
        keyed = next((name for name, (_, key, _) in _PROVIDERS.items() if getattr(settings, key)), None)
        provider = settings.LOOM_LLM_PROVIDER or keyed or "fake"
        source = (
            "LOOM_LLM_PROVIDER"
            if settings.LOOM_LLM_PROVIDER
            else f"the key present, {_PROVIDERS[keyed][1]}"
            if keyed
            else "no model or key set"
        )
        model = _PROVIDERS[provider][2] if provider in _PROVIDERS else "fake-echo-1"
    if (provider, model, source) not in _announced:
        _announced.add((provider, model, source))
        log.info("LLM provider %s for %s (from %s)", provider, model, source)
    if provider == "fake":
        return FakeLLM(model)
    client, key, _ = _PROVIDERS[provider]
    if not getattr(settings, key):
        log.warning("LOOM_LLM_MODEL=%s needs %s; the fake LLM answers instead", model, key)
        return FakeLLM(key_missing_for=model)
    return client(model, getattr(settings, key))


@cache
def get_llm() -> Served:
    """The process's LLM client, with LOOM_LLM_FALLBACK_MODEL behind it when set."""
    primary = build(settings.LOOM_LLM_MODEL)
    if settings.LOOM_LLM_FALLBACK_MODEL and primary.provider != "fake":
        primary = FallbackLLM(primary, build(settings.LOOM_LLM_FALLBACK_MODEL))
    return Served(primary)


def for_model(model: str) -> Served:
    """A client for one job's model (a reranker's, memory.ask's): the process's own when it serves that model (its
    learned traits, its fallback), else one built for it, kept for the process."""
    served = get_llm()
    return served if not model or served.model == model else _other(model)


@cache
def _other(model: str) -> Served:
    return Served(build(model))


def forget() -> None:
    """Drop the clients built so far: the next call builds them from the settings as they are now (tests)."""
    get_llm.cache_clear()
    _other.cache_clear()
