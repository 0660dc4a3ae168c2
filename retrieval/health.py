"""What /v1/health and the dashboard report: ClickHouse, the providers, and problems."""

from django.conf import settings

from retrieval import clickhouse, thresholds
from retrieval.providers.embedders import get_embedder

# The one LLM client there is until the providers land: a deterministic echo.
LLM = {"provider": "fake", "model": "fake-echo-1"}


def report() -> dict:
    try:
        engine = {"ok": True, "backend": clickhouse.backend(), "version": clickhouse.ping()}
    except clickhouse.ClickHouseUnavailable as exc:
        engine = {"ok": False, "backend": clickhouse.backend(), "version": None, "error": str(exc)}
    embedder = get_embedder()
    problems = []
    if embedder.provider == "fake":
        problems.append("embedder_key_missing" if embedder.key_missing_for else "fake_embedder")
    if LLM["provider"] == "fake":
        problems.append("fake_llm")
    adaptive = {"enabled": False, "tier": "scalar", "calibration_hash": None}
    if engine["ok"]:
        adaptive = thresholds.health()
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
        "llm": LLM,
        "problems": problems,
        "adaptive_thresholds": adaptive,
    }
