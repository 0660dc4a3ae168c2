"""What each op spent on providers: tokens, calls and upstream cost, one loom.agent_events row per op.

A request opens a meter (`metered()`); every provider call adds its usage to
it (`add_embedding`, `add_llm`); when the op ends, `record()` writes one row if
the op reached a provider at all. A cached answer costs nothing; what it would have
cost is kept as the op's `llm_cache_saved_usd` (`add_cache_saving`).
"""

import logging
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from retrieval.store import clickhouse

if TYPE_CHECKING:
    from retrieval.providers.llm import LLMResult

log = logging.getLogger(__name__)


class Price(NamedTuple):
    """USD per million tokens. A prompt's cached part bills `cache_read` times the input price, the part written
    to the provider's cache `cache_write` times it (Anthropic's cache writes cost more than plain input)."""

    input: float
    output: float
    cache_read: float = 1.0
    cache_write: float = 1.0


# Published list prices. Models not listed (local, fake) cost nothing upstream; an unlisted other warns once.
PRICES = {
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    "gpt-4o-mini": Price(0.15, 0.60, cache_read=0.5),
    "gpt-4o": Price(2.50, 10.00, cache_read=0.5),
    "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.25),
    "gpt-4.1": Price(2.00, 8.00, cache_read=0.25),
    "claude-3-5-haiku-20241022": Price(0.80, 4.00, cache_read=0.1, cache_write=1.25),
    "claude-sonnet-4-20250514": Price(3.00, 15.00, cache_read=0.1, cache_write=1.25),
}


@dataclass
class Meter:
    embedding_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    embedding_calls: int = 0
    cost_usd: float = 0.0
    cache_saved_usd: float = 0.0
    weight: Counter = field(default_factory=Counter)  # model -> cost (or tokens, for free models)

    @property
    def used(self) -> bool:
        return bool(self.embedding_calls or self.llm_calls or self.cache_saved_usd)

    def dominant_model(self) -> str:
        return self.weight.most_common(1)[0][0] if self.weight else ""


_meter: ContextVar[Meter | None] = ContextVar("loom_meter", default=None)


@contextmanager
def metered():
    meter = Meter()
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


@contextmanager
def accounted(org: str, namespace: str, op: str, actor: str):
    """Meter an op's provider calls; when it completes having reached a provider, write its one agent_events row."""
    with metered() as meter:
        yield meter
    record(org, namespace, op, actor, meter)


# Models that cost nothing upstream by nature: the local and fake ones run here; Gemini embeddings report no usage.
_FREE = ("local:", "fake", "gemini-embedding")
_warned: set[str] = set()


def price(model: str, input_tokens: int, output_tokens: int, cached_input: int = 0, cache_write: int = 0) -> float:
    """USD for a call; `input_tokens` counts the whole prompt, its cached and cache-written parts included. An
    unlisted model bills $0 and logs one warning (per model, per process): its cost is unknown, not free."""
    if model not in PRICES:
        if not model.startswith(_FREE) and model not in _warned:
            _warned.add(model)
            log.warning("no price listed for %s: its calls bill $0 (retrieval/providers/costs.py PRICES)", model)
        return 0.0
    rate = PRICES[model]
    plain = input_tokens - cached_input - cache_write
    prompt = plain + cached_input * rate.cache_read + cache_write * rate.cache_write
    return (prompt * rate.input + output_tokens * rate.output) / 1_000_000


def add_embedding(model: str, tokens: int) -> None:
    if (meter := _meter.get()) is None:
        return
    cost = price(model, tokens, 0)
    meter.embedding_tokens += tokens
    meter.embedding_calls += 1
    meter.cost_usd += cost
    meter.weight[model] += cost or tokens * 1e-12  # a free model weighs by tokens, under any paid one


def add_llm(result: "LLMResult") -> None:
    if (meter := _meter.get()) is None:
        return
    tokens = (result.input_tokens, result.output_tokens)
    cost = price(result.model, *tokens, result.cached_input_tokens, result.cache_write_tokens)
    meter.input_tokens += result.input_tokens
    meter.output_tokens += result.output_tokens
    meter.llm_calls += 1
    meter.cost_usd += cost
    meter.weight[result.model] += cost or sum(tokens) * 1e-12


def add_cache_saving(model: str, input_tokens: int, output_tokens: int) -> float:
    """An answer served from the response cache: what the call would have cost. Returns it."""
    saved = price(model, input_tokens, output_tokens)
    if (meter := _meter.get()) is not None:
        meter.cache_saved_usd += saved
    return saved


def record(org: str, namespace: str, op: str, actor: str, meter: Meter) -> None:
    """One row for an op that reached a provider, written soon, off the request path (`clickhouse.insert_later`): a
    failed write is logged, never the op's failure."""
    if not meter.used:
        return
    clickhouse.insert_later(
        "agent_events",
        [
            {
                "org": org,
                "namespace": namespace,
                "op": op,
                "actor": actor,
                "created_at": datetime.now(UTC),
                "upstream_cost_usd": meter.cost_usd,
                "embedding_tokens": meter.embedding_tokens,
                "input_tokens": meter.input_tokens,
                "output_tokens": meter.output_tokens,
                "llm_calls": meter.llm_calls,
                "embedding_calls": meter.embedding_calls,
                "model": meter.dominant_model(),
                "llm_cache_saved_usd": meter.cache_saved_usd,
            }
        ],
    )
