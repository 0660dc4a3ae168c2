"""The key axis: whether a namespace's keys name attributes (`user.city`, rewritten as facts change), so a query
is also scored against the key vectors."""

from django.conf import settings

from retrieval.caching import TtlCache
from retrieval.store import clickhouse

_answers = TtlCache(60)


def enabled(org: str, namespace: str, model: str) -> bool:
    """On, off, or (auto) on when the namespace reuses its keys: then keys name attributes."""
    mode = settings.LOOM_MEMORY_SEARCH_KEY_AXIS
    if mode != "auto":
        return mode == "on"
    return _answers.get((org, namespace, model), lambda: _reuses_keys(org, namespace, model))


def _reuses_keys(org: str, namespace: str, model: str) -> bool:
    share = clickhouse.query_value(
        """
        SELECT if(count() = 0, 0, 1 - uniqExact(memory_key) / count()) FROM memory_embeddings FINAL
        WHERE org = {org:String} AND namespace = {namespace:String} AND embedding_model = {model:String}
          AND status = 'active'
        """,
        {"org": org, "namespace": namespace, "model": model},
    )
    return share >= settings.LOOM_MEMORY_SEARCH_KEY_AXIS_AUTO_REUSE_SHARE
