"""What each op spent on providers: tokens, calls and upstream cost, one loom.agent_events row per op.

A request opens a meter (`metered()`); every provider call adds its usage to
it (`add_embedding`, `add_llm`, `add_rerank`); when the op ends, `record()` writes one row if
the op reached a provider at all. A cached answer costs nothing; what it would have
cost is kept as the op's `llm_cache_saved_usd` (`add_cache_saving`).
"""

import logging
import re
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


# Published list prices, by model family. A provider reports a dated snapshot of the model asked for (gpt-4o ->
# gpt-4o-2024-08-06, claude-haiku-4-5 -> claude-haiku-4-5-20251001): it bills at its family's price. Models not
# listed (local, fake) cost nothing upstream; an unlisted other bills $0, warns once and is a health problem.
PRICES = {
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    "text-embedding-ada-002": Price(0.10, 0.0),
    "gpt-4o-mini": Price(0.15, 0.60, cache_read=0.5),
    "gpt-4o": Price(2.50, 10.00, cache_read=0.5),
    "gpt-4.1-nano": Price(0.10, 0.40, cache_read=0.25),
    "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.25),
    "gpt-4.1": Price(2.00, 8.00, cache_read=0.25),
    "gpt-5-nano": Price(0.05, 0.40, cache_read=0.1),
    "gpt-5-mini": Price(0.25, 2.00, cache_read=0.1),
    "gpt-5": Price(1.25, 10.00, cache_read=0.1),
    "o4-mini": Price(1.10, 4.40, cache_read=0.25),
    "o3": Price(2.00, 8.00, cache_read=0.25),
    "claude-3-5-haiku": Price(0.80, 4.00, cache_read=0.1, cache_write=1.25),
    "claude-haiku-4-5": Price(1.00, 5.00, cache_read=0.1, cache_write=1.25),
    "claude-sonnet-4": Price(3.00, 15.00, cache_read=0.1, cache_write=1.25),
    "claude-sonnet-4-5": Price(3.00, 15.00, cache_read=0.1, cache_write=1.25),
    "claude-opus-4-1": Price(15.00, 75.00, cache_read=0.1, cache_write=1.25),
    "claude-opus-4-5": Price(5.00, 25.00, cache_read=0.1, cache_write=1.25),
}
# Rerank APIs bill by the search (Cohere: one search unit is a query over up to 100 documents): USD per unit.
RERANK_PRICES = {
    "rerank-v3.5": 2.00 / 1000,
    "rerank-english-v3.0": 2.00 / 1000,
    "rerank-multilingual-v3.0": 2.00 / 1000,
}
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def family(model: str) -> str:
    """The model a snapshot id is a dated release of: gpt-4o-2024-08-06 -> gpt-4o."""
    return _SNAPSHOT.sub("", model)


def listed(model: str, tables: tuple[dict, ...] = (PRICES, RERANK_PRICES)) -> Price | float | None:
    """The model's listed price in these tables (a snapshot's is its family's), or None."""
    for table in tables:
        if (found := table.get(model, table.get(family(model)))) is not None:
            return found
    return None


def unpriced(models) -> list[str]:
    """Of these models, those whose calls would bill $0 for want of a listed price (free models apart)."""
    return sorted({m for m in models if m and not m.startswith(_FREE) and listed(m) is None})


@dataclass
class Meter:
    embedding_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    embedding_calls: int = 0
    rerank_calls: int = 0
    cost_usd: float = 0.0
    cache_saved_usd: float = 0.0
    weight: Counter = field(default_factory=Counter)  # model -> cost (or tokens, for free models)

    @property
    def used(self) -> bool:
        return bool(self.embedding_calls or self.llm_calls or self.rerank_calls or self.cache_saved_usd)

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


# Models that cost nothing upstream by nature: the local and fake ones run here; Gemini embeddings report no usage;
# an operator's rerank endpoint (`endpoint:<name>`) runs on its own hardware.
_FREE = ("local:", "fake", "gemini-embedding", "endpoint:")
_warned: set[str] = set()


def price(model: str, input_tokens: int, output_tokens: int, cached_input: int = 0, cache_write: int = 0) -> float:
    """USD for a call; `input_tokens` counts the whole prompt, its cached and cache-written parts included. An
    unlisted model bills $0 and logs one warning (per model, per process): its cost is unknown, not free."""
    rate = listed(model, (PRICES,))
    if rate is None:
        _unlisted(model)
        return 0.0
    plain = input_tokens - cached_input - cache_write
    prompt = plain + cached_input * rate.cache_read + cache_write * rate.cache_write
    return (prompt * rate.input + output_tokens * rate.output) / 1_000_000


def _unlisted(model: str) -> None:
    if not model.startswith(_FREE) and model not in _warned:
        _warned.add(model)
        log.warning("no price listed for %s: its calls bill $0 (retrieval/providers/costs.py PRICES)", model)


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


def add_rerank(model: str, search_units: int) -> None:
    """A rerank API's call, billed by the search units it reports (Cohere's; one, where an endpoint reports none).
    A model with no listed price bills $0 and warns once, as an LLM's does."""
    if (meter := _meter.get()) is None:
        return
    per_unit = listed(model, (RERANK_PRICES,))
    if per_unit is None:
        _unlisted(model)
    cost = (per_unit or 0.0) * search_units
    meter.rerank_calls += 1
    meter.cost_usd += cost
    meter.weight[model] += cost or search_units * 1e-12


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
                "rerank_calls": meter.rerank_calls,
                "model": meter.dominant_model(),
                "llm_cache_saved_usd": meter.cache_saved_usd,
            }
        ],
    )
