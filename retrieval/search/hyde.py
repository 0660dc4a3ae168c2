"""HyDE: a second vector pass with the embedding of an LLM-written answer, when the first pass is weak."""

import logging
from dataclasses import replace

import numpy as np

from retrieval.gates.thresholds import Gates
from retrieval.providers import customer, remote
from retrieval.providers.embedders import get_embedder
from retrieval.providers.llm import get_llm
from retrieval.search.legs import Context
from retrieval.search.legs import run as run_legs
from retrieval.search.pool import Pool
from tenancy.access import Scope

log = logging.getLogger(__name__)

HYDE_PROMPT = (
    "Write a short passage, two sentences at most, that answers the question as a stored note would. "
    "Write only the passage."
)


def expand(scope: Scope, ctx: Context, pool: Pool, gates: Gates, degraded: list[str]) -> bool:
    """HyDE: search with the embedding of an LLM-written answer, when the first pass is weak (always under deep).

    Its cosine is `hyde_similarity`, one more vector signal of the candidates it
    finds. It fails open: a refusal or a failed call is named in `degraded`.
    Returns whether it ran.
    """
    top = max((c.similarity for c in pool.values() if c.meta is not None), default=0.0)
    if ctx.plan.budget != "deep" and top >= gates.hyde_fallback:
        return False
    llm = get_llm()
    if llm.provider == "fake":
        degraded.append("hyde:fake_llm")  # an echo would only embed the question again
        return False
    try:
        with customer.for_org(scope.org, scope.namespace, scope.subject, "hyde"):
            passage = llm.complete(HYDE_PROMPT, ctx.request.searched, max_tokens=200).text
            vector = get_embedder().embed(passage)
    except customer.ModelCallRefused as exc:
        degraded.append(f"hyde:{exc.code.lower()}")
        return False
    except (remote.ProviderError, remote.EmbedTimeout) as exc:
        log.warning("HyDE failed open: %s", exc)
        degraded.append("hyde:failed")
        return False
    found = Pool()
    run_legs(
        replace(ctx, vector=np.asarray(vector, dtype=np.float32), plan=replace(ctx.plan, legs={"vector"})),
        found,
        degraded,
        {},
    )
    for rid, candidate in found.items():
        pool.add(rid, {"hyde_similarity": candidate.fact_similarity}, None, candidate.meta)
    return True
