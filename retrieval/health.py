"""What /v1/health and the dashboard report: ClickHouse, the providers, and problems."""

from django.conf import settings

from retrieval.gates import thresholds
from retrieval.providers import costs, remote
from retrieval.providers.embedders import get_embedder, width_mismatch
from retrieval.providers.llm import get_llm
from retrieval.search.rerank import COHERE_MODEL
from retrieval.store import clickhouse

# What each problem means to someone reading results (the Recall Lab's banner).
MEANING = {
    "fake_embedder": "search ranks with a test embedder, not a model (set LOOM_EMBEDDING_MODEL)",
    "embedder_key_missing": "the configured embedder has no API key: a test embedder stands in",
    "embedding_dim_mismatch": "stored vectors differ in width from the embedder's (run manage.py reembed)",
    "fake_llm": "answers and LLM steps come from a test stand-in, not a model (set LOOM_LLM_MODEL)",
    "llm_key_missing": "the configured LLM has no API key: a test stand-in answers",
}


def problems() -> list[str]:
    """What stands between this deployment and real answers, ClickHouse apart (cheap: nothing is called)."""
    found = []
    embedder = get_embedder()
    if embedder.provider == "fake":
        found.append("embedder_key_missing" if embedder.key_missing_for else "fake_embedder")
    if width_mismatch():
        found.append("embedding_dim_mismatch")
    llm = get_llm()
    if llm.provider == "fake":
        found.append("llm_key_missing" if llm.inner.key_missing_for else "fake_llm")
    found += [f"model_unpriced:{model}" for model in costs.unpriced(_billed_models())]
    return found + [f"provider_failing:{name}" for name in remote.failing()]


def _billed_models() -> list[str]:
    """The models this deployment's calls can reach, as configured (an operator's rerank endpoint is its own)."""
    models = [get_embedder().model_name]
    if get_llm().provider != "fake":
        models += [
            settings.LOOM_LLM_MODEL or get_llm().model,
            settings.LOOM_LLM_FALLBACK_MODEL,
            settings.LOOM_MEMORY_ASK_SYNTH_MODEL,
            settings.LOOM_MEMORY_ASK_SYNTH_MODEL_CHEAP,
            settings.LOOM_MEMORY_ASK_MID_MODEL,
            settings.LOOM_CONFLICT_RESOLVER_MODEL if settings.LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED else "",
        ]
    if settings.OPENAI_API_KEY:
        models.append(settings.LOOM_RERANK_OPENAI_MODEL)
    if settings.COHERE_API_KEY:
        models.append(COHERE_MODEL)
    return models


def meaning(problem: str) -> str:
    kind, _, name = problem.partition(":")
    if kind == "model_unpriced":
        return f"calls to {name} bill $0 in the cost figures: no verified price is listed (docs/operating.md, Cost)"
    return MEANING.get(problem) or f"the {name} provider is failing: results are degraded until it answers"


def report() -> dict:
    try:
        engine = {"ok": True, "backend": clickhouse.backend(), "version": clickhouse.ping()}
    except clickhouse.ClickHouseUnavailable as exc:
        engine = {"ok": False, "backend": clickhouse.backend(), "version": None, "error": str(exc)}
    embedder, llm, problems_found = get_embedder(), get_llm(), problems()
    adaptive = {"enabled": False, "tier": "scalar", "calibration_hash": None}
    if engine["ok"]:
        adaptive = thresholds.health()
    if not engine["ok"]:
        status = "unavailable"
    elif settings.LOOM_REQUIRE_REAL_PROVIDERS and any(not p.startswith("model_unpriced:") for p in problems_found):
        status = "degraded"
    else:
        status = "ok"
    return {
        "status": status,
        "clickhouse": engine,
        "embedder": {"provider": embedder.provider, "model": embedder.model_name, "dim": embedder.dim},
        "llm": {"provider": llm.provider, "model": llm.model},
        "problems": problems_found,
        "adaptive_thresholds": adaptive,
    }
