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

from retrieval.store import clickhouse

log = logging.getLogger(__name__)

# USD per million tokens: (input, output). Models not listed (local, fake) cost nothing upstream.
PRICES = {
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
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


def price(model: str, input_tokens: int, output_tokens: int) -> float:
    """USD for a call. An unlisted model bills $0 and logs one warning (per model, per process): its cost is
    unknown, not free."""
    if model not in PRICES:
        if not model.startswith(_FREE) and model not in _warned:
            _warned.add(model)
            log.warning("no price listed for %s: its calls bill $0 (retrieval/providers/costs.py PRICES)", model)
        return 0.0
    price_in, price_out = PRICES[model]
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


def add_embedding(model: str, tokens: int) -> None:
    if (meter := _meter.get()) is None:
        return
    cost = price(model, tokens, 0)
    meter.embedding_tokens += tokens
    meter.embedding_calls += 1
    meter.cost_usd += cost
    meter.weight[model] += cost or tokens * 1e-12  # a free model weighs by tokens, under any paid one


def add_llm(model: str, input_tokens: int, output_tokens: int) -> None:
    if (meter := _meter.get()) is None:
        return
    cost = price(model, input_tokens, output_tokens)
    meter.input_tokens += input_tokens
    meter.output_tokens += output_tokens
    meter.llm_calls += 1
    meter.cost_usd += cost
    meter.weight[model] += cost or (input_tokens + output_tokens) * 1e-12


def add_cache_saving(model: str, input_tokens: int, output_tokens: int) -> float:
    """An answer served from the response cache: what the call would have cost. Returns it."""
    saved = price(model, input_tokens, output_tokens)
    if (meter := _meter.get()) is not None:
        meter.cache_saved_usd += saved
    return saved


def record(org: str, namespace: str, op: str, actor: str, meter: Meter) -> None:
    """One row for an op that reached a provider; a failed write is logged, never the op's failure."""
    if not meter.used:
        return
    try:
        clickhouse.insert(
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
    except Exception as exc:  # accounting fails open
        log.warning("agent_events write failed for %s: %s", op, exc)
