"""Session digests: `session_summary.set` and `.delete`, one paragraph per session saying what it covered.

A deployment's summarising worker is out of this build's scope, so digests have a write path of their own: a
caller (or `manage.py summarize_sessions`, with an LLM) sends each session's summary. A digest is judged for
sensitivity like a value (high: stored, never embedded, never served), embedded as values are, and stored with
an empty vector when the org's model calls are off (embed_pending embeds it later). The digest leg
(retrieval/search/legs/digests.py) reads them.
"""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from retrieval.caching import TtlCache
from retrieval.ingest import sensitivity
from retrieval.ingest.write import embed_texts
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse
from retrieval.store.rows import next_version
from tenancy.access import Scope
from tenancy.roles import Role

log = logging.getLogger(__name__)

# A digest hit's memory_key is this and its session_id: a label (a hit's `source` says it is a digest).
KEY_PREFIX = "summary:"


@dataclass(frozen=True)
class DigestInput:
    session_id: str
    summary: str
    session_date: datetime | None = None
    user_id: str = ""
    sensitivity: str = "low"


@dataclass
class DigestResult:
    session_id: str
    outcome: str  # created, updated or unchanged
    version: int
    sensitivity: str
    sensitivity_reason: str | None
    embedding_model: str
    embedding_pending: bool = False


def set_digests(scope: Scope, agent: str, items: list[DigestInput]) -> list[DigestResult]:
    """Store a batch of digests, all or nothing; an unchanged digest is left as it is."""
    stored = _live(scope, [item.session_id for item in items])
    now, results, rows, todo = datetime.now(UTC), [], [], []
    for item in items:
        level, reason = sensitivity.effective(item.sensitivity, item.summary)
        previous = stored.get(item.session_id)
        if previous and (
            previous["summary"],
            previous["session_date"],
            previous["user_id"],
            previous["sensitivity"],
        ) == (
            item.summary,
            item.session_date,
            item.user_id,
            level,
        ):
            results.append(
                DigestResult(
                    item.session_id, "unchanged", previous["version"], level, reason, previous["embedding_model"]
                )
            )
            continue
        embedded = level != "high"
        row = {
            "org": scope.org,
            "namespace": scope.namespace,
            "session_id": item.session_id,
            "version": next_version(),
            "status": "active",
            "agent": agent,
            "user_id": item.user_id,
            "summary": item.summary,
            "session_date": item.session_date,
            "sensitivity": level,
            "embedding_model": get_embedder().model_name if embedded else "",
            "embedding_dim": 0,
            "vector": [],
            "actor": scope.subject,
            "created_at": previous["created_at"] if previous else now,
            "updated_at": now,
        }
        rows.append(row)
        todo += [row] if embedded else []
        outcome = "updated" if previous else "created"
        results.append(DigestResult(item.session_id, outcome, row["version"], level, reason, row["embedding_model"]))
    pending = not _embed(scope, todo, {item.user_id for item in items})
    for result in results:
        result.embedding_pending = pending and result.outcome != "unchanged" and bool(result.embedding_model)
    clickhouse.insert("session_summaries", rows)
    if rows:
        _held.put((clickhouse.target(), scope.org, scope.namespace), True)
    return results


def _embed(scope: Scope, rows: list[dict], users: set[str]) -> bool:
    """Embed the digests as values are embedded; False when the org's model calls are refused (stubs stay)."""
    vectors = embed_texts(scope, "session_summary.set", [row["summary"] for row in rows], users)
    for row, vector in zip(rows, vectors or []):
        row["vector"], row["embedding_dim"] = vector, len(vector)
    return vectors is not None


def embed_stubs(batch_size: int, skip_orgs: set[str], actor: str, org: str | None = None) -> int:
    """Embed digests stored with empty vectors (their org's model calls were off), newest first, one call per
    (org, namespace); an org still refused keeps its stubs for a later pass. How many were embedded."""
    rows = clickhouse.query(
        """
        SELECT * FROM session_summaries FINAL
        WHERE embedding_model = {model:String} AND embedding_dim = 0 AND status = 'active'
          AND org NOT IN {off:Array(String)} AND ({org:Nullable(String)} IS NULL OR org = {org:Nullable(String)})
        ORDER BY version DESC
        LIMIT {batch:UInt32}
        """,
        {"model": get_embedder().model_name, "off": sorted(skip_orgs), "org": org, "batch": batch_size},
    )
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["org"], row["namespace"]), []).append(row)
    done = 0
    for (org_name, namespace), stubs in sorted(groups.items()):
        scope = Scope(org=org_name, namespace=namespace, role=Role.ADMIN, subject=actor)
        fresh = [{**row, "version": next_version(), "updated_at": datetime.now(UTC)} for row in stubs]
        try:
            embedded = _embed(scope, fresh, {row["user_id"] for row in stubs})
        except customer.HOLDS as exc:
            log.warning("embed_pending holds %d digests of %s/%s: %s", len(stubs), org_name, namespace, exc)
            continue
        if embedded:
            clickhouse.insert("session_summaries", fresh)
            done += len(fresh)
    return done


def delete_digest(scope: Scope, session_id: str) -> int:
    """Retire a session's digest; returns how many were live (0 or 1)."""
    previous = _live(scope, [session_id]).get(session_id)
    if previous is None:
        return 0
    now = datetime.now(UTC)
    gone = {**previous, "version": next_version(), "status": "deleted", "actor": scope.subject, "updated_at": now}
    clickhouse.insert("session_summaries", [gone])
    return 1


def _live(scope: Scope, session_ids: list[str]) -> dict[str, dict]:
    rows = clickhouse.query(
        """
        SELECT * FROM session_summaries FINAL
        WHERE org = {org:String} AND namespace = {namespace:String} AND session_id IN {sessions:Array(String)}
          AND status = 'active'
        """,
        {"org": scope.org, "namespace": scope.namespace, "sessions": session_ids},
    )
    return {row["session_id"]: row for row in rows}


def held(org: str, namespaces: list[str]) -> bool:
    """Whether any of these namespaces has a live digest: a search of a namespace without one skips the leg."""

    def read(namespace: str) -> bool:
        return bool(
            clickhouse.query_value(
                """
                SELECT count() > 0 FROM session_summaries FINAL
                WHERE org = {org:String} AND namespace = {namespace:String} AND status = 'active'
                """,
                {"org": org, "namespace": namespace},
            )
        )

    target = clickhouse.target()
    return any(_held.get((target, org, namespace), lambda n=namespace: read(n)) for namespace in namespaces)


# A write in this process is seen at once; another process's first digest within 10 s.
_held = TtlCache(10)
