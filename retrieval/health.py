"""What /v1/health and the dashboard report: ClickHouse, the providers, and problems."""

from django.conf import settings

from retrieval.gates import thresholds
from retrieval.providers import remote
from retrieval.providers.embedders import get_embedder, width_mismatch
from retrieval.providers.llm import get_llm
from retrieval.store import clickhouse


def report() -> dict:
    try:
        engine = {"ok": True, "backend": clickhouse.backend(), "version": clickhouse.ping()}
    except clickhouse.ClickHouseUnavailable as exc:
        engine = {"ok": False, "backend": clickhouse.backend(), "version": None, "error": str(exc)}
    embedder = get_embedder()
    problems = []
    if embedder.provider == "fake":
        problems.append("embedder_key_missing" if embedder.key_missing_for else "fake_embedder")
    if width_mismatch():
        problems.append("embedding_dim_mismatch")
    llm = get_llm()
    if llm.provider == "fake":
        problems.append("llm_key_missing" if llm.inner.key_missing_for else "fake_llm")
    adaptive = {"enabled": False, "tier": "scalar", "calibration_hash": None}
    if engine["ok"]:
        adaptive = thresholds.health()
    problems += [f"provider_failing:{name}" for name in remote.failing()]
    if not engine["ok"]:
        status = "unavailable"
    elif problems and settings.LOOM_REQUIRE_REAL_PROVIDERS:
        status = "degraded"
    else:
        status = "ok"
    return {
        "status": status,
        "clickhouse": engine,
        "embedder": {"provider": embedder.provider, "model": embedder.model_name, "dim": embedder.dim},
        "llm": {"provider": llm.provider, "model": llm.model},
        "problems": problems,
        "adaptive_thresholds": adaptive,
    }
