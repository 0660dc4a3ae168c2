"""Namespace configuration: retrieval defaults, text-capture consent, rerank endpoint.

A namespace exists as soon as a row is written to it; registering one only
stores its configuration (the newest registration wins).
"""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from retrieval.caching import TtlCache
from retrieval.store import audit, change_marker, clickhouse
from retrieval.store.rows import next_version
from retrieval.store.tenants import Tenant


@dataclass
class NamespaceConfig:
    namespace: str
    registered: bool = False
    retrieval_defaults: dict = field(default_factory=dict)
    text_capture: bool = False
    rerank_endpoint: str = ""
    description: str = ""
    updated_at: datetime | None = None
    updated_by: str = ""
    revision: int = 0  # of the stored row; 0 when none is


# Every search reads its namespace's configuration: keep it a few seconds. A change made in this process replaces
# the copy at once; on a server, where another process may change it, a search first learns the stored revision
# (with its side-table check, retrieval/store/reads.py) and a copy of another revision is read again.
CACHE_SECONDS = 5.0
_configs = TtlCache(CACHE_SECONDS)


def get(scope: Tenant, revision: int | None = None) -> NamespaceConfig:
    """The configuration; `revision`, when known, the one stored now (0: none registered)."""
    config = _configs.get((scope.org, scope.namespace), lambda: _read(scope))
    if revision is not None and revision != config.revision:
        config = _configs.put((scope.org, scope.namespace), _read(scope))
    return config


def _read(scope: Tenant) -> NamespaceConfig:
    rows = clickhouse.query(
        """
        SELECT * FROM namespaces FINAL
        WHERE org = {org:String} AND namespace = {namespace:String}
        """,
        {"org": scope.org, "namespace": scope.namespace},
    )
    if not rows:
        return NamespaceConfig(scope.namespace)
    row = rows[0]
    return NamespaceConfig(
        namespace=scope.namespace,
        registered=True,
        retrieval_defaults=json.loads(row["retrieval_defaults"] or "{}"),
        text_capture=row["text_capture"],
        rerank_endpoint=row["rerank_endpoint"],
        description=row["description"],
        updated_at=row["updated_at"],
        updated_by=row["updated_by"],
        revision=row["revision"],
    )


def register(scope: Tenant, changes: dict) -> tuple[NamespaceConfig, bool]:
    """Create or update; fields not in `changes` keep their registered value. Returns (config, created)."""
    config = _read(scope)
    created = not config.registered
    for name, value in changes.items():
        setattr(config, name, value)
    config.registered, config.updated_at, config.updated_by = True, datetime.now(UTC), scope.subject
    config.revision = next_version()
    clickhouse.insert(
        "namespaces",
        [
            {
                "org": scope.org,
                "namespace": scope.namespace,
                "retrieval_defaults": json.dumps(config.retrieval_defaults, sort_keys=True),
                "text_capture": config.text_capture,
                "rerank_endpoint": config.rerank_endpoint,
                "description": config.description,
                "revision": config.revision,
                "updated_by": config.updated_by,
                "updated_at": config.updated_at,
            }
        ],
    )
    _configs.put((scope.org, scope.namespace), config)
    change_marker.wrote(scope.org, scope.namespace)
    audit.record(scope.org, scope.subject, "namespace.register", scope.namespace, changes)
    return config, created


def names(org: str) -> list[str]:
    """The org's namespaces: those registered and those written to."""
    rows = clickhouse.query_rows(
        """
        SELECT namespace FROM namespaces WHERE org = {org:String}
        UNION DISTINCT
        SELECT DISTINCT namespace FROM memories WHERE org = {org:String}
        """,
        {"org": org},
    )
    return sorted(row[0] for row in rows)
